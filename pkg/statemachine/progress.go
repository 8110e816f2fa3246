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
	var done, total int64
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
		done += disk.BytesTransferred
		total += disk.CapacityBytes
	}
	now := d.now
	d.st.LastProgressTime = &now
	d.st.Progress = percent(done, total)
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
	var sum float64
	for i := range d.st.Disks {
		disk := &d.st.Disks[i]
		dv := d.obs.DataVolumes[disk.DataVolume]
		disk.ImportPhase, disk.ImportProgress = dv.Phase, dv.Progress
		if dv.Phase == DataVolumeSucceeded {
			sum += 100
		} else {
			sum += parsePercent(dv.Progress)
		}
	}
	if moved || phaseChanged {
		now := d.now
		d.st.LastProgressTime = &now
	}
	if n := len(d.st.Disks); n > 0 {
		d.st.Progress = fmt.Sprintf("%d%%", int(sum/float64(n)))
	}
}

// percent formats done/total as a whole percentage from 0 to 100: the
// bytes done come from the transfer's progress, and a count below 0 or
// past the total (or a sum that wrapped) reads as 0% or 100%, never as
// more, nor as a product that overflowed.
func percent(done, total int64) string {
	switch {
	case total <= 0 || done <= 0:
		return "0%"
	case done >= total:
		return "100%"
	}
	hi, lo := bits.Mul64(uint64(done), 100)
	q, _ := bits.Div64(hi, lo, uint64(total)) // done < total, so hi = done*100>>64 < total: no panic
	return fmt.Sprintf("%d%%", q)
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

// forgetFailedProgress clears status.progress once the migration fails:
// it is the progress of a copy that runs, none runs while the source is
// restored or after, and the last figure (100% once the transfer
// finished) would read as done. status.disks keep how far each disk got.
func (d *decider) forgetFailedProgress() {
	if d.st.Phase == v1alpha1.PhaseRollingBack || d.st.Phase == v1alpha1.PhaseFailed {
		d.st.Progress = ""
	}
}
