// Package standins is a SIMULATOR of the cluster actors that cannot run on
// a development machine or in CI (no container runtime, no kubelet, no
// KubeVirt, no CDI, no storage provisioner), for the end-to-end tests and
// hack/run-local.sh. Everything else is real: etcd, kube-apiserver,
// kube-controller-manager (its Job controller creates the pods, its garbage
// collector deletes children), the migration controller, and the vm-transfer
// command moving real bytes from vcsim.
//
// The stand-ins, each a small controller against the real API server:
//
//   - Kubelet: registers a Node and renews its Lease, binds the pods the Job
//     controller creates to it (there is no scheduler), and runs them:
//     a pod whose image is the project's transfer image runs the REAL
//     vm-transfer command as a local process, with the pod's ConfigMap and
//     Secret volumes written to files, emptyDirs as directories and each
//     PersistentVolumeClaim mapped to its volume's local directory. Paths
//     inside the container (arguments, the job spec's destinations, the
//     termination message path) are rewritten to those directories, since
//     there is no mount namespace. The process's exit code and termination
//     message go into the pod's status as a kubelet reports them, so the
//     Job controller marks the Job Complete or Failed. A conversion pod
//     whose image is Config.RealConversionImage runs for REAL where
//     virt-v2v-in-place, nbdkit and qemu are installed: the pod's own script
//     and domain XML from its ConfigMap (container paths rewritten to the
//     pod's directories) over the staged images, as the pod's uid/gid with
//     its fsGroup as only supplementary group, through setpriv (no new
//     privileges, no capabilities), with the pod's environment, TMPDIR on
//     its /tmp volume, a libguestfs appliance cached across runs
//     (Config.LibguestfsCacheDir) and TCG unless the pod asks for /dev/kvm;
//     one conversion at a time on the machine. Not reproduced: the
//     read-only root file system (the process may write wherever its uid
//     may on the host), the seccomp and AppArmor profiles, the namespaces,
//     the resource limits. Every other conversion pod, and all of them
//     where the tools are missing (the log says so), is simulated: marked
//     Succeeded with a small virt-v2v inspection document as termination
//     message, the staged bytes left as transferred. Any other pod fails
//     with a message saying the stand-in cannot run it. A transfer pod given
//     --progress-configmap gets --progress-file instead, and the stand-in
//     relays that file into the ConfigMap with a token issued for the pod's
//     ServiceAccount, so the per-attempt Role is really exercised.
//   - Storage: a default StorageClass, and for every claim a PersistentVolume
//     backed by a local directory (hostPath), pre-bound to the claim, and
//     the binding completed at once as the PersistentVolume controller
//     would (it only notices on its periodic resync). Released
//     volumes are deleted with their directory.
//   - CDI: for each DataVolume cloning a PVC, creates the target claim
//     (named after the DataVolume, its labels copied), copies the files at
//     the source volume's root (disk.img) into it, sparse, and moves the
//     DataVolume through CloneScheduled and CloneInProgress (with
//     status.progress) to Succeeded.
//   - KubeVirt: for a VirtualMachine whose runStrategy is Always (or
//     running: true), creates its VirtualMachineInstance (same name, the
//     template's labels, annotations and spec, controlled by the VM) and
//     marks it Running; for Halted, deletes it. No guest ever boots.
//
// Run starts all four; each can also be used alone. Fault injection for
// tests goes through Config.PodHook.
package standins
