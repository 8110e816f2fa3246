// Package vsphere holds every action the migration controller takes on the
// VMware side, built on github.com/vmware/govmomi.
//
// The package is organised by concern:
//
//   - connect.go: credentials from a Secret (or a mounted Secret directory),
//     TLS verification against a CA bundle or a certificate thumbprint, login,
//     and the Session that wraps a logged-in vim25 client.
//   - session.go: a SessionCache that reuses sessions per endpoint and
//     credentials version, re-logs in after the server drops a session, and
//     puts a deadline on every SOAP call.
//   - find.go: finding exactly one virtual machine from a v1alpha1.VMSelector.
//   - inventory.go: reading a VM's inventory into v1alpha1.SourceInventory in
//     as few property-collector round trips as possible.
//   - power.go and snapshot.go: power control and snapshots, each function a
//     single idempotent call that observes before it acts.
//   - cbt.go: the allocated areas of a powered-off VM's disk, from changed
//     block tracking (QueryChangedDiskAreas with changeId "*"), for the
//     transfer's allocated-only copy.
//   - errors.go: Classify, which sorts errors into classes the state machine
//     uses to decide between retry and failure.
//
// Power operations and snapshots have no idempotency key on the vSphere side.
// The controller therefore records its intent in the migration's status
// before it calls one of these functions, and each function tolerates being
// called again after a crash: powering off a VM that is already off succeeds,
// creating a snapshot that already exists returns the existing one.
//
// Secrets never reach a log line or an error string: Credentials redacts its
// password when formatted, and errors name missing keys, never values. Do not
// set GOVMOMI_DEBUG in production: govmomi's own debug tracing writes SOAP
// bodies, including the Login request, to disk.
//
// Everything here is tested against govmomi's in-process simulator (vcsim)
// in both its vCenter (VPX) and standalone ESXi (ESX) models.
package vsphere
