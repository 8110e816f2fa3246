package pipeline

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runAcceleratorScript sources the accelerator script, with its KVM device
// at kvmDevice and a 2 s probe bound, under a guestfish that runs
// guestfishBody (none when empty), and returns what it printed and the
// LIBGUESTFS_BACKEND_SETTINGS it left, and the guestfish arguments.
func runAcceleratorScript(t *testing.T, kvm, kvmDevice, guestfishBody string) (line, settings, probeArgs string) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	require.NoError(t, os.MkdirAll(bin, 0o755))
	for _, tool := range []string{"sh", "id", "tr", "date", "mktemp", "timeout", "grep", "head", "sed", "rm", "cat", "sleep"} {
		p, err := exec.LookPath(tool)
		require.NoError(t, err, "%s is needed to run the accelerator script", tool)
		require.NoError(t, os.Symlink(p, filepath.Join(bin, tool)))
	}
	argsFile := filepath.Join(dir, "guestfish-args")
	if guestfishBody != "" {
		fake := "#!/bin/sh\necho \"$LIBGUESTFS_BACKEND_SETTINGS $*\" >" + argsFile + "\n" + guestfishBody + "\n"
		require.NoError(t, os.WriteFile(filepath.Join(bin, "guestfish"), []byte(fake), 0o755))
	}
	script := strings.NewReplacer("@KVM@", kvmDevice, "@PROBE@", "2").Replace(acceleratorScriptTemplate)
	scriptPath := filepath.Join(dir, AcceleratorScriptKey)
	require.NoError(t, os.WriteFile(scriptPath, []byte(script), 0o644))
	cmd := exec.Command(filepath.Join(bin, "sh"), "-c", `. "$1"; echo "settings=$LIBGUESTFS_BACKEND_SETTINGS"`, "sh", scriptPath)
	cmd.Env = []string{"PATH=" + bin, "TMPDIR=" + dir, KVMEnv + "=" + kvm}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "sourcing the accelerator script:\n%s", out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Len(t, lines, 2, "the script prints one line, then the test its setting:\n%s", out)
	args, _ := os.ReadFile(argsFile)
	return lines[0], strings.TrimPrefix(lines[1], "settings="), strings.TrimSpace(string(args))
}

// TestAcceleratorScript: TCG unless KVM was offered and the appliance
// booted under it; the log line says which and why.
func TestAcceleratorScript(t *testing.T) {
	device := filepath.Join(t.TempDir(), "kvm")
	require.NoError(t, os.WriteFile(device, nil, 0o666), "a stand-in for /dev/kvm")
	tests := map[string]struct {
		kvm, device, guestfish string
		wantSettings           string
		wantLine               []string
		wantProbe              bool
	}{
		"not offered: TCG without a probe": {
			kvm: KVMOff, device: device, guestfish: "exit 0",
			wantSettings: "force_tcg", wantLine: []string{"conversion accelerator: tcg (KVM not offered"},
		},
		"offered, no device": {
			kvm: KVMProbe, device: device + "-absent", guestfish: "exit 0",
			wantSettings: "force_tcg", wantLine: []string{"conversion accelerator: tcg (KVM offered, but the pod has no " + device + "-absent)"},
		},
		"offered, no guestfish in the image": {
			kvm: KVMProbe, device: device,
			wantSettings: "force_tcg", wantLine: []string{"no guestfish to probe it"},
		},
		"offered, the appliance boots": {
			kvm: KVMProbe, device: device, guestfish: "exit 0",
			wantSettings: "force_kvm", wantLine: []string{"conversion accelerator: kvm (the appliance booted under KVM in "}, wantProbe: true,
		},
		"offered, the appliance aborts": {
			// What guestfish -v printed on a machine where KVM opens but
			// qemu aborts (2026-12-01), advice lines included.
			kvm: KVMProbe, device: device, guestfish: `cat >&2 <<'EOF'
libguestfs: qemu KVM: enabled
qemu-system-x86_64: error: failed to set MSR 0x10a to 0x69
*stdin*:0: libguestfs: error: appliance closed the connection unexpectedly, see earlier error messages
This usually means the libguestfs appliance crashed.
into a bug report or message to the libguestfs mailing list.
*stdin*:0: libguestfs: error: /usr/bin/qemu-system-x86_64 killed by signal 6 (Aborted), see debug messages above
EOF
exit 1`,
			wantSettings: "force_tcg", wantProbe: true,
			wantLine: []string{"conversion accelerator: tcg (the KVM probe failed after ", "(exit 1): qemu-system-x86_64: error: failed to set MSR 0x10a to 0x69 " +
				"appliance closed the connection unexpectedly, see earlier error messages /usr/bin/qemu-system-x86_64 killed by signal 6 (Aborted), see debug messages above)"},
		},
		"offered, the appliance hangs": {
			kvm: KVMProbe, device: device, guestfish: "exec sleep 30",
			wantSettings: "force_tcg", wantProbe: true,
			wantLine: []string{"conversion accelerator: tcg (the KVM probe did not boot the appliance within 2s)"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			line, settings, probe := runAcceleratorScript(t, tc.kvm, tc.device, tc.guestfish)
			assert.Equal(t, tc.wantSettings, settings, "LIBGUESTFS_BACKEND_SETTINGS after the script (its line: %s)", line)
			for _, want := range tc.wantLine {
				assert.Contains(t, line, want, "the accelerator line")
			}
			if tc.wantProbe {
				assert.Equal(t, "force_kvm -v --ro -a /dev/null run", probe, "the probe boots the appliance under KVM alone")
			} else {
				assert.Empty(t, probe, "no probe ran")
			}
		})
	}
}

