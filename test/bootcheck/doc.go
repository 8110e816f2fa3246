// Package bootcheck boots a migrated disk outside a node, the way the
// KubeVirt stand-in's launcher runs an instance (package
// test/images/launcher, with the machine's QEMU under TCG), and waits for
// the guest's boot marker on its first serial port. The end-to-end tests
// run migrated guests in launcher pods instead; hack/conversion-image's
// runc check, which has no node, boots its converted disk with this.
//
// The test guests (hack/build-guest-images.sh) print one line that starts
// with their marker and carries key=value pairs describing what a
// conversion left in them (hack/guest/v2v-guest-marker); Result.Fields
// holds them.
package bootcheck
