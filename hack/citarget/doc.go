// Package citarget holds the tests of what CI runs: .ci/run calls
// make test, and those tests read the Makefile's recipe for it
// (make -n) to check what it runs and in which order.
package citarget
