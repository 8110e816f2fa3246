package statemachine

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
)

// The checksum chain: every disk's bytes are accounted for from the source
// to the target. The transfer records the SHA-256 of what it read
// (status.disks[].sha256); the conversion the SHA-256 of what it left in
// the staging volume (convertedSHA256; the transferred one when skipped);
// before the VM is created, a verification Job reads each target claim
// back (targetSHA256), which must be the converted one, or the migration
// fails before the VM ever starts and its rollback restores the source.
// The claim must hold when the VM starts: a start later than
// VerificationMaxAge after the verification reads the targets back again
// first (reverifyBeforeStart).

// verificationAttempt is the status of a verification attempt.
func verificationAttempt(migration string, attempt int32) *v1alpha1.JobStatus {
	return &v1alpha1.JobStatus{JobName: naming.VerificationJob(migration, attempt), Attempt: attempt}
}

// recordConverted records what the conversion left in the staging
// volumes (by disk name) and what it found of the guest's NICs.
func (d *decider) recordConverted(job *JobObservation) {
	for i := range d.st.Disks {
		disk := &d.st.Disks[i]
		disk.Checksums = nil
		for _, c := range job.Checksums {
			if c.Disk == disk.Name && !c.Staged && c.SHA256 != "" {
				disk.Checksums = &v1alpha1.DiskChecksums{Converted: c.SHA256, ConvertedBytes: c.Size, RehashedBytes: c.Rehashed}
			}
		}
	}
	d.st.Conversion.Interfaces = slices.Clone(job.Interfaces)
}

// convertedUnchanged records, for a skipped conversion, the transferred
// bytes as the converted ones.
func (d *decider) convertedUnchanged() {
	for i := range d.st.Disks {
		disk := &d.st.Disks[i]
		disk.Checksums = &v1alpha1.DiskChecksums{Converted: disk.SHA256, ConvertedBytes: disk.BytesTransferred}
	}
}

// verifyTargets runs once every DataVolume is populated. Where the disks
// were written in place and the conversion hashed each of them, the
// target is the converted volume: its checksum is the converted one, and
// no read is made, unless the migration was paused since that read (a
// person may have written the claims meanwhile) or it is older than
// VerificationMaxAge. Otherwise (a CDI clone copied the bytes, a disk the
// conversion did not hash) a verification Job reads each target claim,
// the chain is checked, the Job goes (its pod no longer holds the claims
// the VM uses), and the migration moves on to create the VM.
func (d *decider) verifyTargets() {
	done := func() { d.advance(v1alpha1.PhaseCreatingVM, d.chainEvidence()) }
	if lost := d.lostTargetClaims(); len(lost) > 0 {
		d.fail(ReasonTargetClaimLost, fmt.Sprintf("the claims the transfer wrote are not the DataVolumes' claims any more: %s; their bytes are not the migrated disks, and the VM was not created",
			strings.Join(lost, "; ")))
		return
	}
	if d.st.Verification == nil {
		if at := d.inPlaceRead(); at != nil {
			reason, why := d.readStale(at.Time)
			if reason == "" {
				reason, why = d.inPlaceClaimsUnsure()
			}
			if reason == "" {
				d.recordInPlaceTargets(*at)
				done()
				return
			}
			d.readAgain(reason, why)
		}
	}
	if d.st.Verification == nil {
		d.st.Verification = verificationAttempt(d.m.Name, 1)
	}
	d.verify(done)
}

// inPlaceRead is when every target disk was last read whole without a
// verification Job: each written in place, hashed by the conversion as
// it left it (or, with the conversion skipped, by the transfer as it
// wrote it). A read is dated by when it began: its Job's creation. Nil
// when any disk needs a verification read.
func (d *decider) inPlaceRead() *metav1.Time {
	for i := range d.st.Disks {
		if disk := &d.st.Disks[i]; !disk.WrittenInPlace() || disk.ConvertedSHA256() == "" {
			return nil
		}
	}
	if c := d.st.Conversion; c != nil && !c.Skipped {
		return readBegan(&c.JobStatus)
	}
	if t := d.st.Transfer; t != nil {
		return readBegan(t)
	}
	return nil
}

// readBegan is when the read of a Job began: its creation, as recorded;
// for a status recorded before creation times were (an upgrade), its
// completion, the only time known.
func readBegan(j *v1alpha1.JobStatus) *metav1.Time {
	if j.CompletedAt == nil {
		return nil
	}
	if j.CreatedAt != nil {
		return j.CreatedAt
	}
	return j.CompletedAt
}

