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
