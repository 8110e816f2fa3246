package preflight

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// A clean migration: two disks on two datastores, two NICs, everything
// mapped, nothing to report.
func cleanSpec() *v1alpha1.VirtualMachineMigrationSpec {
	return &v1alpha1.VirtualMachineMigrationSpec{
		Source: v1alpha1.SourceSpec{URL: "https://vc.example.com/sdk", VM: v1alpha1.VMSelector{Name: "web-01"}},
		Target: v1alpha1.TargetSpec{
			Storage: v1alpha1.StorageMapping{Default: &v1alpha1.StorageTarget{StorageClassName: "fast"}},
			Networks: []v1alpha1.NetworkMapping{
				{Source: "VM Network", Type: v1alpha1.NetworkTypePod},
				{Source: "backend-pg", Type: v1alpha1.NetworkTypeMultus, MultusNetworkName: "backend"},
			},
		},
	}
}

func cleanInventory() *v1alpha1.SourceInventory {
	return &v1alpha1.SourceInventory{
		Name: "web-01", MoRef: "vm-42", Firmware: v1alpha1.FirmwareBIOS,
		CPU: v1alpha1.CPUTopology{Sockets: 1, CoresPerSocket: 2}, MemoryMiB: 4096,
		Disks: []v1alpha1.SourceDisk{
			{Key: 2000, Label: "Hard disk 1", FileName: "[ds1] web-01/web-01.vmdk", Datastore: "ds1", DiskMode: "persistent", Sharing: "sharingNone", CapacityBytes: 1 << 30},
			{Key: 2001, Label: "Hard disk 2", FileName: "[ds2] web-01/web-01_1.vmdk", Datastore: "ds2", DiskMode: "persistent", Sharing: "sharingNone", CapacityBytes: 1 << 30},
		},
		NICs: []v1alpha1.SourceNIC{
			{Key: 4000, Label: "Network adapter 1", MAC: "00:50:56:00:00:01", Network: "VM Network", AdapterType: "vmxnet3"},
			{Key: 4001, Label: "Network adapter 2", MAC: "00:50:56:00:00:02", Network: "backend-pg", AdapterType: "vmxnet3"},
		},
	}
}

func cleanCluster() ClusterFacts {
	return ClusterFacts{
		StorageClasses:         map[string]bool{"fast": true, "slow": true},
		TargetName:             "web-01",
		DefaultConversionImage: "virt-v2v:test",
	}
}

type mods struct {
	spec    func(*v1alpha1.VirtualMachineMigrationSpec)
	inv     func(*v1alpha1.SourceInventory)
	cluster func(*ClusterFacts)
}

type want struct {
	reason   string
	severity v1alpha1.Severity
	contains []string
}