// lostTargetClaims names, for each disk written in place whose DataVolume
// is populated, a claim the transfer wrote that is gone: the DataVolume's
// claim is another (CDI makes a blank one for its blank source when the
// written claim was deleted) or none.
func (d *decider) lostTargetClaims() []string {
	var lost []string
	for _, disk := range d.st.Disks {
		dv, ok := d.obs.DataVolumes[disk.DataVolume]
		if !disk.WrittenInPlace() || disk.TargetClaimUID == "" || !ok || dv.Phase != DataVolumeSucceeded {
			continue
		}
		switch c := dv.Claim; {
		case c == nil:
			lost = append(lost, fmt.Sprintf("%s: claim %s (UID %s) is gone", disk.Name, disk.StagingClaim, disk.TargetClaimUID))
		case c.UID != disk.TargetClaimUID:
			lost = append(lost, fmt.Sprintf("%s: claim %s is UID %s, not the UID %s the transfer wrote", disk.Name, disk.StagingClaim, c.UID, disk.TargetClaimUID))
		}
	}
	return lost
}

// inPlaceClaimsUnsure says why the in-place read does not vouch for the
// target disks (a verification reads them instead): a disk whose claim
// is not known to be the one the transfer wrote (its UID unrecorded, by a
// version before it was), or not bound under its DataVolume.
func (d *decider) inPlaceClaimsUnsure() (reason, why string) {
	for _, disk := range d.st.Disks {
		dv := d.obs.DataVolumes[disk.DataVolume]
		c := dv.Claim
		switch {
		case disk.TargetClaimUID == "":
			why = fmt.Sprintf("the UID of the claim the transfer wrote %s into was not recorded", disk.Name)
		case c == nil || c.UID != disk.TargetClaimUID:
			why = fmt.Sprintf("claim %s is not seen as the one the transfer wrote %s into", disk.StagingClaim, disk.Name)
		case !c.Bound:
			why = fmt.Sprintf("claim %s is not bound", disk.StagingClaim)
		case c.ControllerUID == "" || c.ControllerUID != dv.Ref.UID:
			why = fmt.Sprintf("claim %s is not DataVolume %s's", disk.StagingClaim, disk.DataVolume)
		default:
			continue
		}
		return ReasonTargetsReadAgain, fmt.Sprintf("%s: reading the target disks before VirtualMachine %s is created", why, d.targetName())
	}
	return "", ""
}

// lastTargetRead is when the target disks were last read whole: by the
// last verification Job, else by the conversion or the transfer of disks
// written in place. Nil when they were not, or a verification runs.
func (d *decider) lastTargetRead() *metav1.Time {
	if v := d.st.Verification; v != nil {
		return readBegan(v)
	}
	return d.inPlaceRead()
}

// readStale says why target disks read at the given time must be read
// again before the VM is created or started: the migration was paused
// since (the Paused condition changed after the read, or holds), or the
// read is older than VerificationMaxAge. An empty reason: it holds.
func (d *decider) readStale(at time.Time) (reason, why string) {
	if c := meta.FindStatusCondition(d.st.Conditions, ConditionPaused); c != nil &&
		(c.Status == metav1.ConditionTrue || !c.LastTransitionTime.Time.Before(at)) {
		return ReasonTargetsReadAgain, fmt.Sprintf("the migration was paused after the target disks were last read (%s): reading them again before VirtualMachine %s is created or started",
			at.UTC().Format(time.RFC3339), d.targetName())
	}
	if age := d.now.Sub(at); age > d.cfg.VerificationMaxAge {
		return ReasonVerificationAged, fmt.Sprintf("the target disks were read back %s ago, more than %s: reading them back again before VirtualMachine %s starts",
			age.Round(time.Second), d.cfg.VerificationMaxAge, d.targetName())
	}
	return "", ""
}

// readAgain records a new verification attempt, and says why in an event.
func (d *decider) readAgain(reason, why string) {
	d.out.Events = append(d.out.Events, Event{Reason: reason, Message: why})
	attempt := int32(1)
	if v := d.st.Verification; v != nil {
		attempt = v.Attempt + 1
	}
	d.st.Verification = verificationAttempt(d.m.Name, attempt)
}

