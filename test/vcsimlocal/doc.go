// Package vcsimlocal is the project's own vSphere peer for end-to-end tests
// and local runs: govmomi's simulator (vcsim) with a sample inventory whose
// disks hold real bytes, laid out the way an ESXi host keeps them (a small
// text descriptor name.vmdk naming a flat extent name-flat.vmdk), so the
// real transfer command reads the descriptor and streams the extent as it
// does in production.
//
// The server listens on 127.0.0.1 only, over TLS with a self-signed
// certificate that clients verify by its SHA-256 thumbprint. Like a real
// host (and unlike plain vcsim) it refuses datastore downloads without a
// session cookie. It can inject faults into the flat-extent downloads of one
// VM (FailExtentReads), so tests can make a transfer fail the way a broken
// datastore would.
//
// The command in cmd/vcsim-local serves the sample inventory for
// hack/run-local.sh.
package vcsimlocal
