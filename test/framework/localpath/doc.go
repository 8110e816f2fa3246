// Package localpath installs the test node's real storage: Rancher's
// local-path-provisioner (hack/build-local-path.sh builds it and its two
// images from modules and Debian's busybox), as its upstream manifest has
// it, from Go code of ours: the namespace local-path-storage, its
// ServiceAccount, Role and ClusterRole with their bindings, the ConfigMap
// local-path-config (config.json naming the folder on the node that holds
// every volume, the setup and teardown scripts, the helper pod's
// template), the Deployment local-path-provisioner, and the StorageClass
// local-path (provisioner rancher.io/local-path, WaitForFirstConsumer,
// reclaim Delete, volumes of type local so that the kubelet applies a
// pod's fsGroup to them).
//
// On a claim of that class that a pod is scheduled with, the provisioner
// starts a helper pod on the node that creates the volume's folder with
// the setup script, then creates a local PersistentVolume on it with the
// claim's size and access modes, pinned to the node; deleting the claim
// runs the teardown script and removes the folder. It supports Filesystem
// ReadWriteOnce (and ReadWriteOncePod) claims only: a Block claim gets a
// Filesystem volume, which the claim never binds, and ReadWriteMany is
// refused. The size is not enforced (a folder, no quota). CDI knows the
// provisioner (its StorageProfile says ReadWriteOnce Filesystem) and has
// no CSI clone nor snapshot for it: its clones are host-assisted copies.
package localpath
