// Package steps defines the contracts between the controller and the steps
// that act for it: SourceStep (the vSphere side, implemented by package
// steps/source) and PipelineStep (the Kubernetes side of the data path,
// implemented by package steps/pipeline). It is a leaf: the controller and
// the steps both import it, and no step imports the controller.
//
// Following crossplane-runtime's ExternalClient contract, each step
// observes, creates and deletes its own children: Observe never changes
// anything, every create tolerates AlreadyExists for an object of the same
// migration, and every delete names an object that carries the migration's
// UID label and is sent with a UID precondition.
package steps
