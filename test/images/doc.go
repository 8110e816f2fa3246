// Package images builds the container images the end-to-end tests and
// make run-local import into the real test node (test/framework), without
// a container engine:
//
//   - the controller's image, exactly as `make image` builds it (the
//     migration-controller entrypoint and vm-transfer, which the transfer
//     Jobs run);
//   - the SIMULATED conversion image: Debian's static busybox for /bin/sh
//     and the few tools the controller's conversion script calls, and a
//     simulated virt-v2v-in-place (simulatedv2v/virt-v2v-in-place) that
//     answers as Debian 12's virt-v2v-in-place 2.2.0 does, checks that every
//     disk of the domain is readable and writable by the pod's user, and
//     converts nothing, and a simulated v2v-self-check
//     (simulatedv2v/v2v-self-check) that answers as the project's
//     conversion image's does (the image proof pod runs it), reporting, as
//     the real image does, no virtio-win drivers. The sample VMs of the
//     end-to-end tests and of make run-local have disks of random bytes,
//     which a real conversion refuses; everything around virt-v2v (the
//     controller's script, the pod's user, security context, volumes and
//     termination message) runs for real. The real conversion image is
//     hack/conversion-image's.
//   - the launcher image the KubeVirt stand-in runs each instance's guest
//     with (Launcher): Debian's QEMU (qemu-system-x86 and its TCG module),
//     SeaBIOS, the iPXE ROMs and OVMF, with the shared libraries QEMU's
//     binary needs (their Debian packages, followed from qemu-system-x86's
//     dependencies and checked against every DT_NEEDED of the binary and
//     the TCG module), downloaded with the machine's apt into the image
//     cache and unpacked with dpkg-deb (no maintainer script runs), plus
//     the static vmi-launcher command (cmd/vmi-launcher, package launcher)
//     as entrypoint, user 107.
//
// Built images are tarballs that `ctr images import` takes, cached by
// content under the framework's image cache.
package images
