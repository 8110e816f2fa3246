// Package preflight holds the pure rules that decide, before anything is
// touched, whether a VM can be migrated as the spec asks.
//
// Check takes the migration spec, the source inventory read from vSphere
// (pkg/vsphere) and the facts the controller gathered from the cluster
// (ClusterFacts), and returns one v1alpha1.PreflightFinding per problem. It
// does no I/O and reads no clock, so every rule is tested with tables. A
// Blocking finding stops the migration in the Validating phase; a Warning is
// reported in status and does not.
package preflight
