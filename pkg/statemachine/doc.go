// Package statemachine decides, for one VirtualMachineMigration, what the
// controller does next. It is pure: Decide takes the migration, what the
// steps observed of the world and the current time, and returns the new
// status, the one action to take and when to look again. It performs no
// I/O, holds no client and never reads the clock, so every decision can be
// replayed and table-tested.
//
// Each phase names a desired state (a checkpoint). A phase advances only
// once its desired state is observed, and the evidence of it is written into
// the returned status in the same decision. A controller that restarts at
// any instant re-observes and decides again from the recorded phase:
// nothing that is already true is redone, nothing is skipped.
//
// It imports only the API types (pkg/apis) and pkg/naming, a pure leaf
// that derives every child's name: a decision records the names of the
// children it asks to create in status, and the steps read them there.
// Delete actions name the observed objects they delete (ObjectRef), each
// carrying the migration's UID, so the steps never delete by name alone.
package statemachine
