package pipeline

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"platform.example/vm-migration/pkg/statemachine"
)

// v2vFixtures holds captured virt-v2v-in-place runs and the test double
// that replays them (testdata/virt-v2v/fake-virt-v2v-in-place).
var v2vFixtures = filepath.Join("testdata", "virt-v2v")

// scriptRun is the outcome of the conversion script run by a test.
type scriptRun struct {
	exitCode    int
	termination string
	// output is what the script printed (virt-v2v's output, through tee);
	// work its work directory (the pod's /var/tmp).
	output, work string
	// args are the arguments virt-v2v-in-place got for the conversion.
	args string
}

// runConvertScript runs the conversion script, with the pod's paths moved
// into a temporary directory, on domain (a libvirt domain XML) against
// the virt-v2v-in-place found in binDir, and returns its exit code,
// termination message and the arguments the conversion got (when binDir
// holds the test double).
func runConvertScript(t *testing.T, binDir, domain string, env ...string) scriptRun {
	t.Helper()
	return runConvertScriptWith(t, binDir, map[string]string{DomainXMLKey: domain}, env...)
}

// runConvertScriptWith is runConvertScript with the conversion
// ConfigMap's files (domain.xml, network.conf...) given by key.
func runConvertScriptWith(t *testing.T, binDir string, config map[string]string, env ...string) scriptRun {
	t.Helper()
	dir := t.TempDir()
	for key, data := range config {
		require.NoError(t, os.WriteFile(filepath.Join(dir, key), []byte(data), 0o644), "writing the ConfigMap's %s", key)
	}
	work := filepath.Join(dir, "work")
	require.NoError(t, os.MkdirAll(work, 0o755), "making the pod's work directory")
	term := filepath.Join(dir, "termination-log")
	script := convertScriptReplacer(work, dir, term, testTool(t)).Replace(convertScriptTemplate)
	scriptPath := filepath.Join(dir, ConvertScriptKey)
	require.NoError(t, os.WriteFile(scriptPath, []byte(script), 0o755), "writing the conversion script")
	argsFile := filepath.Join(dir, "args")
	cmd := exec.Command("/bin/sh", scriptPath)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + binDir + ":/usr/bin:/bin", "HOME=" + work, "FAKE_V2V_ARGS=" + argsFile}, env...)
	out, err := cmd.CombinedOutput()
	run := scriptRun{output: string(out), work: work}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		run.exitCode = exitErr.ExitCode()
	} else {
		require.NoError(t, err, "running the conversion script:\n%s", out)
	}
	data, err := os.ReadFile(term)
	require.NoError(t, err, "the script left no termination message:\n%s", out)
	run.termination = string(data)
	args, _ := os.ReadFile(argsFile)
	run.args = strings.TrimSpace(string(args))
	return run
}

// observe is what the controller reads from a conversion pod that ended so.
func (r scriptRun) observe() statemachine.JobObservation {
	o := statemachine.JobObservation{Succeeded: r.exitCode == 0, Failed: r.exitCode != 0}
	observeConversion(&o, r.termination, r.exitCode == 0)
	return o
}

var (
	toolOnce     sync.Once
	testToolPath string
	toolErr      error
)

// testTool is vm-transfer, built once for the tests that run the
// conversion script (its tree-update and checksum).
func testTool(t *testing.T) string {
	t.Helper()
	toolOnce.Do(func() {
		dir, err := os.MkdirTemp("", "vm-transfer-")
		if err != nil {
			toolErr = err
			return
		}
		testToolPath = filepath.Join(dir, "vm-transfer")
		out, err := exec.Command("go", "build", "-o", testToolPath, "platform.example/vm-migration/cmd/vm-transfer").CombinedOutput()
		if err != nil {
			toolErr = fmt.Errorf("building vm-transfer: %w: %s", err, out)
		}
	})
	require.NoError(t, toolErr)
	return testToolPath
}

// requireQemuImg skips a test that runs the conversion script over disks
// where qemu-img, which makes and commits their overlays, is missing (make
// test installs Debian's qemu-utils first).
func requireQemuImg(t *testing.T) {
	t.Helper()
	for _, bin := range []string{"qemu-img", "qemu-io"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s is not installed (Debian package qemu-utils; make test installs it)", bin)
		}
	}
}

// fakeV2VBin is a directory whose virt-v2v-in-place is the test double.
func fakeV2VBin(t *testing.T) string {
	t.Helper()
	fake, err := filepath.Abs(filepath.Join(v2vFixtures, "fake-virt-v2v-in-place"))
	require.NoError(t, err, "locating the virt-v2v-in-place test double")
	bin := t.TempDir()
	require.NoError(t, os.Symlink(fake, filepath.Join(bin, "virt-v2v-in-place")), "putting the test double on the PATH")
	return bin
}

// grubWarning is the warning virt-v2v 2.2 printed converting the Debian
// guests (their root is found by UUID, so it is harmless there).
const grubWarning = "could not determine a way to update the configuration of Grub2"

