// Package wire is the contract between the migration controller and the
// vm-transfer command: the job spec the controller renders into the
// transfer Job's ConfigMap, the progress and result documents the command
// writes (on stdout, in the termination message and in the progress
// ConfigMap under the ConfigMapKey* keys), and the failure reasons it
// reports. It is a leaf: no I/O beyond reading a spec file, no client, so
// the controller links it without the copy engine (package transfer).
package wire
