// Package naming derives the deterministic names of every object the
// controller creates for a migration, so that a crash between a create and
// the status write that records it is harmless: the next reconcile computes
// the same name and finds the object.
package naming
