package pipeline

import (
	"slices"
	"strings"
	"testing"

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
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("%s: StagingSize(%d, %d) = %d, %v; want %d, error %v", tc.name, tc.capacity, tc.pct, got, err, tc.want, tc.err)
		}
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
		if got != want || ok != (want != "") {
			t.Errorf("canonicalUUID(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	if got := vmwareSerial("421a2b3c-4d5e-6f70-8192-a3b4c5d6e7f8"); got != "VMware-42 1a 2b 3c 4d 5e 6f 70-81 92 a3 b4 c5 d6 e7 f8" {
		t.Errorf("vmwareSerial = %q", got)
	}
}

func TestDriveLetters(t *testing.T) {
	for n, want := range map[int]string{0: "a", 1: "b", 25: "z", 26: "aa", 27: "ab", 51: "az", 52: "ba", 701: "zz", 702: "aaa"} {
		if got := driveLetters(n); got != want {
			t.Errorf("driveLetters(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestAllNICsIgnored(t *testing.T) {
	m := ignoredNIC()
	m.Status.AppliedSpec.Target.Networks[1].Type = v1alpha1.NetworkTypeIgnore
	vm, err := RenderVirtualMachine(m)
	if err != nil {
		t.Fatal(err)
	}
	dev := vm.Spec.Template.Spec.Domain.Devices
	if len(dev.Interfaces) != 0 || len(vm.Spec.Template.Spec.Networks) != 0 {
		t.Fatalf("interfaces %v networks %v, want none", dev.Interfaces, vm.Spec.Template.Spec.Networks)
	}
	if dev.AutoattachPodInterface == nil || *dev.AutoattachPodInterface {
		t.Fatalf("autoattachPodInterface %v, want false: KubeVirt would add a pod interface", dev.AutoattachPodInterface)
	}
}

// TestSpecBeforeCutover: without status.appliedSpec the spec is in force.
func TestSpecBeforeCutover(t *testing.T) {
	m := windowsEFI()
	m.Status.AppliedSpec = nil
	claims, err := RenderStagingClaims(m)
	if err != nil {
		t.Fatal(err)
	}
	if sc := claims[0].Spec.StorageClassName; sc == nil || *sc != "changed-later" {
		t.Errorf("staging class %v, want the spec's", sc)
	}
	job, err := RenderConversionJob(m, 1, testConfig)
	if err != nil {
		t.Fatal(err)
	}
	if img := job.Spec.Template.Spec.Containers[0].Image; img != "registry.example/other:latest" {
		t.Errorf("conversion image %q, want the spec's", img)
	}
	m.Spec.Conversion.Image = ""
	job, _ = RenderConversionJob(m, 1, testConfig)
	if img := job.Spec.Template.Spec.Containers[0].Image; img != testConfig.ConversionImage {
		t.Errorf("conversion image %q, want the configured default", img)
	}
}

// TestDiskNamesFromStatus: names recorded in status win over the
// deterministic ones, and missing ones fall back to them.
func TestDiskNamesFromStatus(t *testing.T) {
	m := windowsEFI()
	m.Status.Disks[0].DataVolume = "recorded-dv"
	m.Status.Disks[1].Name = ""
	vm, err := RenderVirtualMachine(m)
	if err != nil {
		t.Fatal(err)
	}
	vols := vm.Spec.Template.Spec.Volumes
	if vols[0].DataVolume.Name != "recorded-dv" || vols[1].Name != "disk-1" || vols[1].DataVolume.Name != "sql-02-prod-disk-1" {
		t.Errorf("volumes %+v", vols)
	}
	dvs, _ := RenderDataVolumes(m)
	if dvs[0].Name != "recorded-dv" {
		t.Errorf("data volume %q, want the recorded name", dvs[0].Name)
	}
}

func TestJobConfig(t *testing.T) {
	m := linuxBIOS()
	cfg := testConfig
	cfg.TransferProgress = true
	cfg.TransferCommand = "/bin/vm-transfer"
	cfg.ImagePullPolicy = corev1.PullAlways
	job, err := RenderTransferJob(m, 3, cfg)
	if err != nil {
		t.Fatal(err)
	}
	pod := job.Spec.Template.Spec
	c := pod.Containers[0]
	if pod.ServiceAccountName != "web-01-migration-transfer-3" || !*pod.AutomountServiceAccountToken ||
		!slices.Contains(c.Args, "--progress-configmap=apps/web-01-migration-transfer-3-progress") {
		t.Errorf("service account %q automount %v args %v: want progress reported into the ConfigMap", pod.ServiceAccountName, *pod.AutomountServiceAccountToken, c.Args)
	}
	if c.Command[0] != "/bin/vm-transfer" || c.ImagePullPolicy != corev1.PullAlways || job.Name != "web-01-migration-transfer-3" {
		t.Errorf("command %v pull %q name %q", c.Command, c.ImagePullPolicy, job.Name)
	}
	for _, e := range c.Env {
		if strings.Contains(strings.ToLower(e.Name), "pass") {
			t.Errorf("env %s: credentials must come from the mounted Secret", e.Name)
		}
	}

	cfg.ConversionKVM = true
	cfg.ConversionSeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptrTo("profiles/virt-v2v.json")}
	conv, err := RenderConversionJob(m, 1, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cp := conv.Spec.Template.Spec
	if q := cp.Containers[0].Resources.Limits[KVMResource]; q.String() != "1" {
		t.Errorf("kvm limit %v, want 1", q.String())
	}
	if sp := cp.SecurityContext.SeccompProfile; sp.Type != corev1.SeccompProfileTypeLocalhost || *sp.LocalhostProfile != "profiles/virt-v2v.json" {
		t.Errorf("seccomp %+v, want the configured Localhost profile", sp)
	}
	if *cp.AutomountServiceAccountToken || *cp.SecurityContext.RunAsUser != StagingUID || *cp.SecurityContext.FSGroup != StagingUID {
		t.Errorf("conversion pod security %+v", cp.SecurityContext)
	}
}

func ptrTo[T any](v T) *T { return &v }
