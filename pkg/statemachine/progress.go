package statemachine

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// progressDue reports whether enough time passed since progress was last
// written to write it again, and otherwise asks to look again when it is.
func (d *decider) progressDue() bool {
	last := d.st.LastProgressTime
	if last == nil {
		return true
	}
	elapsed := d.now.Sub(last.Time)
	if elapsed >= d.cfg.ProgressInterval {
		return true
	}
	d.requeue(d.cfg.ProgressInterval - elapsed)
	return false
}

// recordTransferProgress copies a running transfer's progress into status,
// no more often than the progress interval, and only when bytes moved.
func (d *decider) recordTransferProgress(progress []DiskProgress) {
	moved := false
	for _, p := range progress {
		for _, disk := range d.st.Disks {
			if disk.Key == p.Key && p.BytesDone > disk.BytesTransferred {
				moved = true
			}
		}
	}
	if !moved || !d.progressDue() {
		return
	}
	for i := range d.st.Disks {
		disk := &d.st.Disks[i]
		for _, p := range progress {
			if p.Key != disk.Key {
				continue
			}
			disk.BytesTransferred = p.BytesDone
			disk.RateBytesPerSecond = p.RateBytesPerSecond
			disk.ETASeconds = nil
			if p.RateBytesPerSecond > 0 && disk.CapacityBytes > p.BytesDone {
				eta := (disk.CapacityBytes - p.BytesDone + p.RateBytesPerSecond - 1) / p.RateBytesPerSecond
				disk.ETASeconds = &eta
			}
		}
	}
	now := d.now
	d.st.LastProgressTime = &now
}

// recordImportProgress copies the DataVolumes' phase and progress into
// status. A phase change is always written; a progress change only once the
// progress interval passed.
func (d *decider) recordImportProgress() {
	phaseChanged, moved := false, false
	for _, disk := range d.st.Disks {
		dv := d.obs.DataVolumes[disk.DataVolume]
		phaseChanged = phaseChanged || dv.Phase != disk.ImportPhase
		moved = moved || (dv.Progress != disk.ImportProgress && dv.Progress != "N/A")
	}
	if !phaseChanged && (!moved || !d.progressDue()) {
		return
	}
	for i := range d.st.Disks {
		disk := &d.st.Disks[i]
		dv := d.obs.DataVolumes[disk.DataVolume]
		disk.ImportPhase, disk.ImportProgress = dv.Phase, dv.Progress
	}
	if moved || phaseChanged {
		now := d.now
		d.st.LastProgressTime = &now
	}
}

// The migration's overall progress, status.progress (kubectl get's
// PROGRESS, the figure kubectl vmm shows beside the phase), is a whole
// percentage of the migration, not of the phase it is in, so that it
// never goes back as the phases follow one another: the transfer's bytes
// move it from 0% to ProgressTransferred, where the conversion (which
// reports no progress) holds it; the import starts at ProgressConverted
// and the DataVolumes' progress moves it to ProgressImported, where it
// stays while the VM is created and started; the target seen running
// makes it 100%. A transfer made again (a retry, or after a failed
// conversion) does not take it back: the disks show that attempt's own
// progress, and the figure holds until the attempt passes it.
const (
	// ProgressTransferred is the figure once every disk is transferred.
	ProgressTransferred = 70
	// ProgressConverted is the figure the import starts from.
	ProgressConverted = 80
	// ProgressImported is the figure once every disk is imported, while
	// the VM is created and started.
	ProgressImported = 95
)

