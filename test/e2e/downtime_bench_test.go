//go:build e2e

package e2e

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/test/vcsimlocal"
)

// benchDowntimeSizes names the disk sizes, in GiB, of the downtime
// benchmark (make bench-downtime sets it); unset, the benchmark is skipped.
const benchDowntimeSizes = "BENCH_DOWNTIME_GIB"

// TestBenchDowntime is make bench-downtime (hack/bench-downtime.sh): for
// each size it migrates a VM of one disk of that many GiB of pseudo-random
// bytes through the real node, the real CDI and local-path, with the
// simulated conversion, and prints
//
//	downtime: size=<GiB> transfer=<s> conversion=<s> other=<s> total=<s> written=<x> read=<x> status=<s>
//
// The times are when the benchmark's watch saw each checkpoint: the source
// seen off (status.downtime.sourceStoppedAt set: the outage begins), the
// migration leaving TransferringDisks, leaving Converting, and the target
// seen running (status.downtime.targetRunningAt set: the outage ends);
// other is everything after the conversion. status is the controller's
// own status.downtime.seconds. written and read are the bytes the block
// device under the node's volumes wrote and read during the outage per
// byte of the disk (/proc/diskstats; sync before the source stops and
// when the target runs, so the writes of the outage are on the device and
// no earlier ones are; the page cache dropped before the migration, so
// the source is read from the device). Re-reads of bytes written during
// the outage come from the page cache and are not in read: written is the
// figure that counts the copies.
func TestBenchDowntime(t *testing.T) {
	sizes := os.Getenv(benchDowntimeSizes)
	if sizes == "" {
		t.Skip(benchDowntimeSizes + " is unset: make bench-downtime runs this")
	}
	for _, f := range strings.Fields(sizes) {
		gib, err := strconv.Atoi(f)
		require.NoError(t, err, "%s: %q is not a whole number of GiB", benchDowntimeSizes, f)
		require.Positive(t, gib, "%s: sizes are positive", benchDowntimeSizes)
		t.Run(f+"GiB", func(t *testing.T) { benchDowntime(t, gib) })
	}
}

// outageMarks are the moments the benchmark saw.
type outageMarks struct {
	stopped, transferred, converted, running time.Time
}