func TestCheck(t *testing.T) {
	tests := map[string]checkCase{
		"clean migration has no findings": {},
		"durations stored out of range": {
			mods: mods{spec: func(s *v1alpha1.VirtualMachineMigrationSpec) {
				huge := v1alpha1.ParseDuration("9999999999h")
				s.Policy.StallTimeout = &huge
				s.Policy.Retry.Deadline = v1alpha1.DurationOf(v1alpha1.MaxDuration)
			}},
			want: []want{{ReasonDurationOutOfRange, v1alpha1.SeverityBlocking, []string{`spec.policy.stallTimeout "9999999999h"`, "at most 8760h", "8760h0m0s is used instead"}}},
		},
		"RDM disk": {
			mods: mods{inv: func(i *v1alpha1.SourceInventory) { i.Disks[1].RDM = true }},
			want: []want{{ReasonRDMDisk, v1alpha1.SeverityBlocking, []string{"Hard disk 2 (key 2001", "raw device mapping", "Convert it"}}},
		},
		"shared multi-writer disk": {
			mods: mods{inv: func(i *v1alpha1.SourceInventory) { i.Disks[0].Sharing = "sharingMultiWriter" }},
			want: []want{{ReasonSharedDisk, v1alpha1.SeverityBlocking, []string{"Hard disk 1", "multi-writer", "Detach"}}},
		},
		"independent persistent disk": {
			mods: mods{inv: func(i *v1alpha1.SourceInventory) { i.Disks[0].DiskMode = "independent_persistent" }},
			want: []want{{ReasonIndependentDisk, v1alpha1.SeverityWarning, []string{"independent_persistent", "powered off"}}},
		},
		"independent nonpersistent disk": {
			mods: mods{inv: func(i *v1alpha1.SourceInventory) { i.Disks[1].DiskMode = "independent_nonpersistent" }},
			want: []want{{ReasonIndependentDisk, v1alpha1.SeverityWarning, []string{"discarded"}}},
		},
		"unmapped network, two NICs on it reported once": {
			mods: mods{inv: func(i *v1alpha1.SourceInventory) {
				i.NICs[0].Network = "dmz"
				i.NICs[1].Network = "dmz"
			}},
			want: []want{{ReasonUnmappedNetwork, v1alpha1.SeverityBlocking, []string{`"dmz"`, "Network adapter 1 (00:50:56:00:00:01), Network adapter 2", "spec.target.networks"}}},
		},
		"network mapped to Ignore counts as mapped": {
			mods: mods{spec: func(s *v1alpha1.VirtualMachineMigrationSpec) {
				s.Target.Networks[1] = v1alpha1.NetworkMapping{Source: "backend-pg", Type: v1alpha1.NetworkTypeIgnore}
			}},
		},
		"no storage mapping and no default class": {
			mods: mods{spec: func(s *v1alpha1.VirtualMachineMigrationSpec) { s.Target.Storage.Default = nil }},
			want: []want{
				{ReasonMissingStorageMapping, v1alpha1.SeverityBlocking, []string{"Hard disk 1", `"ds1"`, "spec.target.storage.default.storageClassName"}},
				{ReasonMissingStorageMapping, v1alpha1.SeverityBlocking, []string{"Hard disk 2", `"ds2"`}},
			},
		},
		"default entry without a class and no cluster default": {
			mods: mods{spec: func(s *v1alpha1.VirtualMachineMigrationSpec) {
				s.Target.Storage.Default = &v1alpha1.StorageTarget{}
				s.Target.Storage.Disks = []v1alpha1.DiskStorageMapping{{DiskKey: 2001, Target: v1alpha1.StorageTarget{StorageClassName: "slow"}}}
			}},
			want: []want{{ReasonMissingStorageMapping, v1alpha1.SeverityBlocking, []string{"Hard disk 1"}}},
		},
		"no storage mapping but a cluster default class": {
			mods: mods{
				spec:    func(s *v1alpha1.VirtualMachineMigrationSpec) { s.Target.Storage.Default = nil },
				cluster: func(c *ClusterFacts) { c.DefaultStorageClass = "slow" },
			},
		},
		"per-datastore and per-disk entries cover every disk": {
			mods: mods{spec: func(s *v1alpha1.VirtualMachineMigrationSpec) {
				s.Target.Storage.Default = nil
				s.Target.Storage.Datastores = []v1alpha1.DatastoreStorageMapping{{Datastore: "ds1", Target: v1alpha1.StorageTarget{StorageClassName: "fast"}}}
				s.Target.Storage.Disks = []v1alpha1.DiskStorageMapping{{DiskKey: 2001, Target: v1alpha1.StorageTarget{StorageClassName: "slow"}}}
			}},
		},
		"storage class missing, reported once with every user": {
			mods: mods{spec: func(s *v1alpha1.VirtualMachineMigrationSpec) {
				s.Target.Storage.Default.StorageClassName = "gold"
				s.Staging.StorageClassName = "gold"
			}},
			want: []want{{ReasonStorageClassMissing, v1alpha1.SeverityBlocking, []string{`"gold"`, "spec.target.storage.default for disk keys 2000, 2001", "spec.staging.storageClassName"}}},
		},
		"per-disk class missing wins over an existing default": {
			mods: mods{spec: func(s *v1alpha1.VirtualMachineMigrationSpec) {
				s.Target.Storage.Disks = []v1alpha1.DiskStorageMapping{{DiskKey: 2000, Target: v1alpha1.StorageTarget{StorageClassName: "nvme"}}}
			}},
			want: []want{{ReasonStorageClassMissing, v1alpha1.SeverityBlocking, []string{`"nvme"`, "disks[diskKey=2000]"}}},
		},
		"unused per-disk and per-datastore entries": {
			mods: mods{spec: func(s *v1alpha1.VirtualMachineMigrationSpec) {
				s.Target.Storage.Disks = []v1alpha1.DiskStorageMapping{{DiskKey: 9999, Target: v1alpha1.StorageTarget{StorageClassName: "fast"}}}
				s.Target.Storage.Datastores = []v1alpha1.DatastoreStorageMapping{{Datastore: "ds9", Target: v1alpha1.StorageTarget{StorageClassName: "fast"}}}
			}},
			want: []want{
				{ReasonUnusedStorageMapping, v1alpha1.SeverityWarning, []string{"9999", "2000, 2001"}},
				{ReasonUnusedStorageMapping, v1alpha1.SeverityWarning, []string{`"ds9"`}},
			},
		},
		"existing snapshots block a cold migration": {
			mods: mods{inv: func(i *v1alpha1.SourceInventory) {
				i.Snapshots = []string{"before-patch"}
				i.Disks[0].SnapshotDelta = true
			}},
			want: []want{{ReasonExistingSnapshots, v1alpha1.SeverityBlocking, []string{`"before-patch"`, "Hard disk 1", "Delete All"}}},
		},
		"the controller's own snapshot does not count": {
			mods: mods{
				inv:     func(i *v1alpha1.SourceInventory) { i.Snapshots = []string{"vm-migration-uid"} },
				cluster: func(c *ClusterFacts) { c.ControllerSnapshots = []string{"vm-migration-uid"} },
			},
		},
		"encrypted VM": {
			mods: mods{inv: func(i *v1alpha1.SourceInventory) { i.Encrypted = true }},
			want: []want{{ReasonEncryptedVM, v1alpha1.SeverityBlocking, []string{"encrypted", "Decrypt"}}},
		},
		"vTPM": {
			mods: mods{inv: func(i *v1alpha1.SourceInventory) {
				i.VTPM = true
				i.Firmware = v1alpha1.FirmwareEFI
			}},
			want: []want{{ReasonVTPM, v1alpha1.SeverityWarning, []string{"virtual TPM", "recovery keys"}}},
		},
		"two NICs on the pod network": {
			mods: mods{spec: func(s *v1alpha1.VirtualMachineMigrationSpec) {
				s.Target.Networks = []v1alpha1.NetworkMapping{{Source: "VM Network", Type: v1alpha1.NetworkTypePod}, {Source: "backend-pg", Type: v1alpha1.NetworkTypePod}}
			}},
			want: []want{{ReasonMultiplePodNICs, v1alpha1.SeverityBlocking, []string{"2 NICs", "only one"}}},
		},
		"conversion without an image": {
			mods: mods{spec: func(s *v1alpha1.VirtualMachineMigrationSpec) { s.Conversion = v1alpha1.ConversionSpec{} },
				cluster: func(c *ClusterFacts) { c.DefaultConversionImage = "" }},
			want: []want{{ReasonNoConversionImage, v1alpha1.SeverityBlocking, []string{"spec.conversion.image", "--conversion-image", "skip"}}},
		},
		"suspended source": {
			mods: mods{inv: func(i *v1alpha1.SourceInventory) { i.PowerState = "suspended" }},
			want: []want{{ReasonSourceSuspended, v1alpha1.SeverityBlocking, []string{"suspended", "Resume it"}}},
		},
		"secure boot without EFI": {
			mods: mods{inv: func(i *v1alpha1.SourceInventory) { i.SecureBoot = true }},
			want: []want{{ReasonUnsupportedFirmware, v1alpha1.SeverityBlocking, []string{"BIOS", "needs EFI"}}},
		},
		"secure boot with EFI is fine": {
			mods: mods{inv: func(i *v1alpha1.SourceInventory) {
				i.SecureBoot = true
				i.Firmware = v1alpha1.FirmwareEFI
			}},
		},
		"target name taken": {
			mods: mods{cluster: func(c *ClusterFacts) { c.TargetNameTaken = true }},
			want: []want{{ReasonTargetNameTaken, v1alpha1.SeverityBlocking, []string{`"web-01"`, "spec.target.name"}}},
		},
		"a staging claim's and a DataVolume's names taken": {
			mods: mods{cluster: func(c *ClusterFacts) {
				c.TakenNames = []string{"PersistentVolumeClaim/web-01-staging-2000", "DataVolume/web-01-disk-0"}
			}},
			want: []want{{ReasonChildNameTaken, v1alpha1.SeverityBlocking, []string{"PersistentVolumeClaim/web-01-staging-2000", "DataVolume/web-01-disk-0"}}},
		},
		"the default conversion image named in the spec: allowed": {
			mods: mods{spec: func(s *v1alpha1.VirtualMachineMigrationSpec) { s.Conversion.Image = "virt-v2v:test" }},
		},
		"a conversion image on the allow-list: allowed": {
			mods: mods{
				spec: func(s *v1alpha1.VirtualMachineMigrationSpec) {
					s.Conversion.Image = "registry.example.com/v2v/win:2.13"
				},
				cluster: func(c *ClusterFacts) { c.AllowedConversionImages = []string{"registry.example.com/v2v/*"} },
			},
		},
		"a conversion image off the allow-list: blocked": {
			mods: mods{
				spec:    func(s *v1alpha1.VirtualMachineMigrationSpec) { s.Conversion.Image = "evil.example.com/miner:latest" },
				cluster: func(c *ClusterFacts) { c.AllowedConversionImages = []string{"registry.example.com/v2v/*"} },
			},
			want: []want{{ReasonConversionImageNotAllowed, v1alpha1.SeverityBlocking, []string{`"evil.example.com/miner:latest"`, "registry.example.com/v2v/*"}}},
		},
		"no allow-list: only the default image": {
			mods: mods{spec: func(s *v1alpha1.VirtualMachineMigrationSpec) {
				s.Conversion.Image = "registry.example.com/v2v/win:2.13"
			}},
			want: []want{{ReasonConversionImageNotAllowed, v1alpha1.SeverityBlocking, []string{"none"}}},
		},
		"several rules at once, in rule order": {
			mods: mods{
				inv: func(i *v1alpha1.SourceInventory) {
					i.Disks[0].RDM = true
					i.Encrypted = true
					i.NICs[0].Network = "dmz"
				},
				cluster: func(c *ClusterFacts) { c.TargetNameTaken = true },
			},
			want: []want{
				{ReasonRDMDisk, v1alpha1.SeverityBlocking, nil},
				{ReasonEncryptedVM, v1alpha1.SeverityBlocking, nil},
				{ReasonUnmappedNetwork, v1alpha1.SeverityBlocking, nil},
				{ReasonTargetNameTaken, v1alpha1.SeverityBlocking, nil},
			},
		},
	}
	runCheckCases(t, tests)
}