// TestConversionKVMRendering: the pod is offered KVM (and the script told
// to probe it) only through the RuntimeClass or the device plugin.
func TestConversionKVMRendering(t *testing.T) {
	tests := map[string]struct {
		runtimeClass string
		devicePlugin bool
		wantKVM      string
	}{
		"default: TCG":           {wantKVM: KVMOff},
		"runtime class":          {runtimeClass: "kvm", wantKVM: KVMProbe},
		"KubeVirt device plugin": {devicePlugin: true, wantKVM: KVMProbe},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig
			cfg.ConversionRuntimeClass, cfg.ConversionKVM = tc.runtimeClass, tc.devicePlugin
			job, err := RenderConversionJob(linuxBIOS(), 1, cfg, nil)
			require.NoError(t, err, "rendering the conversion Job")
			pod := job.Spec.Template.Spec
			env := map[string]string{}
			for _, e := range pod.Containers[0].Env {
				env[e.Name] = e.Value
			}
			assert.Equal(t, tc.wantKVM, env[KVMEnv], "%s", KVMEnv)
			if tc.runtimeClass == "" {
				assert.Nil(t, pod.RuntimeClassName, "runtimeClassName, want the cluster's default")
			} else if assert.NotNil(t, pod.RuntimeClassName, "runtimeClassName") {
				assert.Equal(t, tc.runtimeClass, *pod.RuntimeClassName, "runtimeClassName")
			}
			_, limited := pod.Containers[0].Resources.Limits[KVMResource]
			assert.Equal(t, tc.devicePlugin, limited, "a %s limit only with the device plugin", KVMResource)
		})
	}
	cm, err := RenderConversionConfigMap(linuxBIOS(), 1, nil)
	require.NoError(t, err, "rendering the conversion ConfigMap")
	assert.Contains(t, cm.Data[AcceleratorScriptKey], "timeout 60 guestfish -v --ro -a /dev/null run", "the pod's probe: the appliance, bounded")
	assert.Contains(t, cm.Data[ConvertScriptKey], `accelerator="$(dirname "$0")/accelerator.sh"`, "convert.sh sources the accelerator script beside it")
}

// TestConversionApplianceMemory: LIBGUESTFS_MEMSIZE follows the
// configuration, libguestfs' default otherwise.
func TestConversionApplianceMemory(t *testing.T) {
	for _, tc := range []struct {
		mib  int64
		want string
	}{{0, "1280"}, {2048, "2048"}} {
		cfg := testConfig
		cfg.ConversionApplianceMiB = tc.mib
		job, err := RenderConversionJob(linuxBIOS(), 1, cfg, nil)
		require.NoError(t, err, "rendering the conversion Job")
		got := ""
		for _, e := range job.Spec.Template.Spec.Containers[0].Env {
			if e.Name == "LIBGUESTFS_MEMSIZE" {
				got = e.Value
			}
		}
		assert.Equal(t, tc.want, got, "LIBGUESTFS_MEMSIZE with ConversionApplianceMiB %d", tc.mib)
	}
}
