// Package standins is a SIMULATOR of the cluster actors the test machine
// cannot run for real (no KubeVirt, no CDI, no storage provisioner), for
// the end-to-end tests and hack/run-local.sh. Everything else is real:
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler, a real
// node (kubelet, kube-proxy, containerd, runc; test/framework) running the
// transfer and conversion pods as containers, the migration controller as
// its Deployment, and the vm-transfer command moving real bytes from vcsim.
// There is no kubelet simulation here: the control-plane benchmark's
// minimal pod completer lives in hack/benchscale.
//
// The stand-ins, small controllers against the real API server, and the
// admission webhooks of the components they stand in for:
//
//   - Storage: a default StorageClass, and for every claim a PersistentVolume
//     backed by a local directory, pre-bound to the claim (a `local`
//     volume pinned to Config.LocalVolumeNode, which the real kubelet
//     mounts and applies the pod's fsGroup to; hostPath without a node), and
//     the binding completed at once as the PersistentVolume controller
//     would (it only notices on its periodic resync). Released
//     volumes are deleted with their directory.
//   - CDI: for each DataVolume cloning a PVC, creates the target claim
//     (named after the DataVolume, its labels copied), copies the files at
//     the source volume's root (disk.img) into it, sparse, and moves the
//     DataVolume through CloneScheduled and CloneInProgress (with
//     status.progress) to Succeeded. Before it does, it waits as CDI v1.66's
//     clone controller does: for a clone from another namespace, a valid
//     clone token (else the sync fails and is retried, with no target claim:
//     "token missing"); for the source claim (event CloneWithoutSource); for
//     a source whose content type is the target's and, with spec.pvc, whose
//     size fits (event CloneValidationFailed); for the source to be bound and
//     written by no running pod (event CloneSourceInUse). The copy runs at
//     disk speed, its progress written every half second off the copy's
//     path, unless Config.CloneBytesPerSecond throttles it (the
//     DataVolume's Running condition then says so); a 320 MiB disk takes
//     about as long as a plain copy of the file (BenchmarkCDIStandinImport).
//     With Config.RealCDI (make test-e2e, make run-local and make
//     test-conversion, where test/framework/cdi installs CDI v1.65.0 and
//     test/framework/localpath the real storage) it does nothing and
//     registers no DataVolume webhook: CDI's own controller and pods
//     import every disk. The benchmarks and the integration suites keep it.
//     It also plays CDI's claim adoption, the one-pass data path's import
//     (test/integration/cdi/adopt_test.go proves it against CDI v1.65): a
//     DataVolume whose claim (its name, its namespace) exists and needs
//     no work, that is one whose annotation cdi.kubevirt.io/allowClaimAdoption
//     reads true (strconv.ParseBool) on a claim CDI did not create for it
//     (cdi.kubevirt.io/createdForDataVolume, which the stand-in puts on the
//     claims it creates), or a claim annotated
//     cdi.kubevirt.io/storage.populatedFor with its name, whatever its
//     source: the DataVolume is made the claim's controller as
//     controller-runtime's SetControllerReference does (other owner
//     references kept; a reference to an earlier DataVolume of the name
//     replaced) and marked Succeeded with progress "N/A" (no pod reported
//     any, as CDI's), with no pod and nothing copied, so deleting it lets
//     the garbage collector delete the claim. A claim another object
//     controls keeps its controller: as in CDI, whose sync then fails while
//     its status update does not look at owners, the DataVolume is marked
//     Succeeded all the same and the sync fails and is retried ("Object
//     ns/name is already owned by another Kind controller name"); the
//     stand-in adds a Warning event StandinClaimNotAdopted once, where CDI
//     only logs. A claim being deleted gets CDI's event
//     ErrResourceMarkedForDeletion and the DataVolume waits. A blank
//     DataVolume (spec.source.blank) with no claim gets one of its own
//     (from spec.pvc or spec.storage, controlled by it), and once bound a
//     sparse disk.img of the requested size on a Filesystem claim, then
//     Succeeded at "100.0%"; a claim of its name that it may not adopt and
//     does not control gets CDI's event ErrResourceExists and the sync
//     retried. Any other source (http, registry, upload...) fails the
//     DataVolume.
//   - KubeVirt: for a VirtualMachine whose runStrategy is Always (or
//     running: true), creates its VirtualMachineInstance (same name, the
//     template's labels, annotations and spec, controlled by the VM); when
//     the API server refuses it, the VM gets a FailedCreate event and a
//     Failure condition and stays Stopped. The instance stays Pending, with
//     a FailedPvcNotFound condition and the VM at ErrorPvcNotFound, while a
//     volume's DataVolume or claim is missing, and the VM shows Provisioning
//     while a DataVolume is not Succeeded. Then, with Config.LauncherImage
//     (the end-to-end tests, make run-local), the guest RUNS: a launcher
//     pod on the real node (virt-launcher-<instance>, controlled by the
//     instance, labelled as KubeVirt labels virt-launcher pods, container
//     "compute", fit for PodSecurity restricted: user, group and fsGroup
//     107, no capability, read-only root) runs QEMU from the launcher image
//     of test/images with the instance's hardware and each disk's claim
//     mounted by the kubelet (test/images/launcher says what is taken from
//     the spec); TCG, or KVM through the node's kvm RuntimeClass when
//     Config.LauncherRuntimeClass (or the instance's
//     AnnotationLauncherRuntimeClass) names it. The instance is Scheduling
//     while the pod waits (the VM shows ErrImagePull, ImagePullBackOff or
//     ErrorUnschedulable when that is why), Scheduled once the container
//     runs, Running once QEMU runs the guest (the pod is Ready), and
//     Succeeded or Failed when the pod ends (the guest powered off; QEMU or
//     the launcher failed, its termination message in the Ready
//     condition). The pod's log carries the guest's serial console. While
//     it runs, the stand-in asks the launcher (its status port, through
//     the API server's pod proxy, every 2 s) what QEMU's guest agent
//     answered, and reports it as virt-handler does: the AgentConnected
//     condition while the guest holds the agent's port open,
//     status.guestOSInfo from guest-get-osinfo, and status.interfaces from
//     the domain's interfaces (MACs), the pod's IPs on the pod network's
//     interface, and guest-network-get-interfaces merged by MAC (the
//     guest's name of each, its addresses where the pod gave none of that
//     family, infoSource "domain, guest-agent"; loopback left out; an
//     interface of no domain MAC added as "guest-agent"). Without
//     Config.LauncherImage (no node: integration tests, control-plane
//     benchmarks) the instance is marked Running after Config.VMIStartDelay
//     and no guest runs. For Halted, it deletes the instance; with
//     VMIGracePeriod set, the instance carries virt-controller's finalizer
//     and stays, being deleted, until its launcher pod is gone (the
//     launcher shuts a guest whose agent answered down by ACPI within the
//     instance's grace period, and stops any other at once) and at least
//     that long (KubeVirt's termination grace period, 30 s by default),
//     then turns Succeeded and goes; without it the garbage collector
//     deletes the pod after the instance.
//   - KubeVirt beside KubeVirt's own control plane (Config.RealKubeVirt:
//     make test-e2e and make run-local, where test/framework/kubevirt
//     installs the real virt-api and virt-controller): the stand-in
//     registers no KubeVirt webhook, creates no instance or pod and writes
//     no VM status; it plays virt-handler only (kubevirt_handler.go). It
//     labels the node schedulable and q35-capable and announces KubeVirt's
//     device resources (devices.kubevirt.io/kvm, tun, vhost-net) as
//     virt-handler's node labeller and device plugins do; it hands each
//     instance virt-controller scheduled on the node (phase Scheduled, its
//     virt-launcher pod running) to that pod's launcher, the launcher image
//     of test/images imported as localhost/kubevirt/virt-launcher and run
//     by virt-controller's own command line (virt-launcher-monitor, which
//     waits for its instance), after Config.VMIStartDelay; and it reports
//     the instance Running once QEMU runs the guest, with the guest
//     agent's report as above, and Succeeded or Failed as the pod ends. It
//     writes instances as virt-handler's ServiceAccount (HandlerUser,
//     whose RBAC the install applies), reading them from its cache as
//     that account may only list and watch them, because virt-api undoes
//     status changes by anyone else. With Config.VMIGracePeriod, a finalizer
//     of the stand-in keeps each deleted instance that long, as KubeVirt
//     does while it waits for a guest that ignores the ACPI shutdown. Not
//     played: KVM (TCG
//     only: KubeVirt's useEmulation), the domain's own events, migrations,
//     hotplug, paused guests, the guest's console through virt-api.
//   - No KubeVirt at all beside KubeVirt's own node side
//     (Config.RealKubeVirtNode: make test-kubevirt, and make
//     test-conversion and make run-local with KUBEVIRT_NODE=1, where
//     virt-handler's DaemonSet and the real virt-launcher run the guests).
//   - Admission (StartAdmission, and Run before anything else): the
//     webhooks of KubeVirt (not beside the real KubeVirt) and CDI, served over TLS on 127.0.0.1 with a
//     certificate of a CA generated at start, registered by a
//     ValidatingWebhookConfiguration and a MutatingWebhookConfiguration
//     with URL and CA bundle (limited to Config.Namespace when set), under
//     the names KubeVirt and CDI register, failing closed, and removed when
//     the stand-ins stop.
//
// # Rules of the real components the stand-ins enforce
//
// Together with the CRDs in test/crds, whose schemas are generated from
// KubeVirt's and CDI's Go types (so the API server validates and prunes
// every field as a real cluster does; hack/update-test-crds.sh):
//
// KubeVirt v1.9.0's VirtualMachine webhook (kubevirt_rules.go and
// kubevirt_storage_rules.go name the function and file of each): a
// template; exactly one of runStrategy and running, and a known run
// strategy; guest memory within the memory limit; machine type q35*;
// at most one pod network and one default Multus network; each network of
// exactly one kind, Multus with a networkName; each interface with exactly
// one binding, masquerade only on the pod network and never with the
// in-pod bridge's MAC; network and interface names unique and paired one
// to one; interface names, models and MAC addresses well formed; every
// disk (but an empty CD-ROM) names a volume; boot orders above 0 and
// unique across disks and interfaces; disk names unique, one target per
// disk, bus virtio, sata, scsi or usb (ide refused), no CD-ROM on virtio,
// no read-only SATA disk, serials of [A-Za-z0-9_.+-] up to 256; BIOS or
// EFI, not both; EFI secure boot (on unless secureBoot is false) only with
// SMM; dataVolumeTemplates named, with one target, one source, used by a
// volume and in the VM's namespace. The VMI create webhook adds: a memory
// size, and a disk or filesystem for every volume. The messages, fields and
// 422 shape are KubeVirt's, so a refusal reads as in a real cluster.
//
// CDI v1.66's DataVolume webhooks (cdi_admission.go, cdi_rules.go): the
// mutating webhook's clone authorization, with the CDI API module's own
// DataVolume.AuthorizeUser and real SubjectAccessReviews for the
// request's user (create datavolumes/source, else create pods, in the
// source namespace; a clone within one namespace needs neither), refusing
// with CDI's message and adding a clone token otherwise; the validating
// webhook's immutable spec, claim not taken (a claim of the DataVolume's
// name exists only if a DataVolume controls it, or the DataVolume may take
// it: the adoption annotation true, or the claim populated for it; else
// "Destination PVC ns/name already exists"), exactly one of pvc and
// storage, a size of at least 1 MiB (optional only with storage on a
// clone), access modes, one of source and sourceRef, one kind of source,
// content type, and a PVC source with namespace and name.
//
// # Rules the stand-ins do not enforce
//
// KubeVirt: instancetypes and preferences, feature gates, CPU pinning,
// NUMA, hugepages, probes, host devices, GPUs, DRA, interface ports and PCI
// addresses, discontinued bindings (slirp, macvtap, passt), LUN details,
// anything that needs the KubeVirt CR or other objects, live migration,
// the networks themselves (each NIC gets QEMU's user-mode network that
// reaches nothing; no Multus, no network-status annotation), volumes other
// than DataVolumes and claims (container disks, cloud-init), the launcher
// pod's resource requests (token ones: KubeVirt's would not fit the test
// node's two cores) and its random name, restarting a finished instance
// (RunStrategy Always would), and the rest of virt-handler's and
// virt-launcher's rules.
// CDI: import sources (http, s3, gcs, registry, imageio, vddk), the
// DataSource behind sourceRef, externally populated volumes beyond their
// exclusion of a source, storage profiles and filesystem overhead (the
// target claim gets the source's size), size detection from the image, the
// short/extended token expiry (the stand-in's token is its own HMAC, not
// CDI's JWT), smart clones, and CDI's own importer and cloner pods (the
// stand-in copies on the machine, not in pods). Of claim adoption: CDI's
// DataVolumeClaimAdoption feature gate (held off: only the annotation
// allows adoption), the prePopulated and checkStaticVolume annotations,
// a Lost claim failing the DataVolume, the filesystem overhead of the
// blank image, and the annotations CDI copies from the DataVolume onto
// the claims it creates; the stand-in does not compare an adopted claim's
// spec with the DataVolume's.
//
// Run starts them all, the webhooks first; Config.Ready says when the
// webhooks are active and the StorageClass exists.
package standins