// checkCase is one row of a rules table.
type checkCase struct {
	mods mods
	want []want
}

// runCheckCases checks the clean migration changed by each case's mods.
func runCheckCases[T ~map[string]checkCase](t *testing.T, tests T) {
	t.Helper()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			spec, inv, cluster := cleanSpec(), cleanInventory(), cleanCluster()
			if tc.mods.spec != nil {
				tc.mods.spec(spec)
			}
			if tc.mods.inv != nil {
				tc.mods.inv(inv)
			}
			if tc.mods.cluster != nil {
				tc.mods.cluster(&cluster)
			}
			got := Check(spec, inv, cluster)
			require.Len(t, got, len(tc.want), "one finding per expected finding")
			for i, w := range tc.want {
				assert.Equal(t, w.reason, got[i].Reason, "finding %d reason (severity %s, message %q)", i, got[i].Severity, got[i].Message)
				assert.Equal(t, w.severity, got[i].Severity, "finding %d severity (reason %s, message %q)", i, got[i].Reason, got[i].Message)
				for _, s := range w.contains {
					assert.Contains(t, got[i].Message, s, "finding %d message", i)
				}
			}
			blocks := false
			for _, w := range tc.want {
				blocks = blocks || w.severity == v1alpha1.SeverityBlocking
			}
			assert.Equal(t, blocks, HasBlocking(got), "HasBlocking, want true exactly when a finding blocks")
		})
	}
}

