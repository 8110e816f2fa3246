package pipeline

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

func TestStagingSize(t *testing.T) {
	tests := []struct {
		name     string
		capacity int64
		pct      int32
		want     int64
		err      bool
	}{
		{"10 GiB + 10%", 10 * gib, 10, 11 * gib, false},
		{"no overhead, already whole MiB", 3 * mib, 0, 3 * mib, false},
		{"one byte rounds up to a MiB", 1, 10, mib, false},
		{"fraction of a MiB rounds up", 8*gib + 512, 10, 9012 * mib, false},
		{"negative overhead counts as none", 5 * mib, -5, 5 * mib, false},
		{"zero capacity", 0, 10, 0, true},
		{"overflow", 1 << 62, 100, 0, true},
	}
	for _, tc := range tests {
		got, err := StagingSize(tc.capacity, tc.pct)
		if tc.err {
			assert.Error(t, err, "%s: StagingSize(%d, %d) must refuse", tc.name, tc.capacity, tc.pct)
		} else {
			assert.NoError(t, err, "%s: StagingSize(%d, %d)", tc.name, tc.capacity, tc.pct)
		}
		assert.Equal(t, tc.want, got, "%s: StagingSize(%d, %d)", tc.name, tc.capacity, tc.pct)
	}
}

func TestSourceIdentity(t *testing.T) {
	tests := map[string]string{
		"421a2b3c-4d5e-6f70-8192-a3b4c5d6e7f8": "421a2b3c-4d5e-6f70-8192-a3b4c5d6e7f8",
		"421A2B3C4D5E6F708192A3B4C5D6E7F8":     "421a2b3c-4d5e-6f70-8192-a3b4c5d6e7f8",
		"00000000-0000-0000-0000-000000000000": "",
		"421a2b3c-4d5e-6f70-8192":              "",
		"not-a-uuid":                           "",
		"":                                     "",
	}
	for in, want := range tests {
		got, ok := canonicalUUID(in)
		assert.Equal(t, want, got, "canonicalUUID(%q)", in)
		assert.Equal(t, want != "", ok, "canonicalUUID(%q) reports a usable UUID", in)
	}
	serial := vmwareSerial("421a2b3c-4d5e-6f70-8192-a3b4c5d6e7f8")
	// KubeVirt's VM webhook (validateFirmwareSerial, vmi-create-admitter.go)
	// refuses a firmware serial outside [A-Za-z0-9_.+-] or longer than 256:
	// VMware's own form ("VMware-42 1a 2b ... e7 f8") has spaces.
	assert.Regexp(t, `^[A-Za-z0-9_.+-]{1,256}$`, serial, "a serial KubeVirt accepts")
	assert.Equal(t, "VMware-421a2b3c4d5e6f70-8192a3b4c5d6e7f8", serial,
		"the serial VMware gives a VM of that UUID, without its spaces")
}

func TestDriveLetters(t *testing.T) {
	for n, want := range map[int]string{0: "a", 1: "b", 25: "z", 26: "aa", 27: "ab", 51: "az", 52: "ba", 701: "zz", 702: "aaa"} {
		assert.Equal(t, want, driveLetters(n), "driveLetters(%d)", n)
	}
}

func TestAllNICsIgnored(t *testing.T) {
	m := ignoredNIC()
	m.Status.AppliedSpec.Target.Networks[1].Type = v1alpha1.NetworkTypeIgnore
	vm, err := RenderVirtualMachine(m)
	require.NoError(t, err, "rendering the VirtualMachine")
	dev := vm.Spec.Template.Spec.Domain.Devices
	assert.Empty(t, dev.Interfaces, "every NIC is ignored: the VM has no interface")
	assert.Empty(t, vm.Spec.Template.Spec.Networks, "every NIC is ignored: the VM has no network")
	assert.Equal(t, ptrTo(false), dev.AutoattachPodInterface, "autoattachPodInterface must be false: KubeVirt would add a pod interface")
}

// TestSpecBeforeCutover: without status.appliedSpec the spec is in force.
func TestSpecBeforeCutover(t *testing.T) {
	m := windowsEFI()
	m.Status.AppliedSpec = nil
	claims, err := RenderStagingClaims(m, ClaimDefaults{})
	require.NoError(t, err, "rendering the staging claims")
	require.NotEmpty(t, claims, "a staging claim per disk")
	assert.Equal(t, ptrTo("changed-later"), claims[0].Spec.StorageClassName, "the staging class is the spec's")
	job, err := RenderConversionJob(m, 1, testConfig, nil)
	require.NoError(t, err, "rendering the conversion Job")
	assert.Equal(t, "registry.example/other:latest", job.Spec.Template.Spec.Containers[0].Image, "the conversion image is the spec's")
	m.Spec.Conversion.Image = ""
	job, err = RenderConversionJob(m, 1, testConfig, nil)
	require.NoError(t, err, "rendering the conversion Job without an image in the spec")
	assert.Equal(t, testConfig.ConversionImage, job.Spec.Template.Spec.Containers[0].Image, "the conversion image is the configured default")
}

