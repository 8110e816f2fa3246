package preflight

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

func TestStorageProfiles(t *testing.T) {
	profiles := func(fast, slow int) func(*ClusterFacts) {
		return func(c *ClusterFacts) {
			c.StorageProfiles = map[string]StorageProfileFact{
				"fast": {Provisioner: "rancher.io/local-path", ClaimPropertySets: fast}, "slow": {Provisioner: "csi.example.com", ClaimPropertySets: slow},
			}
		}
	}
	runCheckCases(t, map[string]checkCase{
		"the profile gives access modes":         {mods: mods{cluster: profiles(1, 1)}},
		"profiles not read (no CDI): not judged": {},
		"no access modes anywhere: blocked before the stop": {
			mods: mods{cluster: profiles(0, 1)},
			want: []want{{ReasonStorageProfileIncomplete, v1alpha1.SeverityBlocking, []string{
				"disk 2000 (spec.target.storage.default), disk 2001 (spec.target.storage.default) go to storage class fast",
				"provisioner rancher.io/local-path", `"cannot get access mode from StorageProfile fast"`, "kubectl patch storageprofile fast"}}},
		},
		"the mapping names access modes: CDI needs no profile": {
			mods: mods{cluster: profiles(0, 0), spec: func(s *v1alpha1.VirtualMachineMigrationSpec) {
				s.Target.Storage.Default.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
			}},
		},
		"one disk mapped elsewhere: only the other is named": {
			mods: mods{cluster: profiles(0, 1), spec: func(s *v1alpha1.VirtualMachineMigrationSpec) {
				s.Target.Storage.Disks = []v1alpha1.DiskStorageMapping{{DiskKey: 2001, Target: v1alpha1.StorageTarget{StorageClassName: "slow"}}}
			}},
			want: []want{{ReasonStorageProfileIncomplete, v1alpha1.SeverityBlocking, []string{"disk 2000 (spec.target.storage.default) goes to storage class fast"}}},
		},
		"the default class's profile": {
			mods: mods{cluster: func(c *ClusterFacts) {
				profiles(1, 0)(c)
				c.DefaultStorageClass = "slow"
			}, spec: func(s *v1alpha1.VirtualMachineMigrationSpec) { s.Target.Storage.Default.StorageClassName = "" }},
			want: []want{{ReasonStorageProfileIncomplete, v1alpha1.SeverityBlocking, []string{"disk 2000 (the cluster's default storage class)", "storage class slow"}}},
		},
		"a class without a profile: not judged": {
			mods: mods{cluster: func(c *ClusterFacts) { c.StorageProfiles = map[string]StorageProfileFact{} }},
		},
	})
}

// TestStorageModes (issue 46 item 9, issue 49): a mapping that asks a
// class for a volume mode or access modes its CDI StorageProfile lists in
// none of its sets is refused before the stop (Block on local-path, whose
// claims stayed Pending with the source off for half an hour), in the
// profile's words; what the mapping leaves open is the profile's first
// set's.
func TestStorageModes(t *testing.T) {
	block, fs := corev1.PersistentVolumeBlock, corev1.PersistentVolumeFilesystem
	rwo, rwx := corev1.ReadWriteOnce, corev1.ReadWriteMany
	localPath := StorageProfileFact{Provisioner: "rancher.io/local-path", ClaimPropertySets: 1, AccessModes: []corev1.PersistentVolumeAccessMode{rwo}, VolumeMode: &fs,
		Sets: []ClaimProperties{{AccessModes: []corev1.PersistentVolumeAccessMode{rwo}, VolumeMode: &fs}}}
	ceph := StorageProfileFact{Provisioner: "rbd.csi.ceph.com", ClaimPropertySets: 2, AccessModes: []corev1.PersistentVolumeAccessMode{rwx}, VolumeMode: &block,
		Sets: []ClaimProperties{{AccessModes: []corev1.PersistentVolumeAccessMode{rwx}, VolumeMode: &block}, {AccessModes: []corev1.PersistentVolumeAccessMode{rwo}, VolumeMode: &fs}}}
	class := func(name string, p StorageProfileFact) func(*ClusterFacts) {
		return func(c *ClusterFacts) { c.StorageProfiles = map[string]StorageProfileFact{name: p} }
	}
	mapping := func(mode *corev1.PersistentVolumeMode, modes ...corev1.PersistentVolumeAccessMode) func(*v1alpha1.VirtualMachineMigrationSpec) {
		return func(s *v1alpha1.VirtualMachineMigrationSpec) {
			s.Target.Storage.Default.VolumeMode, s.Target.Storage.Default.AccessModes = mode, modes
		}
	}
	runCheckCases(t, map[string]checkCase{
		"Block on local-path: refused before the stop, in the profile's words": {
			mods: mods{cluster: class("fast", localPath), spec: mapping(&block)},
			want: []want{
				{ReasonStorageModeUnsupported, v1alpha1.SeverityBlocking, []string{"disk 2000 (spec.target.storage.default) asks storage class fast for a Block volume with access ReadWriteOnce",
					"it lists Filesystem ReadWriteOnce; provisioner rancher.io/local-path", "would stay Pending once the source is stopped"}},
				{ReasonStorageModeUnsupported, v1alpha1.SeverityBlocking, []string{"disk 2001"}},
			},
		},
		"Filesystem on local-path": {mods: mods{cluster: class("fast", localPath), spec: mapping(&fs, rwo)}},
		"ReadWriteMany on local-path: refused": {
			mods: mods{cluster: class("fast", localPath), spec: mapping(nil, rwx)},
			want: []want{
				{ReasonStorageModeUnsupported, v1alpha1.SeverityBlocking, []string{"a Filesystem volume with access ReadWriteMany"}},
				{ReasonStorageModeUnsupported, v1alpha1.SeverityBlocking, []string{"disk 2001"}},
			},
		},
		"Block on a class whose second set offers it":        {mods: mods{cluster: class("fast", ceph), spec: mapping(&block, rwx)}},
		"Filesystem ReadWriteOnce on the second set as well": {mods: mods{cluster: class("fast", ceph), spec: mapping(&fs, rwo)}},
		"nothing asked: the profile's defaults, not judged":  {mods: mods{cluster: class("fast", localPath)}},
		"profiles not read: not judged":                      {mods: mods{spec: mapping(&block)}},
	})
}