func benchDowntime(t *testing.T, gib int) {
	s := newStack(t, stackOptions{})
	size := int64(gib) << 30
	image := filepath.Join(t.TempDir(), "disk.img")
	start := time.Now()
	require.NoError(t, writeRandomImage(image, size, uint64(gib)), "writing the source disk")
	t.Logf("source disk of %d GiB written in %s", gib, time.Since(start).Round(time.Millisecond))
	disk, err := vcsimlocal.ImageDisk(image)
	require.NoError(t, err)
	name := fmt.Sprintf("downtime-%dg", gib)
	spec := vcsimlocal.SampleVM(name, 400+uint64(gib))
	spec.Disks = []vcsimlocal.DiskSpec{disk}
	_, err = s.vc.AddVM(s.ctx, spec)
	require.NoError(t, err, "adding VM %s to vcsim", name)

	device, err := blockDevice(image)
	require.NoError(t, err)
	require.NoError(t, dropPageCache(), "syncing and dropping the page cache")
	w, err := s.mig.MigrationV1alpha1().VirtualMachineMigrations(s.ns).Watch(s.ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	require.NoError(t, err, "watching migration %s", name)
	defer w.Stop()
	s.create(s.newMigration(name, name))

	var marks outageMarks
	var before, after diskCounters
	timeout := time.After(10*time.Minute + time.Duration(gib)*time.Minute)
	var last *v1alpha1.VirtualMachineMigration
	for marks.running.IsZero() {
		var ev watch.Event
		select {
		case ev = <-w.ResultChan():
		case <-timeout:
			require.FailNow(t, "the benchmark's migration did not finish", "%s", describe(last))
		}
		m, ok := ev.Object.(*v1alpha1.VirtualMachineMigration)
		require.True(t, ok, "watch event %s: %v", ev.Type, ev.Object)
		last = m
		now := time.Now()
		require.NotEqual(t, v1alpha1.PhaseFailed, m.Status.Phase, "%s", describe(m))
		dt := m.Status.Downtime
		if marks.stopped.IsZero() && dt != nil {
			marks.stopped = now
			// The stop was seen: what the source wrote before it is
			// flushed, and counting begins.
			unix.Sync()
			before, err = readDiskCounters(device)
			require.NoError(t, err)
		}
		// Past the transfer once the outage began: past the conversion
		// too unless converting.
		if phase := m.Status.Phase; !marks.stopped.IsZero() && phase != v1alpha1.PhaseStoppingSource && phase != v1alpha1.PhaseTransferringDisks {
			setOnce(&marks.transferred, now)
			if phase != v1alpha1.PhaseConverting {
				setOnce(&marks.converted, now)
			}
		}
		if dt != nil && dt.TargetRunningAt != nil {
			marks.running = now
			unix.Sync()
			after, err = readDiskCounters(device)
			require.NoError(t, err)
		}
	}
	m := s.waitPhase(name, v1alpha1.PhaseSucceeded, 5*time.Minute)
	require.Len(t, m.Status.Disks, 1)
	target, err := blockDevice(s.claimDir(m.Status.Disks[0].DataVolume))
	require.NoError(t, err)
	require.Equal(t, device, target, "the source image and the node's volumes must share one device for the counts to hold")
	status := "unknown"
	if dt := m.Status.Downtime; dt != nil && dt.Seconds != nil {
		status = strconv.FormatInt(*dt.Seconds, 10)
	}
	secs := func(from, to time.Time) string { return fmt.Sprintf("%.1f", to.Sub(from).Seconds()) }
	line := fmt.Sprintf("downtime: size=%d transfer=%s conversion=%s other=%s total=%s written=%.2f read=%.2f status=%s",
		gib, secs(marks.stopped, marks.transferred), secs(marks.transferred, marks.converted),
		secs(marks.converted, marks.running), secs(marks.stopped, marks.running),
		float64(after.written-before.written)/float64(size), float64(after.read-before.read)/float64(size), status)
	// The line goes to the output whatever -v says: the script collects it.
	fmt.Println(line)
	t.Log(line)
}

// setOnce sets *at to now unless it is set.
func setOnce(at *time.Time, now time.Time) {
	if at.IsZero() {
		*at = now
	}
}

// writeRandomImage writes size bytes of pseudo-random data from seed to
// path, in a stream (never the whole disk in memory), with its SHA-256
// beside it (path.sha256) so that vcsim need not read it again.
func writeRandomImage(path string, size int64, seed uint64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	out := bufio.NewWriterSize(io.MultiWriter(f, h), 4<<20)
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	buf := make([]byte, 1<<20)
	for left := size; left > 0; left -= int64(len(buf)) {
		for i := 0; i < len(buf); i += 8 {
			binary.LittleEndian.PutUint64(buf[i:], r.Uint64())
		}
		n := min(int64(len(buf)), left)
		if _, err := out.Write(buf[:n]); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
	}
	if err := out.Flush(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", path, err)
	}
	return os.WriteFile(path+".sha256", []byte(hex.EncodeToString(h.Sum(nil))+"\n"), 0o644)
}

// dropPageCache writes every dirty page and drops the clean ones.
func dropPageCache() error {
	unix.Sync()
	return os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0o200)
}

// diskCounters are a block device's byte counters.
type diskCounters struct{ read, written int64 }

// blockDevice is the major and minor number of the device holding path.
func blockDevice(path string) ([2]uint32, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return [2]uint32{}, fmt.Errorf("stat %s: %w", path, err)
	}
	return [2]uint32{unix.Major(st.Dev), unix.Minor(st.Dev)}, nil
}

// readDiskCounters reads a device's bytes read and written from
// /proc/diskstats (sectors of 512 bytes).
func readDiskCounters(dev [2]uint32) (diskCounters, error) {
	data, err := os.ReadFile("/proc/diskstats")
	if err != nil {
		return diskCounters{}, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 10 || f[0] != strconv.FormatUint(uint64(dev[0]), 10) || f[1] != strconv.FormatUint(uint64(dev[1]), 10) {
			continue
		}
		read, err1 := strconv.ParseInt(f[5], 10, 64)
		written, err2 := strconv.ParseInt(f[9], 10, 64)
		if err1 != nil || err2 != nil {
			return diskCounters{}, fmt.Errorf("/proc/diskstats: cannot read %q", line)
		}
		return diskCounters{read: read * 512, written: written * 512}, nil
	}
	return diskCounters{}, fmt.Errorf("/proc/diskstats has no device %d:%d", dev[0], dev[1])
}
