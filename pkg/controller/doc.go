// Package controller runs the reconcile loop of VirtualMachineMigrations in
// the style of sample-controller: shared informers feed a typed,
// rate-limited workqueue; workers take one key at a time (the queue never
// hands the same key to two workers); the sync function reads the migration
// from the lister, gathers what the steps observe, asks the pure state
// machine for a decision, writes status only when it changed, executes at
// most the one action decided, and requeues for waiting (RequeueAfter) or
// with backoff on errors.
package controller