func TestCheckNilInputs(t *testing.T) {
	for name, tc := range map[string]struct {
		spec *v1alpha1.VirtualMachineMigrationSpec
		inv  *v1alpha1.SourceInventory
	}{
		"nil inventory": {spec: cleanSpec()},
		"nil spec":      {inv: cleanInventory()},
		"both nil":      {},
	} {
		t.Run(name, func(t *testing.T) {
			got := Check(tc.spec, tc.inv, ClusterFacts{})
			require.Len(t, got, 1, "want the one InventoryMissing finding")
			require.Equal(t, ReasonInventoryMissing, got[0].Reason, "finding %+v", got[0])
			require.Equal(t, v1alpha1.SeverityBlocking, got[0].Severity, "finding %+v", got[0])
		})
	}
	// An empty inventory and empty facts do not panic either.
	_ = Check(&v1alpha1.VirtualMachineMigrationSpec{}, &v1alpha1.SourceInventory{NICs: []v1alpha1.SourceNIC{{}}, Disks: []v1alpha1.SourceDisk{{}}}, ClusterFacts{})
}

func TestClusterAndGuestRules(t *testing.T) {
	windows := func(i *v1alpha1.SourceInventory) {
		i.GuestID, i.GuestFullName, i.GuestFamily = "windows2019srv_64Guest", "Microsoft Windows Server 2019 (64-bit)", "windowsGuest"
	}
	noDrivers := func(c *ClusterFacts) {
		c.ConversionVirtioWin = &VirtioWin{Path: "/usr/share/virtio-win"}
		c.Proofs = []v1alpha1.ImageProof{{Component: v1alpha1.ComponentConversion, Image: "v2v:1", Result: v1alpha1.ProofPassed}}
	}
	refused := v1alpha1.DryRunObject{Kind: "PersistentVolumeClaim", Name: "web-01-staging-2000", Outcome: v1alpha1.DryRunRefused,
		Message: `persistentvolumeclaims "web-01-staging-2000" is forbidden: exceeded quota: no-claims`}
	runCheckCases(t, map[string]checkCase{
		"Windows, conversion image without virtio-win: blocked": {
			mods: mods{inv: windows, cluster: noDrivers},
			want: []want{{ReasonWindowsWithoutVirtioDrivers, v1alpha1.SeverityBlocking,
				[]string{"Microsoft Windows Server 2019 (64-bit) (guest id windows2019srv_64Guest)", "v2v:1", "/usr/share/virtio-win", "IDE", "RTL8139"}}},
		},
		"Windows, VMware Tools' report wins over the configuration": {
			mods: mods{inv: func(i *v1alpha1.SourceInventory) {
				i.GuestID, i.DetectedGuestID, i.DetectedGuestFullName = "otherGuest64", "windows2019srv_64Guest", "Microsoft Windows Server 2019 (64-bit)"
			}, cluster: noDrivers},
			want: []want{{ReasonWindowsWithoutVirtioDrivers, v1alpha1.SeverityBlocking, []string{"Windows Server 2019"}}},
		},
		"Windows, image with virtio-win: allowed": {
			mods: mods{inv: windows, cluster: func(c *ClusterFacts) { c.ConversionVirtioWin = &VirtioWin{Present: true} }},
		},
		"Windows, image not proven yet: nothing said yet": {
			mods: mods{inv: windows},
		},
		"Windows, conversion skipped: the user vouches for the drivers": {
			mods: mods{inv: windows, cluster: noDrivers, spec: func(s *v1alpha1.VirtualMachineMigrationSpec) { s.Conversion.Skip = true }},
		},
		"FreeBSD: virt-v2v cannot convert it": {
			mods: mods{inv: func(i *v1alpha1.SourceInventory) { i.GuestID, i.GuestFamily = "freebsd13_64Guest", "otherGuestFamily" }},
			want: []want{{ReasonUnsupportedGuestOS, v1alpha1.SeverityBlocking, []string{"freebsd13_64Guest", "only Linux and Windows"}}},
		},
		"macOS family: virt-v2v cannot convert it": {
			mods: mods{inv: func(i *v1alpha1.SourceInventory) { i.GuestID, i.GuestFamily = "darwin20_64Guest", "darwinGuestFamily" }},
			want: []want{{ReasonUnsupportedGuestOS, v1alpha1.SeverityBlocking, []string{"a macOS guest"}}},
		},
		"unknown guest: a warning": {
			mods: mods{inv: func(i *v1alpha1.SourceInventory) { i.GuestID = "otherGuest64" }},
			want: []want{{ReasonUnknownGuestOS, v1alpha1.SeverityWarning, []string{"otherGuest64", "inspect its disks"}}},
		},
		"other Linux: a Linux guest": {
			mods: mods{inv: func(i *v1alpha1.SourceInventory) { i.GuestID = "otherLinux64Guest" }},
		},
		"a dry-run refusal blocks, quoting the API server; warnings warn": {
			mods: mods{cluster: func(c *ClusterFacts) {
				c.DryRun = &v1alpha1.DryRunStatus{Objects: []v1alpha1.DryRunObject{refused,
					{Kind: "Job", Name: "web-01-convert-1", Outcome: v1alpha1.DryRunWarned, Message: `would violate PodSecurity "restricted:latest"`},
					{Kind: "RoleBinding", Name: "rb", Outcome: v1alpha1.DryRunUnchecked, Message: "its Role is created first"}}}
			}},
			want: []want{
				{ReasonDryRunRefused, v1alpha1.SeverityBlocking, []string{"PersistentVolumeClaim web-01-staging-2000", "exceeded quota: no-claims"}},
				{ReasonDryRunWarning, v1alpha1.SeverityWarning, []string{"Job web-01-convert-1", "would violate PodSecurity"}},
			},
		},
		"a failed proof blocks, in the cluster's words": {
			mods: mods{cluster: func(c *ClusterFacts) {
				c.Proofs = []v1alpha1.ImageProof{
					{Component: v1alpha1.ComponentTransfer, Image: "t:1", JobName: "web-01-proof-transfer", Result: v1alpha1.ProofFailed,
						Reason: "ErrImageNeverPull", Message: `Container image "t:1" is not present with pull policy of Never`},
					{Component: v1alpha1.ComponentConversion, Image: "c:1", Result: v1alpha1.ProofPassed},
				}
			}},
			want: []want{{ReasonTransferImageNotRunnable, v1alpha1.SeverityBlocking, []string{"t:1", "web-01-proof-transfer", "ErrImageNeverPull: Container image"}}},
		},
		"a failed conversion proof does not matter when the conversion is skipped": {
			mods: mods{spec: func(s *v1alpha1.VirtualMachineMigrationSpec) { s.Conversion.Skip = true }, cluster: func(c *ClusterFacts) {
				c.Proofs = []v1alpha1.ImageProof{{Component: v1alpha1.ComponentConversion, Image: "c:1", Result: v1alpha1.ProofFailed, Reason: "ErrImagePull"}}
			}},
		},
		"restricted namespace, KubeVirt without a launcher seccomp profile: blocked with the fix": {
			mods: mods{cluster: func(c *ClusterFacts) {
				c.Launcher = LauncherFacts{NamespaceEnforce: "restricted", KubeVirt: "kubevirt/kubevirt"}
			}},
			want: []want{{ReasonLauncherSeccompMissing, v1alpha1.SeverityBlocking, []string{"kubevirt/kubevirt", "seccompConfiguration", "runtimeDefaultProfile"}}},
		},
		"restricted namespace, KubeVirt with a launcher seccomp profile: allowed": {
			mods: mods{cluster: func(c *ClusterFacts) {
				c.Launcher = LauncherFacts{NamespaceEnforce: "restricted", KubeVirt: "kubevirt/kubevirt", LauncherSeccomp: true}
			}},
		},
		"restricted namespace, no KubeVirt resource readable: nothing said": {
			mods: mods{cluster: func(c *ClusterFacts) { c.Launcher = LauncherFacts{NamespaceEnforce: "restricted"} }},
		},
	})
	assert.Equal(t, []string{ReasonDryRunRefused}, reasons(DryRunFindings(&v1alpha1.DryRunStatus{Objects: []v1alpha1.DryRunObject{refused}})))
}