// recordInPlaceTargets records, for disks written in place, the converted
// checksum as the target's: the VM's disk is the volume the conversion
// read, verified as of that read.
func (d *decider) recordInPlaceTargets(at metav1.Time) {
	for i := range d.st.Disks {
		sums := d.st.Disks[i].Checksums
		sums.Target, sums.TargetBytes, sums.VerifiedAt = sums.Converted, sums.ConvertedBytes, &at
		sums.Compared = v1alpha1.ComparedConvertedInPlace
	}
}

// verify runs the verification attempt recorded in status.verification
// and calls done once it is recorded and its Job gone. A Job that fails
// is retried under a new name; a target whose bytes are not the converted
// ones fails the migration.
func (d *decider) verify(done func()) {
	v := d.st.Verification
	job := d.obs.VerificationJob
	if v.CompletedAt == nil {
		noteJobCreated(v, job)
	}
	switch {
	case v.CompletedAt != nil && job != nil:
		d.remove(ActionDeleteJob, job.Name, job.Ref)
		d.working("removing verification job "+job.Name+": the VM will use the claims it read", d.cfg.PollInterval)
	case v.CompletedAt != nil:
		done()
	case job == nil:
		if d.earlierAttemptRuns(v.JobName) {
			return
		}
		d.act(ActionCreateVerificationJob, v.JobName, v.Attempt)
		d.working(fmt.Sprintf("verifying the target disks (job %s, attempt %d)", v.JobName, v.Attempt), d.cfg.PollInterval)
	case job.Failed:
		if d.retry(ReasonVerificationFailed, fmt.Sprintf("verification job %s failed: %s", job.Name, job.Message)) {
			*v = *verificationAttempt(d.m.Name, v.Attempt+1)
		}
	case job.awaitsResult(d.now.Time):
		d.working(fmt.Sprintf("verification job %s completed; waiting for its result", job.Name), JobResultPoll)
	case job.Succeeded:
		d.checkChain(job)
	default:
		// A pod that never ran read nothing: the next attempt reads
		// every target disk, once this Job is gone.
		if d.neverStarted(job, func() { *v = *verificationAttempt(d.m.Name, v.Attempt+1) }) {
			return
		}
		d.working(fmt.Sprintf("verifying the target disks (job %s, attempt %d)%s", v.JobName, v.Attempt, d.startWait(job)), d.cfg.PollInterval)
	}
}

// checkChain records what a verification read and compares every target
// with its converted image.
func (d *decider) checkChain(job *JobObservation) {
	var missing, broken []string
	for i := range d.st.Disks {
		disk := &d.st.Disks[i]
		if disk.Checksums == nil {
			disk.Checksums = &v1alpha1.DiskChecksums{}
		}
		sums := disk.Checksums
		if c, ok := findChecksum(job.Checksums, disk.Name, true); ok && sums.Converted == "" {
			sums.Converted, sums.ConvertedBytes = c.SHA256, c.Size
		}
		c, ok := findChecksum(job.Checksums, disk.Name, false)
		readOnce := false
		if ok && (sums.Converted == "" || sums.Compared == v1alpha1.ComparedReadOnce) && disk.WrittenInPlace() {
			// The conversion did not hash this disk (a disk beyond the
			// ones its report has room for): the target is the volume
			// it converted, and this read is the only one of the
			// converted image, compared with nothing.
			sums.Converted, sums.ConvertedBytes = c.SHA256, c.Size
			readOnce = true
		}
		switch {
		case !ok || sums.Converted == "":
			missing = append(missing, disk.Name)
			continue
		case c.Bytes != disk.CapacityBytes:
			missing = append(missing, fmt.Sprintf("%s (%d bytes read, the disk has %d)", disk.Name, c.Bytes, disk.CapacityBytes))
			continue
		}
		sums.Target, sums.TargetBytes = c.SHA256, c.Size
		if readOnce {
			sums.Compared, sums.VerifiedAt = v1alpha1.ComparedReadOnce, nil
			continue
		}
		if c.SHA256 != sums.Converted {
			broken = append(broken, fmt.Sprintf("%s (DataVolume %s): target sha256 %s, converted %s%s", disk.Name, disk.DataVolume, c.SHA256, sums.Converted, mismatchAt(sums, c)))
			continue
		}
		sums.Compared, sums.VerifiedAt = v1alpha1.ComparedConvertedAndTarget, readBegan(d.st.Verification)
		if sums.VerifiedAt == nil {
			now := d.now
			sums.VerifiedAt = &now
		}
	}
	switch {
	case len(broken) > 0:
		d.fail(ReasonChecksumMismatch, fmt.Sprintf("the target disks do not hold the converted bytes: %s; the VM was not started",
			strings.Join(broken, "; ")))
	case len(missing) > 0:
		if d.retry(ReasonVerificationFailed, fmt.Sprintf("verification job %s gave no checksum for %s", job.Name, strings.Join(missing, ", "))) {
			*d.st.Verification = *verificationAttempt(d.m.Name, d.st.Verification.Attempt+1)
		}
	default:
		now := d.now
		d.st.Verification.CompletedAt = &now
		d.remove(ActionDeleteJob, job.Name, job.Ref)
		d.working("target disks read back; removing verification job "+job.Name, d.cfg.PollInterval)
	}
}