// TestConvertScript runs the rendered conversion script over virt-v2v runs
// captured on Debian 12 (virt-v2v 2.2.0, which has no -O: the inspection
// comes from its -v output) and over a virt-v2v that has -O, and reads the
// termination message back as the controller does.
func TestConvertScript(t *testing.T) {
	tests := map[string]struct {
		// run names the captured run in testdata/virt-v2v; version picks
		// the capabilities and --help of the virt-v2v replaying it.
		run, version string
		wantExit     int
		wantFlag     string
		want         statemachine.JobObservation
		// wantMessage are parts of the observed message, in order.
		wantMessage []string
	}{
		"2.2 converts the Debian BIOS guest": {
			run: "debian-bios", version: "2.2", wantFlag: "-v",
			want: statemachine.JobObservation{Succeeded: true, OperatingSystem: "debian 12.15", Warnings: []string{grubWarning}},
		},
		"with -O, the inspection document": {
			run: "debian-bios-with-O", version: "with-O", wantFlag: "-O",
			want: statemachine.JobObservation{Succeeded: true, OperatingSystem: "debian 12.15", Warnings: []string{grubWarning}},
		},
		"2.2 on a blank disk": {
			run: "blank", version: "2.2", wantExit: 1, wantFlag: "-v",
			want: statemachine.JobObservation{Failed: true, Reason: statemachine.ConversionInspectionFailed},
			wantMessage: []string{
				"virt-v2v: inspection could not detect the source guest (or physical machine).",
				"No root device found in this operating system image.",
			},
		},
		"2.2 on a disk whose root file system is corrupt": {
			run: "corrupt", version: "2.2", wantExit: 1, wantFlag: "-v",
			want: statemachine.JobObservation{Failed: true, Reason: statemachine.ConversionInspectionFailed},
			wantMessage: []string{
				"virt-v2v: inspection could not detect the source guest",
				"No root device found in this operating system image.",
			},
		},
		"2.2 on an Alpine guest": {
			run: "alpine", version: "2.2", wantExit: 1, wantFlag: "-v",
			want: statemachine.JobObservation{Failed: true, Reason: statemachine.ConversionUnsupportedGuest},
			wantMessage: []string{
				"virt-v2v: virt-v2v is unable to convert this guest type (linux/alpinelinux)",
				"(inspected: alpinelinux 3.18 (Alpine Linux v3.18))",
			},
		},
		"2.2 failing otherwise": {
			run: "alpine-no-apk-db", version: "2.2", wantExit: 1, wantFlag: "-v",
			want: statemachine.JobObservation{Failed: true},
			wantMessage: []string{
				"virt-v2v: libguestfs error: filesize: /lib/apk/db/installed: No such file or directory",
			},
		},
	}
	bin := fakeV2VBin(t)
	runs, err := filepath.Abs(v2vFixtures)
	require.NoError(t, err, "locating the captured virt-v2v runs")
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			run := runConvertScript(t, bin, "<domain/>",
				"FAKE_V2V_RUN="+filepath.Join(runs, tc.run), "FAKE_V2V_VERSION="+tc.version)
			assert.Equal(t, tc.wantExit, run.exitCode, "the conversion script's exit code")
			assert.Contains(t, " "+run.args+" ", " "+tc.wantFlag+" ", "virt-v2v-in-place ran with %q, want %s", run.args, tc.wantFlag)
			got := run.observe()
			msg := got.Message
			got.Message = ""
			assert.Equal(t, tc.want, got, "what the controller observes of the conversion (termination message %q)", run.termination)
			rest := msg
			for _, part := range tc.wantMessage {
				if !assert.Contains(t, rest, part, "message %q lacks %q (in that order)", msg, part) {
					break
				}
				rest = rest[strings.Index(rest, part)+len(part):]
			}
			if len(tc.wantMessage) == 0 {
				assert.Empty(t, msg, "a conversion that succeeded has no message")
			}
		})
	}
}

// TestConvertScriptWarnings: virt-v2v's warnings end the termination
// message after the inspection or the errors, at most eight of them, and
// never stand alone after a failure (the kubelet then falls back to the
// end of the log).
func TestConvertScriptWarnings(t *testing.T) {
	warning := func(i int) string {
		return fmt.Sprintf(`{ "message": "warning number %d", "timestamp": "2026-11-30T09:32:48.055663251+00:00", "type": "warning" }`, i)
	}
	var ten []string
	for i := 1; i <= 10; i++ {
		ten = append(ten, warning(i))
	}
	errorLine := `{ "message": "libguestfs error: something broke", "timestamp": "2026-11-30T09:33:00.0+00:00", "type": "error" }`
	tests := map[string]struct {
		events       []string
		status       string
		wantWarnings []string
		wantMessage  string
		wantEmpty    bool
	}{
		"converted: the first eight warnings": {
			events: ten, status: "0",
			wantWarnings: []string{"warning number 1", "warning number 2", "warning number 3", "warning number 4",
				"warning number 5", "warning number 6", "warning number 7", "warning number 8"},
		},
		"failed: warnings after the error": {
			events: []string{warning(1), errorLine}, status: "1",
			wantWarnings: []string{"warning number 1"}, wantMessage: "virt-v2v: libguestfs error: something broke",
		},
		"failed without an error message: no message at all, for the log fallback": {
			events: []string{warning(1)}, status: "1", wantEmpty: true,
		},
	}
	bin := fakeV2VBin(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			run := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(run, "events.json"), []byte(strings.Join(tc.events, "\n")+"\n"), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(run, "status"), []byte(tc.status+"\n"), 0o644))
			r := runConvertScript(t, bin, "<domain/>", "FAKE_V2V_RUN="+run, "FAKE_V2V_VERSION=2.2")
			if tc.wantEmpty {
				assert.Empty(t, r.termination, "the termination message")
				return
			}
			got := r.observe()
			assert.Equal(t, tc.wantWarnings, got.Warnings, "warnings read from %q", r.termination)
			assert.Equal(t, tc.wantMessage, got.Message, "message read from %q", r.termination)
		})
	}
}
