// Package kubevirt installs KubeVirt's control plane, as
// hack/build-kubevirt.sh builds it from KubeVirt's modules, into the test
// cluster the way virt-operator would, from the objects virt-operator's
// own generators write (never pasted upstream files):
//
//   - the namespace kubevirt and every KubeVirt CRD, Established;
//   - the CA Secrets, each component's certificate Secret and the CA
//     bundle ConfigMaps, made at install time by the build's kubevirt-crds
//     with KubeVirt's own population strategies (-certs-out);
//   - the KubeVirt CR (emulation on: the node has no KVM it may use) with
//     status.phase Deployed, which virt-operator sets and without which
//     virt-api and virt-controller read no cluster configuration;
//   - the RBAC, Service, webhook configurations and APIServices of install/,
//     their CA bundles kubevirt-ca's, and the virt-api and virt-controller
//     Deployments (one replica each: one node), their images imported into
//     the node beforehand (Build.Tarballs); virt-controller's RBAC with the
//     rule for Multus' NetworkAttachmentDefinitions (the build ships that
//     CRD, as a cluster with Multus has it), and virt-handler's
//     ServiceAccount and RBAC without its DaemonSet.
//
// The KubeVirt CR's configuration (launcherConfiguration) is TCG, a
// RuntimeDefault seccomp profile for virt-launcher pods, no
// guest-console-log container, and requests sized for the two-core test
// node.
//
// Install returns once virt-api and virt-controller are Available, the
// subresources APIService is Available and virt-api's webhooks answer a
// VirtualMachine dry run. Without Options.Node, virt-handler and
// virt-launcher are not installed: a VirtualMachineInstance is admitted
// and gets its launcher pod from virt-controller; test/standins
// (Config.RealKubeVirt) plays virt-handler, acting as its ServiceAccount,
// and the launcher image of test/images, imported as
// localhost/kubevirt/virt-launcher:<version>, runs the guest.
//
// With Options.Node (hack/build-kubevirt-node.sh's folder, LoadNodeBuild;
// its images imported, the node started with framework.WithPrivilegedPods
// and WithNetworkAttachments), virt-handler's DaemonSet of node/ is
// installed too, in the namespace labelled privileged, the serial console
// log kept (virt-tail's guest-console-log container), and Install waits
// until virt-handler is ready and its node labelled schedulable: KubeVirt
// itself runs the guests, in the real virt-launcher.
//
// DefineNetwork defines a Multus network; Summary says what runs where.
package kubevirt