func reasons(fs []v1alpha1.PreflightFinding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Reason)
	}
	return out
}

// TestImageRefused: only a finding that forbids running the conversion
// image keeps its proof from being made.
func TestImageRefused(t *testing.T) {
	spec := cleanSpec()
	spec.Conversion.Image = "evil.example/v2v:1"
	findings := Check(spec, cleanInventory(), ClusterFacts{StorageClasses: map[string]bool{"fast": true}, DefaultConversionImage: "registry.example/v2v:1"})
	assert.Contains(t, ImageRefused(findings, v1alpha1.ComponentConversion), ReasonConversionImageNotAllowed+": ")
	assert.Empty(t, ImageRefused(findings, v1alpha1.ComponentTransfer), "the transfer image is the controller's own")

	spec.Conversion.Image = ""
	findings = Check(spec, cleanInventory(), ClusterFacts{StorageClasses: map[string]bool{"fast": true}})
	assert.Contains(t, ImageRefused(findings, v1alpha1.ComponentConversion), ReasonNoConversionImage+": ")

	findings = Check(spec, cleanInventory(), ClusterFacts{StorageClasses: map[string]bool{"fast": true}, DefaultConversionImage: "registry.example/v2v:1"})
	assert.Empty(t, ImageRefused(findings, v1alpha1.ComponentConversion), "an allowed image, findings %+v", findings)
}
