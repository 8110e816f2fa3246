// Package source is the controller's SourceStep: it ties a migration to its
// vSphere VM through the credentials Secret (read by name, never listed),
// a reused session, and the operations of package vsphere, and turns every
// failure into a classified observation the state machine can act on.
package source
