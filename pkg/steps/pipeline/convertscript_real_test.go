//go:build conversion

package pipeline

import (
	"compress/gzip"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"platform.example/vm-migration/pkg/statemachine"
)

var updateV2VFixtures = flag.Bool("update-v2v-fixtures", false, "rewrite testdata/virt-v2v/<run>/ from the real runs")

// failingDisks are guestfish scripts (run with the disk as -a) that make
// disks virt-v2v must refuse; "" leaves the disk blank.
var failingDisks = map[string]string{
	"blank": "",
	// A Debian-looking root whose superblock and group descriptors are
	// then overwritten (corruptSuperblock).
	"corrupt": `run
part-disk /dev/sda mbr
mkfs ext4 /dev/sda1 label:root
mount /dev/sda1 /
mkdir-p /etc
mkdir-p /usr/bin
ln-s usr/bin /bin
write /etc/fstab "LABEL=root / ext4 defaults 0 1\n"
write /etc/os-release "NAME=Debian GNU/Linux\nID=debian\nVERSION_ID=12\n"
write /etc/debian_version "12.15\n"
`,
	// An Alpine root: inspected (alpinelinux 3.18), not convertible.
	"alpine": `run
part-disk /dev/sda mbr
mkfs ext4 /dev/sda1 label:root
mount /dev/sda1 /
mkdir-p /etc
mkdir-p /usr/bin
mkdir-p /lib/apk/db
ln-s usr/bin /bin
write /etc/fstab "LABEL=root / ext4 defaults 0 1\n"
write /etc/os-release "NAME=\"Alpine Linux\"\nID=alpine\nVERSION_ID=3.18.4\nPRETTY_NAME=\"Alpine Linux v3.18\"\n"
write /etc/alpine-release "3.18.4\n"
write /lib/apk/db/installed ""
upload /bin/ls /usr/bin/ls
upload /bin/dash /usr/bin/sh
`,
}

// TestRealConversionFailures runs the conversion script with the installed
// virt-v2v-in-place on disks it must refuse, and checks how the controller
// classifies what it printed: a blank disk and a corrupt one (inspection
// failed), an Alpine guest (unsupported).
func TestRealConversionFailures(t *testing.T) {
	for _, tool := range []string{"virt-v2v-in-place", "nbdkit", "guestfish"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "%s is not installed: run hack/install-conversion-deps.sh", tool)
	}
	tests := map[string]struct {
		reason  string
		message string
	}{
		"blank":   {statemachine.ConversionInspectionFailed, "No root device found in this operating system image."},
		"corrupt": {statemachine.ConversionInspectionFailed, "No root device found in this operating system image."},
		"alpine":  {statemachine.ConversionUnsupportedGuest, "unable to convert this guest type (linux/alpinelinux)"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			disk := makeFailingDisk(t, name)
			domain := `<domain type="kvm"><name>` + name + `</name><memory unit="KiB">1048576</memory><vcpu>1</vcpu>` +
				`<os><type arch="x86_64">hvm</type></os><devices><disk type="file" device="disk"><driver name="qemu" type="raw"/>` +
				`<source file="` + disk + `"/><target dev="sda" bus="scsi"/></disk></devices></domain>`
			// TCG: the appliance's kernel does not run on every /dev/kvm.
			run := runConvertScript(t, "/usr/bin", domain, "LIBGUESTFS_BACKEND=direct", "LIBGUESTFS_BACKEND_SETTINGS=force_tcg")
			o := run.observe()
			t.Logf("exit %d, observed reason %q, message %q", run.exitCode, o.Reason, o.Message)
			assert.NotZero(t, run.exitCode, "virt-v2v-in-place must refuse the %s disk", name)
			assert.Equal(t, tc.reason, o.Reason, "the failure's reason, as the controller classifies it")
			assert.Contains(t, o.Message, tc.message, "the failure's message")
			if *updateV2VFixtures {
				saveV2VFixture(t, name, run)
			}
		})
	}
}

// makeFailingDisk builds one of failingDisks.
func makeFailingDisk(t *testing.T, name string) string {
	t.Helper()
	disk := filepath.Join(t.TempDir(), name+".img")
	require.NoError(t, os.WriteFile(disk, nil, 0o644), "creating the disk image")
	require.NoError(t, os.Truncate(disk, 512<<20), "sizing the disk image")
	script := failingDisks[name]
	if script == "" {
		return disk
	}
	cmd := exec.Command("guestfish", "--rw", "-a", disk)
	cmd.Stdin = strings.NewReader(script)
	cmd.Env = append(os.Environ(), "LIBGUESTFS_BACKEND=direct", "LIBGUESTFS_BACKEND_SETTINGS=force_tcg")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "guestfish making the %s disk:\n%s", name, out)
	if name == "corrupt" {
		corruptSuperblock(t, disk)
	}
	return disk
}

// corruptSuperblock overwrites the first 8 KiB of the first partition
// (after its first KiB): the ext4 superblock and group descriptors.
func corruptSuperblock(t *testing.T, disk string) {
	t.Helper()
	out, err := exec.Command("sfdisk", "-d", disk).Output()
	require.NoError(t, err, "sfdisk reading the partition table")
	var start int64
	for line := range strings.SplitSeq(string(out), "\n") {
		if _, rest, ok := strings.Cut(line, "start="); ok {
			start, _ = strconv.ParseInt(strings.TrimSpace(strings.Split(rest, ",")[0]), 10, 64)
			break
		}
	}
	require.NotZero(t, start, "no partition in %s:\n%s", disk, out)
	f, err := os.OpenFile(disk, os.O_WRONLY, 0)
	require.NoError(t, err, "opening the disk image")
	defer f.Close()
	junk := make([]byte, 7<<10)
	for i := range junk {
		junk[i] = byte(i*7 + 13)
	}
	_, err = f.WriteAt(junk, start*512+1024)
	require.NoError(t, err, "overwriting the superblock")
}

// saveV2VFixture keeps a real run as testdata/virt-v2v/<name>/: the
// combined output, the machine-readable messages and the exit status.
func saveV2VFixture(t *testing.T, name string, run scriptRun) {
	t.Helper()
	dir := filepath.Join(v2vFixtures, name)
	require.NoError(t, os.MkdirAll(dir, 0o755), "making the fixture directory")
	write := func(file string, data []byte) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, file), data, 0o644), "writing the fixture's %s", file)
	}
	events, err := os.ReadFile(filepath.Join(run.work, "virt-v2v-events.json"))
	require.NoError(t, err, "reading virt-v2v's machine-readable messages")
	write("events.json", events)
	write("status", []byte(strconv.Itoa(run.exitCode)+"\n"))
	out, err := os.Create(filepath.Join(dir, "output.gz"))
	require.NoError(t, err, "creating the fixture's output.gz")
	defer out.Close()
	zw := gzip.NewWriter(out)
	_, err = zw.Write([]byte(run.output))
	require.NoError(t, err, "writing the fixture's output.gz")
	require.NoError(t, zw.Close(), "writing the fixture's output.gz")
}
