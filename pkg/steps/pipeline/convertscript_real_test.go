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
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed: run hack/install-conversion-deps.sh", tool)
		}
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
			if run.exitCode == 0 || o.Reason != tc.reason || !strings.Contains(o.Message, tc.message) {
				t.Errorf("exit %d, reason %q, message %q; want a failure %s with %q", run.exitCode, o.Reason, o.Message, tc.reason, tc.message)
			}
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
	if err := os.WriteFile(disk, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(disk, 512<<20); err != nil {
		t.Fatal(err)
	}
	script := failingDisks[name]
	if script == "" {
		return disk
	}
	cmd := exec.Command("guestfish", "--rw", "-a", disk)
	cmd.Stdin = strings.NewReader(script)
	cmd.Env = append(os.Environ(), "LIBGUESTFS_BACKEND=direct", "LIBGUESTFS_BACKEND_SETTINGS=force_tcg")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("guestfish: %v\n%s", err, out)
	}
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
	if err != nil {
		t.Fatalf("sfdisk: %v", err)
	}
	var start int64
	for line := range strings.SplitSeq(string(out), "\n") {
		if _, rest, ok := strings.Cut(line, "start="); ok {
			start, _ = strconv.ParseInt(strings.TrimSpace(strings.Split(rest, ",")[0]), 10, 64)
			break
		}
	}
	if start == 0 {
		t.Fatalf("no partition in %s:\n%s", disk, out)
	}
	f, err := os.OpenFile(disk, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	junk := make([]byte, 7<<10)
	for i := range junk {
		junk[i] = byte(i*7 + 13)
	}
	if _, err := f.WriteAt(junk, start*512+1024); err != nil {
		t.Fatal(err)
	}
}

// saveV2VFixture keeps a real run as testdata/virt-v2v/<name>/: the
// combined output, the machine-readable messages and the exit status.
func saveV2VFixture(t *testing.T, name string, run scriptRun) {
	t.Helper()
	dir := filepath.Join(v2vFixtures, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(file string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, file), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	events, err := os.ReadFile(filepath.Join(run.work, "virt-v2v-events.json"))
	if err != nil {
		t.Fatal(err)
	}
	write("events.json", events)
	write("status", []byte(strconv.Itoa(run.exitCode)+"\n"))
	out, err := os.Create(filepath.Join(dir, "output.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	zw := gzip.NewWriter(out)
	if _, err := zw.Write([]byte(run.output)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
}
