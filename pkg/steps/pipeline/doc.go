// Package pipeline is the controller's PipelineStep: it renders and creates
// the Kubernetes-side objects of a migration's data path, and reads the
// Jobs back into what the state machine needs.
//
// Rendering is pure (one file per concern): staging volumes (staging.go),
// the transfer Job and its job-spec ConfigMap (transferjob.go), the libvirt
// domain XML, ConfigMap and Job of the guest conversion (conversion.go), the
// target DataVolumes (datavolume.go), the KubeVirt VirtualMachine (vm.go),
// and the observation of a finished or running Job (readjob.go). The Step
// methods (step.go) only create what is absent: an AlreadyExists of an
// object that carries this migration's UID label is success, of any other
// object a clear error, so a crash between a create and the status write
// that records it is harmless.
//
// Everything renders from the spec in force: status.appliedSpec once the
// controller committed to the cutover, spec before. Every child carries the
// labels LabelMigrationUID, LabelMigrationName and LabelComponent. Staging
// volumes, Jobs and ConfigMaps are controlled by the migration (owner
// reference); the DataVolumes and the VirtualMachine never are, so that
// deleting a finished migration never deletes the migrated VM. The VM adopts
// its DataVolumes once it exists (AdoptDataVolumes).
package pipeline