// TestDiskNamesFromStatus: names recorded in status win over the
// deterministic ones, and missing ones fall back to them.
func TestDiskNamesFromStatus(t *testing.T) {
	m := windowsEFI()
	m.Status.Disks[0].DataVolume = "recorded-dv"
	m.Status.Disks[1].Name = ""
	vm, err := RenderVirtualMachine(m)
	require.NoError(t, err, "rendering the VirtualMachine")
	vols := vm.Spec.Template.Spec.Volumes
	require.GreaterOrEqual(t, len(vols), 2, "a volume per disk")
	require.NotNil(t, vols[0].DataVolume, "volume %s is a DataVolume", vols[0].Name)
	require.NotNil(t, vols[1].DataVolume, "volume %s is a DataVolume", vols[1].Name)
	assert.Equal(t, "recorded-dv", vols[0].DataVolume.Name, "the first disk's DataVolume is the one recorded in status")
	assert.Equal(t, "disk-1", vols[1].Name, "the second disk, unnamed in status, is named as the state machine names it")
	assert.Equal(t, "sql-02-prod-disk-1", vols[1].DataVolume.Name, "the second disk's DataVolume is the one recorded in status")
	dvs, err := RenderDataVolumes(m, nil)
	require.NoError(t, err, "rendering the DataVolumes")
	require.NotEmpty(t, dvs, "a DataVolume per disk")
	assert.Equal(t, "recorded-dv", dvs[0].Name, "the DataVolume keeps the name recorded in status")
}

func TestJobConfig(t *testing.T) {
	m := linuxBIOS()
	cfg := testConfig
	cfg.TransferProgress = true
	cfg.TransferCommand = "/bin/vm-transfer"
	cfg.ImagePullPolicy = corev1.PullAlways
	job, err := RenderTransferJob(m, 3, cfg, nil)
	require.NoError(t, err, "rendering the transfer Job")
	pod := job.Spec.Template.Spec
	c := pod.Containers[0]
	// Progress is reported into the attempt's ConfigMap, as the attempt's service account.
	assert.Equal(t, "web-01-migration-transfer-3", pod.ServiceAccountName, "the transfer pod runs as its attempt's service account")
	assert.Equal(t, ptrTo(true), pod.AutomountServiceAccountToken, "the transfer pod mounts its token to report progress")
	assert.Contains(t, c.Args, "--progress-configmap=apps/web-01-migration-transfer-3-progress", "the transfer reports into its attempt's ConfigMap")
	require.NotEmpty(t, c.Command, "the transfer container's command")
	assert.Equal(t, "/bin/vm-transfer", c.Command[0], "the configured transfer command")
	assert.Equal(t, corev1.PullAlways, c.ImagePullPolicy, "the configured image pull policy")
	assert.Equal(t, "web-01-migration-transfer-3", job.Name, "the Job is named after the migration and attempt")
	for _, e := range c.Env {
		assert.NotContains(t, strings.ToLower(e.Name), "pass", "env %s: credentials must come from the mounted Secret", e.Name)
	}

	cfg.ConversionKVM = true
	cfg.ConversionSeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptrTo("profiles/virt-v2v.json")}
	conv, err := RenderConversionJob(m, 1, cfg, nil)
	require.NoError(t, err, "rendering the conversion Job")
	cp := conv.Spec.Template.Spec
	kvm := cp.Containers[0].Resources.Limits[KVMResource]
	assert.Equal(t, "1", kvm.String(), "the conversion asks for one /dev/kvm")
	require.NotNil(t, cp.SecurityContext, "the conversion pod's security context")
	assert.Equal(t, &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptrTo("profiles/virt-v2v.json")}, cp.SecurityContext.SeccompProfile,
		"the conversion runs under the configured Localhost seccomp profile")
	assert.Equal(t, ptrTo(false), cp.AutomountServiceAccountToken, "the conversion pod mounts no service account token")
	assert.Equal(t, ptrTo(StagingUID), cp.SecurityContext.RunAsUser, "the conversion runs as the staging disks' owner")
	assert.Equal(t, ptrTo(StagingUID), cp.SecurityContext.FSGroup, "the conversion's volumes belong to the staging disks' group")
}

func ptrTo[T any](v T) *T { return &v }
