// Package builders builds the objects every test tree of the project
// uses: migrations (with modifier functions, in the style of
// cert-manager's test builders), source inventories, the status a
// migration has when it reached a phase, and the children the controller
// creates (staging claims, Jobs and their pods, ConfigMaps, DataVolumes,
// VirtualMachines, per-attempt access objects), plus the Secrets and
// StorageClasses around them.
//
// Every builder starts from a realistic object and each modifier changes
// one thing, so that a table row reads as the difference it tests. Times
// are relative to T0. The package imports no package under test beyond the
// API types and naming, so the tests of any package (the pure state
// machine's included) can use it.
package builders
