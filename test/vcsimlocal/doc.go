// Package vcsimlocal is the project's own vSphere peer for end-to-end tests
// and local runs: govmomi's simulator (vcsim) with a sample inventory whose
// disks hold real bytes, laid out the way an ESXi host keeps them (a small
// text descriptor name.vmdk naming a flat extent name-flat.vmdk), so the
// real transfer command reads the descriptor and streams the extent as it
// does in production.
//
// The server listens on 127.0.0.1 only, over TLS with a self-signed
// certificate that clients verify by its SHA-256 thumbprint. Like a real
// host (and unlike plain vcsim) it serves datastore files only to the
// cookie of a live session of its session manager: a session that logged
// out, expired or was ended (EndSessions) gets 401, so its holder must log
// in again. It can inject faults into the flat-extent downloads of one VM
// (FailExtentReads) or hold them (HoldExtentReads), so tests can make a
// transfer fail, or stay in flight, the way a real datastore would.
//
// It answers QueryChangedDiskAreas, which vcsim does not implement, as
// ESXi does, from the real allocation of the flat extents (cbt.go), and
// lays out thin disks as sparse extents with a known share written
// (thin.go), so that the transfer's allocated-only copy runs against it.
//
// Its inventory can be shaped as real ones are: several datacenters and
// datastores (Options), VMs in sub-folders, with their configuration on one
// datastore and disks on others (the VM's directory made on each), and
// disks of any size that is a multiple of 512 bytes.
//
// A VM's NICs can carry PCI slots and what VMware Tools reports of them
// from a running guest (guest.net: addresses with prefix and origin, DNS;
// guest.ipStack: default routes, DNS), set when the VM is made or later
// (SetGuestNetwork), so that the inventory of guest addresses and the
// static IP checks run against what vSphere answers.
//
// The command in cmd/vcsim-local serves the sample inventory for
// hack/run-local.sh.
package vcsimlocal