// mismatchAt records and says where a target read differs from its
// converted image: the first differing block the verification found
// against the block tree stored beside the image, when that tree is the
// converted one (its root is); otherwise it says why no range is named.
func mismatchAt(sums *v1alpha1.DiskChecksums, c ImageChecksum) string {
	switch {
	case c.StoredRoot == "":
		return ""
	case c.StoredRoot != sums.Converted:
		return "; the block tree stored beside the image was changed too (root " + shortSum(c.StoredRoot) + "): no range named"
	case c.FirstDifference == nil:
		return ""
	}
	r := *c.FirstDifference
	sums.Mismatch = &v1alpha1.ByteRange{Offset: r.Offset, Length: r.Length}
	return "; first difference at " + r.String()
}

// findChecksum finds a disk's image checksum of the kind asked for.
func findChecksum(sums []ImageChecksum, disk string, staged bool) (ImageChecksum, bool) {
	for _, c := range sums {
		if c.Disk == disk && c.Staged == staged && c.SHA256 != "" {
			return c, true
		}
	}
	return ImageChecksum{}, false
}

// chainEvidence says what the import and its verification proved, disk
// by disk: what was compared with what.
func (d *decider) chainEvidence() string {
	var compared, inPlace, once []string
	for _, disk := range d.st.Disks {
		part := fmt.Sprintf("%s sha256 %s", disk.Name, shortSum(disk.TargetSHA256()))
		switch disk.Checksums.Compared {
		case v1alpha1.ComparedReadOnce:
			once = append(once, part)
		case v1alpha1.ComparedConvertedInPlace:
			inPlace = append(inPlace, part)
		default:
			compared = append(compared, part)
		}
	}
	parts := []string{fmt.Sprintf("%d DataVolumes populated", len(d.st.Disks))}
	if len(inPlace) > 0 {
		parts = append(parts, fmt.Sprintf("adopting the claims the transfer wrote and the conversion hashed, unread since, with no copy (%s)", strings.Join(inPlace, ", ")))
	}
	if v := d.st.Verification; v != nil && len(compared) > 0 {
		parts = append(parts, fmt.Sprintf("job %s read back %s, each equal to the checksum of its converted image (%s)",
			v.JobName, plural(len(compared), "target disk"), strings.Join(compared, ", ")))
	}
	if v := d.st.Verification; v != nil && len(once) > 0 {
		parts = append(parts, fmt.Sprintf("job %s read %s once after the conversion, which hashed no image of them: nothing was compared (%s)",
			v.JobName, plural(len(once), "target disk"), strings.Join(once, ", ")))
	}
	return strings.Join(parts, "; ")
}

// shortSum is a checksum's first 12 hex digits, for messages.
func shortSum(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// reverifyBeforeStart reads every target disk back again when their last
// whole read (the verification's, or the conversion's of disks written
// in place) is older than VerificationMaxAge at the start, or the
// migration was paused since (the VM's creation was held by a quota, a
// webhook or a slow API, a person paused it): the claims may have been
// written since, and the VM must start on the bytes the chain vouches
// for. It returns true while that verification runs (a new attempt, its
// Job removed before the start); bytes that differ fail the migration
// with the VM never started. A status without a recorded read (written
// by a version before the chain) has nothing to renew.
func (d *decider) reverifyBeforeStart() bool {
	v := d.st.Verification
	running := v != nil && (v.CompletedAt == nil || d.obs.VerificationJob != nil)
	if !running {
		at := d.lastTargetRead()
		if at == nil {
			return false
		}
		reason, why := d.readStale(at.Time)
		if reason == "" && v == nil {
			// The in-place read vouches only for the claims it read.
			reason, why = d.inPlaceClaimsUnsure()
		}
		if reason == "" {
			return false
		}
		d.readAgain(reason, why)
	}
	d.verify(func() {})
	return true
}