// Progress is the overall progress st's phase and disks make, as
// status.progress holds it ("45%"), or "" in a phase without one: before
// the transfer, and once the migration fails or is cancelled (no copy
// runs). The controller never writes a figure below the one status
// holds (recordProgress).
func Progress(st *v1alpha1.VirtualMachineMigrationStatus) string {
	switch st.Phase {
	case v1alpha1.PhaseTransferringDisks:
		var done, total int64
		for _, disk := range st.Disks {
			done, total = done+max(disk.BytesTransferred, 0), total+max(disk.CapacityBytes, 0)
		}
		return fmt.Sprintf("%d%%", share(done, total, ProgressTransferred))
	case v1alpha1.PhaseConverting:
		return fmt.Sprintf("%d%%", ProgressTransferred)
	case v1alpha1.PhaseImporting:
		var sum float64
		for _, disk := range st.Disks {
			if disk.ImportPhase == DataVolumeSucceeded {
				sum += 100
			} else {
				sum += parsePercent(disk.ImportProgress)
			}
		}
		imported := 0
		if n := len(st.Disks); n > 0 {
			imported = int((ProgressImported - ProgressConverted) * sum / 100 / float64(n))
		}
		return fmt.Sprintf("%d%%", ProgressConverted+imported)
	case v1alpha1.PhaseCreatingVM, v1alpha1.PhaseStarting:
		return fmt.Sprintf("%d%%", ProgressImported)
	case v1alpha1.PhaseCleaningUp, v1alpha1.PhaseSucceeded:
		return "100%"
	}
	return ""
}

// share is done/total of width, whole, from 0 to width: the bytes done
// come from the transfer's progress, and a count below 0 or past the
// total (or a sum that wrapped) reads as 0 or width, never as more, nor
// as a product that overflowed.
func share(done, total int64, width uint64) uint64 {
	switch {
	case total <= 0 || done <= 0:
		return 0
	case done >= total:
		return width
	}
	hi, lo := bits.Mul64(uint64(done), width)
	q, _ := bits.Div64(hi, lo, uint64(total)) // done < total, so hi = done*width>>64 < total: no panic
	return q
}

// recordProgress keeps status.progress at the overall progress
// (Progress), never below the figure it holds: a figure of an attempt
// started again, or of a phase gone back to, does not take it back. It
// is cleared once the migration fails (rolling back or Failed): no copy
// runs while the source is restored or after, and the last figure would
// read as how far the migration goes; status.disks keep how far each
// disk got. Before the transfer, and while cancelling, it stays as it is.
func (d *decider) recordProgress() {
	if d.st.Phase == v1alpha1.PhaseRollingBack || d.st.Phase == v1alpha1.PhaseFailed {
		d.st.Progress = ""
		return
	}
	p := Progress(d.st)
	if p == "" {
		return
	}
	held, ok := heldPercent(d.st.Progress)
	if now, _ := heldPercent(p); ok && held >= now {
		return
	}
	d.st.Progress = p
}

// heldPercent reads a figure status.progress holds ("45%"); ok is false
// for none, or one this controller does not write.
func heldPercent(s string) (int, bool) {
	v, err := strconv.Atoi(strings.TrimSuffix(s, "%"))
	if err != nil || !strings.HasSuffix(s, "%") || v < 0 || v > 100 {
		return 0, false
	}
	return v, true
}

// parsePercent reads CDI's "45.20%" progress; anything else (NaN too) is 0.
func parsePercent(s string) float64 {
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if err != nil || !(v >= 0) {
		return 0
	}
	return min(v, 100)
}

// progressWhilePaused keeps recording what a running transfer Job or
// import reports while the migration is paused: a pause holds the next
// action, and a Job already running goes on (it is not interrupted), so
// its progress is still news. Observing is not an action.
func (d *decider) progressWhilePaused() {
	switch d.st.Phase {
	case v1alpha1.PhaseTransferringDisks:
		if job := d.obs.TransferJob; job != nil && !job.Succeeded && !job.Failed && d.st.Transfer != nil && job.Name == d.st.Transfer.JobName {
			d.recordTransferProgress(job.Progress)
		}
	case v1alpha1.PhaseImporting:
		for _, disk := range d.st.Disks {
			if _, ok := d.obs.DataVolumes[disk.DataVolume]; !ok || disk.DataVolume == "" {
				return
			}
		}
		d.recordImportProgress()
	}
}
