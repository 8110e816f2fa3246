//go:build e2e && conversion

package e2e

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/test/framework"
	"platform.example/vm-migration/test/vcsimlocal"
)

// Environment of the real-guest scenarios (make test-conversion sets them).
const (
	// envGuests is the directory of hack/build-guest-images.sh's images;
	// default _output/guests.
	envGuests = "GUEST_IMAGES"
	// envReport names a file that receives one summary line per guest.
	envReport = "REAL_GUEST_REPORT"
	// envArtifacts names a directory that receives each guest's conversion
	// log and its launcher pod's log (the serial console).
	envArtifacts = "REAL_GUEST_ARTIFACTS"
	// envGuestList names the guests TestMigratedGuestRuns migrates (by
	// firmware or variant name), all by default.
	envGuestList = "GUESTS"
)

// guestImages is the built guest images' directory and its guest.env.
func guestImages(t *testing.T) (string, map[string]string) {
	t.Helper()
	dir := os.Getenv(envGuests)
	if dir == "" {
		dir = framework.RepoPath("_output/guests")
	}
	f, err := os.Open(filepath.Join(dir, "guest.env"))
	require.NoError(t, err, "no guest images (run hack/build-guest-images.sh, or make test-conversion)")
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			env[k] = v
		}
	}
	return dir, env
}

// realGuestMigration migrates vm with the real conversion image.
func (s *stack) realGuestMigration(name, vm string) *v1alpha1.VirtualMachineMigration {
	m := s.newMigration(name, vm)
	m.Spec.Conversion.Image = realConversionImage
	return m
}

// checkWarnings: the warnings virt-v2v printed in the conversion's log
// (such as "could not determine a way to update the configuration of
// Grub2") are the ones status.conversion.warnings and the conversion's
// evidence record (issue 25: they reached nobody).
func checkWarnings(t *testing.T, m *v1alpha1.VirtualMachineMigration, logPath string) {
	t.Helper()
	data, err := os.ReadFile(logPath)
	require.NoError(t, err, "reading the conversion log %s", logPath)
	flat := strings.Join(strings.Fields(string(data)), " ")
	printed := strings.Count(flat, "virt-v2v-in-place: warning: ")
	t.Logf("virt-v2v printed %d warnings; status.conversion.warnings: %q", printed, m.Status.Conversion.Warnings)
	assert.Len(t, m.Status.Conversion.Warnings, min(printed, 8), "status.conversion.warnings against the warnings in the log")
	var evidence string
	for _, e := range m.Status.Evidence {
		if e.Phase == v1alpha1.PhaseConverting {
			evidence = e.Observed
		}
	}
	for _, w := range m.Status.Conversion.Warnings {
		assert.Contains(t, flat, "virt-v2v-in-place: warning: "+strings.TrimSuffix(w, "..."), "a recorded warning the log lacks")
		assert.Contains(t, evidence, w, "the conversion's evidence lacks the warning")
	}
}

// phaseDuration is the time from one checkpoint's evidence to the next's.
func phaseDuration(t *testing.T, m *v1alpha1.VirtualMachineMigration, from, to v1alpha1.Phase) time.Duration {
	t.Helper()
	at := map[v1alpha1.Phase]time.Time{}
	for _, e := range m.Status.Evidence {
		at[e.Phase] = e.ReachedAt.Time
	}
	require.False(t, at[from].IsZero(), "no evidence of %s in status: %+v", from, m.Status.Evidence)
	require.False(t, at[to].IsZero(), "no evidence of %s in status: %+v", to, m.Status.Evidence)
	return at[to].Sub(at[from])
}

// excerptLine matches the lines of a conversion log that say what
// virt-v2v did: its progress ("[  88.9] Converting 12.15 to run on KVM"),
// its warnings and notes, the inspection (with -v) and the commands that
// changed the guest (packages purged, the initrd moved and rebuilt).
var excerptLine = regexp.MustCompile(`^(conversion accelerator: |\[ *[0-9]+\.[0-9]\] |virt-v2v-in-place: |i_(type|distro|osinfo|major_version|minor_version|product_name|firmware) = |commandrvf: (dpkg --purge|rpm -e|mv |/usr/sbin/update-initramfs|/usr/bin/dracut))`)

// conversionExcerpt keeps the excerptLine lines of a conversion log.
func conversionExcerpt(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err, "reading the conversion log %s", path)
	var keep []string
	for line := range strings.SplitSeq(string(data), "\n") {
		if excerptLine.MatchString(line) {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "\n")
}

// saveArtifacts copies a guest's conversion log and launcher log into
// $REAL_GUEST_ARTIFACTS/<firmware>/, when set.
func saveArtifacts(t *testing.T, firmware string, files ...string) {
	t.Helper()
	dir := os.Getenv(envArtifacts)
	if dir == "" {
		return
	}
	dir = filepath.Join(dir, firmware)
	require.NoError(t, os.MkdirAll(dir, 0o755), "creating the artifacts directory")
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err, "reading artifact %s", f)
		require.NoError(t, os.WriteFile(filepath.Join(dir, filepath.Base(f)), data, 0o644), "saving artifact %s", f)
	}
}

// report logs a summary line and appends it to $REAL_GUEST_REPORT, when set.
func report(t *testing.T, line string) {
	t.Helper()
	t.Log(line)
	path := os.Getenv(envReport)
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	require.NoError(t, err, "opening the report %s", path)
	defer f.Close()
	_, err = fmt.Fprintln(f, line)
	require.NoError(t, err, "writing the report %s", path)
}

// accelerator is the accelerator the conversion's log says ran (kvm or
// tcg): the first word after "conversion accelerator: ".
func accelerator(t *testing.T, excerpt string) string {
	t.Helper()
	for line := range strings.SplitSeq(excerpt, "\n") {
		if rest, ok := strings.CutPrefix(line, "conversion accelerator: "); ok {
			return strings.Fields(rest)[0]
		}
	}
	assert.Fail(t, "the conversion log does not say which accelerator ran")
	return "unknown"
}

// TestRealGuestBlankDisk migrates a VM whose disk holds no operating
// system: the real virt-v2v fails inspection, the migration ends Failed in
// the conversion-failure class with virt-v2v's own message in status, at
// the first attempt (converting again cannot help), and the source VM is
// powered on again.
func TestRealGuestBlankDisk(t *testing.T) {
	guestImages(t)
	s := realGuestStack(t, "")
	image := filepath.Join(t.TempDir(), "blank.img")
	require.NoError(t, os.WriteFile(image, nil, 0o644), "creating the blank image")
	require.NoError(t, os.Truncate(image, 256*vcsimlocal.MiB), "sizing the blank image")
	disk, err := vcsimlocal.ImageDisk(image)
	require.NoError(t, err, "the blank image as a vcsim disk")
	_, err = s.vc.AddVM(s.ctx, vcsimlocal.VMSpec{
		Name: "blank", Sockets: 1, CoresPerSocket: 1, MemoryMiB: 512, Firmware: "bios",
		Disks: []vcsimlocal.DiskSpec{disk}, PoweredOn: true,
	})
	require.NoError(t, err, "adding VM blank to vcsim")
	m := s.create(s.realGuestMigration("blank", "blank"))
	m = s.waitPhase(m.Name, v1alpha1.PhaseFailed, 20*time.Minute)
	le := m.Status.LastError
	require.NotNil(t, le, "last error, want a conversion failure")
	require.Equal(t, v1alpha1.PhaseConverting, le.Phase, "last error %+v, want a conversion failure", le)
	require.Equal(t, statemachine.ReasonConversionFailed, le.Reason, "last error %+v, want a conversion failure", le)
	t.Logf("status.lastError: reason=%s message=%q", le.Reason, le.Message)
	for _, want := range []string{
		"virt-v2v: inspection could not detect the source guest (or physical machine).",
		"No root device found in this operating system image.",
		statemachine.ConversionInspectionFailed + ": converting again cannot help",
	} {
		assert.Contains(t, le.Message, want, "last error message lacks %q", want)
	}
	assert.Equal(t, int32(0), m.Status.Retries, "retries, want one attempt, no retry")
	if assert.NotNil(t, m.Status.Conversion, "conversion status, want one attempt, no retry") {
		assert.Equal(t, int32(1), m.Status.Conversion.Attempt, "conversion %+v, want one attempt, no retry", m.Status.Conversion)
	}
	assert.Equal(t, "poweredOn", s.powerState("blank"), "source after the failure, want poweredOn (as found)")
	if sc := m.Status.SourceControl; assert.NotNil(t, sc, "source control, want a restore recorded") {
		assert.NotNil(t, sc.RestoredAt, "source control %+v, want a restore recorded", sc)
	}
	_, err = s.kv.KubevirtV1().VirtualMachines(s.ns).Get(s.ctx, "blank", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "a target VM after a failed conversion: %v, want NotFound", err)
}
