package statemachine

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
)

// pending: the finalizer is set and the status initialised.
func (d *decider) pending() {
	if d.st.StartTime == nil {
		now := d.now
		d.st.StartTime = &now
	}
	if !hasFinalizer(d.m) {
		d.act(ActionAddFinalizer, v1alpha1.FinalizerName, 0)
		d.working("adding the cleanup finalizer", 0)
		return
	}
	d.advance(v1alpha1.PhaseValidating, "finalizer set and status initialised")
}

// validating: the source VM is found and inventoried and the preflight
// rules pass.
func (d *decider) validating() {
	src := d.obs.Source
	if src.Error != nil {
		d.observedError(src.Error)
		return
	}
	if src.Inventory == nil {
		d.working("reading the source VM's inventory", d.cfg.PollInterval)
		return
	}
	inv := src.Inventory.DeepCopy()
	inv.Bound() // as status keeps it: the target's name derives from it
	d.st.Source = inv
	d.st.Preflight = slices.Clone(d.obs.Preflight)
	target := TargetName(d.spec, inv)
	d.st.Target = &v1alpha1.TargetStatus{Name: target}
	if d.claimed(inv, target) || d.alreadyMigrated(target) {
		return
	}
	d.recordClusterChecks()
	if d.replaceStaleProofs() {
		return
	}
	warnings, blocked := d.blockedByPreflight()
	if blocked || d.awaitClusterChecks() {
		return
	}
	for _, w := range warnings {
		d.out.Events = append(d.out.Events, Event{Warning: true, Reason: "PreflightWarning", Message: w})
	}
	next := v1alpha1.PhaseQueued
	switch {
	case d.spec.PlanOnly:
		next = v1alpha1.PhasePlanned
		d.st.Plan = &v1alpha1.PlanStatus{ConfigMapName: naming.PlanConfigMap(d.m.Name)}
	case d.spec.Policy.NeedsApproval():
		next = v1alpha1.PhaseAwaitingApproval
	case d.spec.Policy.RequireApproval:
		// Approving is a spec change: it sends a waiting migration back
		// here, never on from AwaitingApproval, so the approval's
		// evidence is recorded here.
		d.recordEvidence(v1alpha1.PhaseAwaitingApproval, "cutover approved (spec.policy.approved)")
	}
	d.advance(next, fmt.Sprintf("found %s (%s): %d vCPU, %d MiB, %s, %d disks, %d NICs, %s; %d preflight warnings%s",
		inv.Name, inv.MoRef, inv.CPU.Sockets*inv.CPU.CoresPerSocket, inv.MemoryMiB, inv.Firmware,
		len(inv.Disks), len(inv.NICs), inv.PowerState, len(warnings), d.clusterEvidence()))
}

// claimed fails the migration when another migration in flight already
// migrates its source VM or creates its target VM: one migration per
// source VM (cluster-wide) and per target name (per namespace).
func (d *decider) claimed(inv *v1alpha1.SourceInventory, target string) bool {
	c := d.obs.Claims
	switch {
	case c.SourceHeldBy != "":
		d.fail(ReasonSourceVMClaimed, fmt.Sprintf("migration %s already migrates the source VM %s (instance UUID %s): one migration per source VM at a time; delete this migration, or wait for that one to end and create it again",
			c.SourceHeldBy, inv.Name, inv.InstanceUUID))
	case c.TargetHeldBy != "":
		d.fail(ReasonTargetNameClaimed, fmt.Sprintf("migration %s already creates a VirtualMachine named %s in this namespace: set spec.target.name to another name: this migration then validates again",
			c.TargetHeldBy, target))
	default:
		return false
	}
	return true
}

// specChangedBeforeCutover reports whether the user changed the spec since
// it was validated, while a change can still apply: it is then validated again.
func (d *decider) specChangedBeforeCutover() bool {
	return d.st.AppliedSpec == nil && d.st.ObservedGeneration != 0 && d.m.Generation != d.st.ObservedGeneration
}

// awaitingApproval: a person approved the cutover.
func (d *decider) awaitingApproval() {
	if d.specChangedBeforeCutover() {
		d.setPhase(v1alpha1.PhaseValidating, "the spec changed before the cutover: validating again")
		return
	}
	if d.spec.Policy.NeedsApproval() {
		d.wait(ReasonAwaitingApproval, approvalMessage(d.m), 0)
		return
	}
	d.advance(v1alpha1.PhaseQueued, "cutover approved (spec.policy.approved)")
}

// approvalMessage tells a person how to approve.
func approvalMessage(m *v1alpha1.VirtualMachineMigration) string {
	return fmt.Sprintf("stopping the source VM waits for approval: kubectl patch vmm %s -n %s --type merge -p '{\"spec\":{\"policy\":{\"approved\":true}}}'",
		m.Name, m.Namespace)
}

// queued: a transfer slot is free; the cutover is committed.
func (d *decider) queued() {
	if d.specChangedBeforeCutover() {
		d.setPhase(v1alpha1.PhaseValidating, "the spec changed before the cutover: validating again")
		return
	}
	if d.spec.Policy.NeedsApproval() {
		d.setPhase(v1alpha1.PhaseAwaitingApproval, "approval is required again")
		return
	}
	if !d.obs.TransferSlot.Available {
		d.wait(ReasonWaitingForTransferSlot, d.obs.TransferSlot.Message, d.cfg.WaitInterval)
		return
	}
	conv := d.obs.ConversionCapacity
	if conv.Full && NeedsConversionSlot(&d.m.Spec) {
		d.wait(ReasonWaitingForConversionCapacity, conv.Message, d.cfg.WaitInterval)
		return
	}
	src, ok := d.sourceState()
	if !ok || d.refusedBeforeStop() {
		return
	}
	// Commit to the cutover: from here on the spec in force is this one.
	d.st.AppliedSpec = d.m.Spec.DeepCopy()
	d.st.SourceControl = &v1alpha1.SourceControlStatus{OriginalPowerState: src.PowerState}
	slots := "transfer slot available"
	if conv.Message != "" {
		slots += "; conversion slot available (" + conv.Message + ")"
	}
	d.advance(v1alpha1.PhaseStoppingSource, fmt.Sprintf("%s; source %s", slots, src.PowerState))
}

// sourceState returns the observed state of the source, or handles its
// absence (an error, or not read this time) and returns false.
func (d *decider) sourceState() (SourceObservation, bool) {
	src := d.obs.Source
	switch {
	case src.Error != nil:
		d.observedError(src.Error)
		return src, false
	case !src.Observed:
		d.working("reading the source VM's power state", d.cfg.PollInterval)
		return src, false
	}
	return src, true
}

// stoppingSource: the source VM is powered off. The intent is written into
// status in the same decision that asks for the call.
func (d *decider) stoppingSource() {
	src, ok := d.sourceState()
	if !ok {
		return
	}
	sc := d.sourceControl()
	if src.PowerState == PowerStateSuspended {
		// Checked again right before the stop: powering off a suspended VM
		// discards its memory state, which cannot be restored.
		d.fail(ReasonSourceSuspended, "the source VM is suspended: powering it off would discard its suspended state, which cannot be restored; resume it or shut it down yourself, then create the migration again")
		return
	}
	if src.PowerState == PowerStateOff {
		now := d.now
		sc.PoweredOffAt = &now
		how := "was already powered off"
		switch {
		case sc.PowerOffRequestedAt != nil:
			how = "powered off"
		case sc.ShutdownRequestedAt != nil:
			how = "shut down by the guest"
		}
		d.advance(v1alpha1.PhaseTransferringDisks, "source "+how)
		return
	}
	mode := d.spec.Policy.ShutdownMode()
	guest := mode == v1alpha1.ShutdownModeGuestThenPowerOff && src.PowerState == PowerStateOn && src.ToolsRunning
	if guest && sc.ShutdownRequestedAt == nil && sc.PowerOffRequestedAt == nil {
		now := d.now
		sc.ShutdownRequestedAt = &now
		d.act(ActionShutdownGuest, "", 0)
		d.working("asking the guest to shut down", d.cfg.PollInterval)
		return
	}
	if sc.ShutdownRequestedAt != nil && sc.PowerOffRequestedAt == nil {
		deadline := sc.ShutdownRequestedAt.Add(d.spec.Policy.ShutdownTimeout())
		if d.now.Time.Before(deadline) {
			d.working(fmt.Sprintf("waiting for the guest to shut down; powering off at %s", deadline.UTC().Format(time.RFC3339)),
				min(d.cfg.PollInterval, deadline.Sub(d.now.Time)))
			return
		}
	}
	if d.awaitPowerOffTask() {
		return
	}
	if sc.PowerOffRequestedAt != nil && d.now.Sub(sc.PowerOffRequestedAt.Time) < d.cfg.PollInterval {
		d.working("waiting for the power-off to take effect", d.cfg.PollInterval-d.now.Sub(sc.PowerOffRequestedAt.Time))
		return
	}
	now := d.now
	sc.PowerOffRequestedAt, sc.PowerOffTask = &now, ""
	d.act(ActionPowerOffSource, "", 0)
	d.working("powering the source VM off", d.cfg.PollInterval)
}

func (d *decider) sourceControl() *v1alpha1.SourceControlStatus {
	if d.st.SourceControl == nil {
		d.st.SourceControl = &v1alpha1.SourceControlStatus{}
	}
	return d.st.SourceControl
}

// transferringDisks: every disk's bytes are in its staging volume, with
// size and checksum recorded.
func (d *decider) transferringDisks() {
	d.initDisks()
	if missing := d.missingStagingClaims(); len(missing) > 0 {
		d.act(ActionCreateStagingClaims, "", 0)
		d.working(fmt.Sprintf("creating %d staging volumes", len(missing)), d.cfg.PollInterval)
		return
	}
	if d.st.Transfer == nil {
		d.st.Transfer = transferAttempt(d.m.Name, 1)
	}
	t := d.st.Transfer
	job := d.obs.TransferJob
	noteJobCreated(t, job)
	switch {
	case job == nil:
		if d.earlierAttemptRuns(t.JobName) {
			return
		}
		d.act(ActionCreateTransferJob, t.JobName, t.Attempt)
		d.working("starting transfer job "+t.JobName, d.cfg.PollInterval)
	case job.Failed:
		if d.retry(ReasonTransferFailed, fmt.Sprintf("transfer job %s failed: %s", job.Name, job.Message)) {
			d.nextTransferAttempt()
		}
	case job.awaitsResult(d.now.Time):
		d.working(fmt.Sprintf("transfer job %s completed; waiting for its result", job.Name), JobResultPoll)
	case job.Succeeded:
		if problem := d.checkTransferResults(job.Results); problem != "" {
			if d.retry(ReasonTransferResultMismatch, fmt.Sprintf("transfer job %s: %s", job.Name, problem)) {
				d.nextTransferAttempt()
			}
			return
		}
		d.recordTransferResults(job.Results)
		d.recordTargetClaims()
		now := d.now
		t.CompletedAt = &now
		var total int64
		for _, disk := range d.st.Disks {
			total += disk.BytesTransferred
		}
		d.advance(v1alpha1.PhaseConverting, fmt.Sprintf("job %s transferred %d disks, %d bytes, each verified by size and sha256%s",
			job.Name, len(d.st.Disks), total, copiedEvidence(d.st.Disks)))
	default:
		// A pod that never ran wrote nothing: the next attempt starts as
		// the first did, once this Job is gone.
		if d.neverStarted(job, d.nextTransferAttempt) {
			return
		}
		d.recordTransferProgress(job.Progress)
		if d.stuckPastDeadline() {
			d.fail(ReasonTransferTimedOut, fmt.Sprintf("transfer job %s shows no progress since %s and the retry deadline of %s passed",
				job.Name, d.st.LastProgressTime.UTC().Format(time.RFC3339), d.spec.Policy.RetryDeadline()))
			return
		}
		d.requeue(d.stuckAt().Sub(d.now.Time))
		d.working(fmt.Sprintf("transferring disks (job %s, attempt %d)%s", t.JobName, t.Attempt, d.startWait(job)), d.cfg.PollInterval)
	}
}

// initDisks fills status.disks from the inventory, once (the overall
// progress, status.progress, starts from them at 0%: recordProgress).
// Each disk is written in place: the transfer writes into the claim that
// becomes the VM's disk, named as its DataVolume, which adopts it.
func (d *decider) initDisks() {
	if len(d.st.Disks) > 0 || d.st.Source == nil {
		return
	}
	target := d.targetName()
	for i, disk := range d.st.Source.Disks {
		dv := naming.DataVolume(target, i)
		d.st.Disks = append(d.st.Disks, v1alpha1.DiskStatus{
			Key:           disk.Key,
			Name:          naming.DiskName(i),
			StagingClaim:  dv,
			DataVolume:    dv,
			CapacityBytes: disk.CapacityBytes,
		})
	}
}

// missingStagingClaims names the claims the transfer writes into that do
// not exist: the target claims of disks written in place, the staging
// claims of the others.
func (d *decider) missingStagingClaims() []string {
	var missing []string
	for _, disk := range d.st.Disks {
		if !d.claimSeen(&disk) {
			missing = append(missing, disk.StagingClaim)
		}
	}
	return missing
}

// claimSeen reports whether the claim a disk's transfer writes into exists.
func (d *decider) claimSeen(disk *v1alpha1.DiskStatus) bool {
	claims := d.obs.Children.StagingClaims
	if disk.WrittenInPlace() {
		claims = d.obs.Children.TargetClaims
	}
	return slices.Contains(Names(claims), disk.StagingClaim)
}

// nextTransferAttempt starts a fresh transfer under a new Job name, and
// forgets the disks' transfer evidence (the overall progress holds:
// recordProgress).
func (d *decider) nextTransferAttempt() {
	t := d.st.Transfer
	t.Attempt++
	t.JobName = naming.TransferJob(d.m.Name, t.Attempt)
	t.CompletedAt, t.CreatedAt = nil, nil
	for i := range d.st.Disks {
		disk := &d.st.Disks[i]
		disk.BytesTransferred, disk.RateBytesPerSecond, disk.ETASeconds = 0, 0, nil
		disk.SHA256, disk.TransferredAt, disk.ChecksumScheme = "", nil, ""
		disk.AllocatedOnly, disk.AllocatedBytes, disk.BytesRead, disk.FullCopyReason = false, nil, 0, ""
		disk.TargetClaimUID = ""
	}
}

// noteJobCreated records, once, when the Job of attempt j was created, as
// the observation of that Job says.
func noteJobCreated(j *v1alpha1.JobStatus, job *JobObservation) {
	if job == nil || job.Name != j.JobName || j.CreatedAt != nil || job.CreatedAt.IsZero() {
		return
	}
	created := metav1.NewTime(job.CreatedAt).Rfc3339Copy()
	j.CreatedAt = &created
}

// recordTargetClaims records, for each disk written in place, the UID of
// the claim the transfer wrote it into: the chain holds for that claim.
func (d *decider) recordTargetClaims() {
	for i := range d.st.Disks {
		disk := &d.st.Disks[i]
		if !disk.WrittenInPlace() {
			continue
		}
		for _, c := range d.obs.Children.TargetClaims {
			if c.Name == disk.StagingClaim {
				disk.TargetClaimUID = c.UID
			}
		}
	}
}

// maxEvidenceReason bounds a disk's full-copy reason in the evidence
// (status.disks holds it whole).
const maxEvidenceReason = 96

// shortReason cuts a reason to maxEvidenceReason bytes, on a rune boundary.
func shortReason(s string) string {
	if len(s) <= maxEvidenceReason {
		return s
	}
	cut := maxEvidenceReason - 3
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// copiedEvidence says how the disks were read from the source, for the
// checkpoint's evidence: "; read N bytes from the source: disk K
// allocated areas only (A bytes in use), disk L whole (why)".
func copiedEvidence(disks []v1alpha1.DiskStatus) string {
	var read int64
	parts := make([]string, 0, len(disks))
	for _, disk := range disks {
		read += disk.BytesRead
		switch {
		case disk.AllocatedOnly && disk.AllocatedBytes != nil:
			parts = append(parts, fmt.Sprintf("disk %d allocated areas only (%d bytes in use)", disk.Key, *disk.AllocatedBytes))
		case disk.FullCopyReason != "":
			parts = append(parts, fmt.Sprintf("disk %d whole (%s)", disk.Key, shortReason(disk.FullCopyReason)))
		default:
			parts = append(parts, fmt.Sprintf("disk %d whole", disk.Key))
		}
	}
	return fmt.Sprintf("; read %d bytes from the source: %s", read, strings.Join(parts, ", "))
}

// checkTransferResults verifies a finished transfer's results against the
// inventory: every disk present, its full capacity written, a checksum.
func (d *decider) checkTransferResults(results []DiskResult) string {
	for _, disk := range d.st.Disks {
		i := slices.IndexFunc(results, func(r DiskResult) bool { return r.Key == disk.Key })
		switch {
		case i < 0:
			return fmt.Sprintf("no result for disk %d", disk.Key)
		case results[i].Bytes != disk.CapacityBytes:
			return fmt.Sprintf("disk %d: %d bytes written, capacity is %d", disk.Key, results[i].Bytes, disk.CapacityBytes)
		case results[i].SHA256 == "":
			return fmt.Sprintf("disk %d: no checksum reported", disk.Key)
		}
	}
	return ""
}

func (d *decider) recordTransferResults(results []DiskResult) {
	for i := range d.st.Disks {
		disk := &d.st.Disks[i]
		for _, r := range results {
			if r.Key == disk.Key {
				now := d.now
				disk.BytesTransferred, disk.SHA256, disk.TransferredAt = r.Bytes, r.SHA256, &now
				disk.RateBytesPerSecond, disk.ETASeconds = 0, nil
				disk.AllocatedOnly, disk.AllocatedBytes, disk.BytesRead, disk.FullCopyReason = r.AllocatedOnly, r.AllocatedBytes, r.BytesRead, r.FullCopyReason
				disk.ChecksumScheme = r.Scheme
			}
		}
	}
}

// converting: the guest is converted for KubeVirt.
func (d *decider) converting() {
	if d.spec.Conversion.Skip {
		d.st.Conversion = &v1alpha1.ConversionStatus{Skipped: true}
		d.convertedUnchanged()
		d.advance(v1alpha1.PhaseImporting, "conversion skipped (spec.conversion.skip)")
		return
	}
	if d.st.Conversion == nil || d.st.Conversion.Skipped {
		d.st.Conversion = conversionAttempt(d.m.Name, 1)
	}
	if RetransferPending(d.st) {
		d.retransfer()
		return
	}
	c := d.st.Conversion
	job := d.obs.ConversionJob
	noteJobCreated(&c.JobStatus, job)
	switch {
	case job == nil && c.CreatedAt != nil:
		// The Job of this attempt was seen and is gone without a result
		// (deleted by a person, or with its namespace's objects): it may
		// have converted part of the disks.
		d.convertAfreshAfter(fmt.Sprintf("conversion job %s is gone without a result: the disks it converted may be half converted", c.JobName))
	case job == nil:
		if d.earlierAttemptRuns(c.JobName) {
			return
		}
		d.act(ActionCreateConversionJob, c.JobName, c.Attempt)
		d.working("starting conversion job "+c.JobName, d.cfg.PollInterval)
	case job.Failed:
		msg := fmt.Sprintf("conversion job %s failed: %s", job.Name, job.Message)
		if job.Reason == ConversionInspectionFailed || job.Reason == ConversionUnsupportedGuest {
			d.fail(ReasonConversionFailed, fmt.Sprintf("%s (%s: converting again cannot help)", msg, job.Reason))
			return
		}
		d.convertAfreshAfter(msg)
	case job.awaitsResult(d.now.Time):
		d.working(fmt.Sprintf("conversion job %s completed; waiting for its result", job.Name), JobResultPoll)
	case job.Succeeded:
		now := d.now
		c.CompletedAt = &now
		c.OperatingSystem = job.OperatingSystem
		d.recordConverted(job)
		warned := d.recordConversionWarnings(job)
		d.advance(v1alpha1.PhaseImporting, fmt.Sprintf("job %s converted the guest (%s)%s", job.Name, job.OperatingSystem, warned))
	default:
		// A pod that never ran left the staged disks as transferred:
		// only the conversion is tried again.
		if d.neverStarted(job, func() { *c = *conversionAttempt(d.m.Name, c.Attempt+1) }) {
			return
		}
		d.working(fmt.Sprintf("converting the guest (job %s, attempt %d)%s", c.JobName, c.Attempt, d.startWait(job)), d.cfg.PollInterval)
	}
}

// convertAfreshAfter spends a retry on a conversion that failed (msg says
// how) and, within the budget, records the next attempt after a fresh
// transfer: a conversion that did not finish leaves the staged disks in
// an unknown state, never imported or converted again as they are.
func (d *decider) convertAfreshAfter(msg string) {
	if d.retry(ReasonConversionFailed, msg) {
		c := d.st.Conversion
		*c = *conversionAttempt(d.m.Name, c.Attempt+1)
		d.nextTransferAttempt()
		d.retransfer()
	}
}

// RetransferPending reports whether a migration in Converting must
// transfer its disks again before it converts: a failed conversion left
// the staged disks in an unknown state, the retry recorded a fresh
// transfer attempt (not completed), and the migration waits for a
// transfer slot to run it. The controller gives it the next free slot of
// its host and datastores before any migration waiting in Queued: its
// source is off.
func RetransferPending(st *v1alpha1.VirtualMachineMigrationStatus) bool {
	return st.Phase == v1alpha1.PhaseConverting && st.Transfer != nil && st.Transfer.CompletedAt == nil
}

// retransfer goes back to TransferringDisks once a transfer slot is free;
// until then it waits, with a condition, until the retry deadline.
func (d *decider) retransfer() {
	slot := d.obs.TransferSlot
	switch {
	case slot.Available:
		d.setPhase(v1alpha1.PhaseTransferringDisks, "the staged disks are in an unknown state after a failed conversion: transferring again")
	case d.pastDeadline():
		d.fail(ReasonRetryBudgetSpent, fmt.Sprintf("no transfer slot for the transfer again after a failed conversion (%s) before the retry deadline of %s passed",
			slot.Message, d.spec.Policy.RetryDeadline()))
	default:
		d.wait(ReasonWaitingForTransferSlot, fmt.Sprintf("the disks are transferred again after a failed conversion, with the source VM off: "+
			"this migration takes the next free transfer slot, before any migration waiting in Queued (%s)", slot.Message), d.cfg.WaitInterval)
		d.requeueAtDeadline()
	}
}

func transferAttempt(migration string, attempt int32) *v1alpha1.JobStatus {
	return &v1alpha1.JobStatus{JobName: naming.TransferJob(migration, attempt), Attempt: attempt}
}

func conversionAttempt(migration string, attempt int32) *v1alpha1.ConversionStatus {
	return &v1alpha1.ConversionStatus{
		JobStatus:     v1alpha1.JobStatus{JobName: naming.ConversionJob(migration, attempt), Attempt: attempt},
		ConfigMapName: naming.ConversionConfigMap(migration, attempt),
	}
}

// importing: every target DataVolume is populated, and holds the
// converted bytes (verifyTargets).
func (d *decider) importing() {
	d.nameDataVolumes()
	var missing, done int
	for i := range d.st.Disks {
		disk := &d.st.Disks[i]
		if _, ok := d.obs.DataVolumes[disk.DataVolume]; !ok {
			missing++
			// Forget a deleted DataVolume's phase, so that a failure of
			// the one created again is counted again.
			disk.ImportPhase, disk.ImportProgress = "", ""
		}
	}
	if missing > 0 {
		if d.targetClaimLost() {
			return
		}
		d.act(ActionCreateDataVolumes, "", 0)
		d.working(fmt.Sprintf("creating %d DataVolumes", missing), d.cfg.PollInterval)
		return
	}
	for i := range d.st.Disks {
		disk := &d.st.Disks[i]
		dv := d.obs.DataVolumes[disk.DataVolume]
		switch dv.Phase {
		case DataVolumeSucceeded:
			done++
		case DataVolumeFailed:
			// A failed import is counted once (the recorded phase says it
			// was); later reconciles only repeat the deletion until the
			// DataVolume is gone and can be created again.
			if disk.ImportPhase != DataVolumeFailed {
				if !d.retry(ReasonImportFailed, fmt.Sprintf("DataVolume %s failed", disk.DataVolume)) {
					return
				}
				disk.ImportPhase = DataVolumeFailed
			}
			d.remove(ActionDeleteDataVolume, disk.DataVolume, dv.Ref)
			d.working("deleting failed DataVolume "+disk.DataVolume+" to import it again", d.cfg.PollInterval)
			return
		}
	}
	d.recordImportProgress()
	if done == len(d.st.Disks) {
		d.verifyTargets()
		return
	}
	d.awaitImport(done)
}

// targetClaimLost fails the migration when a disk written in place has
// neither its DataVolume nor its claim: the transferred and converted
// bytes are gone, and a DataVolume created now would make an empty disk.
func (d *decider) targetClaimLost() bool {
	var lost []string
	for i := range d.st.Disks {
		disk := &d.st.Disks[i]
		if _, ok := d.obs.DataVolumes[disk.DataVolume]; ok || !disk.WrittenInPlace() || d.claimSeen(disk) {
			continue
		}
		lost = append(lost, fmt.Sprintf("%s (claim %s)", disk.Name, disk.StagingClaim))
	}
	if len(lost) == 0 {
		return false
	}
	d.fail(ReasonTargetClaimLost, fmt.Sprintf("the claims the disks were transferred and converted in are gone before their DataVolumes adopted them: %s; "+
		"the VM was not created: create the migration again to transfer the disks again", strings.Join(lost, ", ")))
	return true
}

// DataVolumePendingGrace is how long DataVolumes may wait (CDI's Pending,
// *Scheduled...) with no import progress, as they do for a moment in every
// import, before the migration says it waits for them.
const DataVolumePendingGrace = time.Minute

// awaitImport waits for the DataVolumes to be populated. The source is
// off meanwhile: DataVolumes that wait (a claim that stays Pending, a
// quota) past DataVolumePendingGrace make the migration wait with a
// condition naming them and what CDI says of them, and once the retry
// deadline passed with no import progress for the stall timeout, the
// migration fails to rollback.
func (d *decider) awaitImport(done int) {
	state := d.importState(dataVolumeWaits)
	if d.stuckPastDeadline() {
		d.fail(ReasonImportTimedOut, fmt.Sprintf("%d of %d DataVolumes populated, no import progress since %s and the retry deadline of %s passed: %s",
			done, len(d.st.Disks), d.st.LastProgressTime.UTC().Format(time.RFC3339), d.spec.Policy.RetryDeadline(), d.importState(nil)))
		return
	}
	d.requeue(d.stuckAt().Sub(d.now.Time))
	if state != "" && d.now.Sub(d.st.LastProgressTime.Time) >= DataVolumePendingGrace {
		d.wait(ReasonDataVolumesPending, fmt.Sprintf("waiting for DataVolumes %s; the source VM stays off: the migration fails if no import progress is seen by %s",
			state, d.stuckAt().UTC().Format(time.RFC3339)), d.cfg.PollInterval)
		return
	}
	d.working(fmt.Sprintf("importing disks: %d of %d DataVolumes populated", done, len(d.st.Disks)), d.cfg.PollInterval)
}

// importState describes the DataVolumes not populated yet whose phase
// matches (all of them when match is nil): name, phase and CDI's message.
func (d *decider) importState(match func(string) bool) string {
	var parts []string
	for _, disk := range d.st.Disks {
		dv := d.obs.DataVolumes[disk.DataVolume]
		if dv.Phase == DataVolumeSucceeded || (match != nil && !match(dv.Phase)) {
			continue
		}
		phase := dv.Phase
		if phase == "" {
			phase = "no phase yet"
		}
		part := fmt.Sprintf("%s (%s)", disk.DataVolume, phase)
		if dv.Message != "" {
			part += ": " + dv.Message
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}

// stuckAt is when a phase that copies data (the transfer, the import)
// counts as stuck: the retry deadline, or the stall timeout after the last
// progress seen, whichever comes later.
func (d *decider) stuckAt() time.Time {
	if d.st.LastProgressTime == nil {
		now := d.now
		d.st.LastProgressTime = &now
	}
	stalled := d.st.LastProgressTime.Add(d.spec.Policy.StallAfter())
	if d.st.StartTime == nil {
		return stalled
	}
	return maxTime(stalled, d.st.StartTime.Add(d.spec.Policy.RetryDeadline()))
}

// stuckPastDeadline reports whether the retry deadline passed and no
// progress was seen for the stall timeout: the source has been off long
// enough for nothing; the migration fails and its rollback restores it.
func (d *decider) stuckPastDeadline() bool {
	return d.st.StartTime != nil && !d.now.Time.Before(d.stuckAt())
}

// nameDataVolumes records each disk's target DataVolume name, once.
func (d *decider) nameDataVolumes() {
	target := d.targetName()
	for i := range d.st.Disks {
		if d.st.Disks[i].DataVolume == "" {
			d.st.Disks[i].DataVolume = naming.DataVolume(target, i)
		}
	}
}

func (d *decider) targetName() string {
	if d.st.Target == nil || d.st.Target.Name == "" {
		d.st.Target = &v1alpha1.TargetStatus{Name: TargetName(d.spec, d.st.Source)}
	}
	return d.st.Target.Name
}

// TargetName is the name of the target VirtualMachine of a migration with
// this spec and source: spec.target.name, else one derived from the source
// VM's name (package naming). The controller checks the same name for
// collisions before the decision records it in status.
func TargetName(spec *v1alpha1.VirtualMachineMigrationSpec, inv *v1alpha1.SourceInventory) string {
	if spec.Target.Name != "" || inv == nil {
		return spec.Target.Name
	}
	return naming.TargetName(inv.Name)
}

// creatingVM: the VirtualMachine exists and owns its DataVolumes.
func (d *decider) creatingVM() {
	name := d.targetName()
	vm := d.obs.VM
	switch {
	case vm == nil:
		d.act(ActionCreateVM, name, 0)
		d.working("creating VirtualMachine "+name, d.cfg.PollInterval)
		return
	case !vm.Ours:
		d.fail(ReasonTargetVMNotOurs, fmt.Sprintf("a VirtualMachine named %s exists and was not created by this migration; set spec.target.name to a free name in a new migration", name))
		return
	}
	d.st.Target.UID = types.UID(vm.UID)
	for _, disk := range d.st.Disks {
		if !d.obs.DataVolumes[disk.DataVolume].OwnedByVM {
			d.act(ActionAdoptDataVolumes, name, 0)
			d.working("handing the DataVolumes over to VirtualMachine "+name, d.cfg.PollInterval)
			return
		}
	}
	d.advance(v1alpha1.PhaseStarting, fmt.Sprintf("VirtualMachine %s (uid %s) created halted, owning its %d DataVolumes", name, vm.UID, len(d.st.Disks)))
}

// starting: the VM runs (and its guest agent connected, when asked).
func (d *decider) starting() {
	name := d.targetName()
	if !d.spec.Target.StartEnabled() {
		d.advance(v1alpha1.PhaseCleaningUp, "VirtualMachine "+name+" left halted: spec.target.start is false")
		return
	}
	vm := d.obs.VM
	if vm == nil || !vm.Ours {
		d.fail(ReasonTargetVMFailed, "VirtualMachine "+name+" is gone")
		return
	}
	if vm.RunStrategy != RunStrategyAlways {
		d.startTarget(name)
		return
	}
	phase, agent := "", false
	if vmi := d.obs.VMI; vmi != nil {
		phase, agent = vmi.Phase, vmi.AgentConnected
	}
	d.st.Target.VMIPhase, d.st.Target.AgentConnected = phase, agent
	wantAgent := d.spec.Target.WaitForGuestAgent
	if phase == VMIRunning && (agent || !wantAgent) {
		if d.awaitNetworkIdentity() {
			return
		}
		what := "running"
		if wantAgent {
			what = "running with its guest agent connected"
		}
		d.advance(v1alpha1.PhaseCleaningUp, fmt.Sprintf("VirtualMachineInstance %s %s%s", name, what, d.networkEvidence()))
		return
	}
	deadline := d.startRequestedAt().Add(d.spec.Policy.StartDeadline())
	if !d.now.Time.Before(deadline) {
		what := "did not reach Running"
		if phase == VMIRunning {
			what = "runs but its guest agent did not connect"
		}
		d.fail(ReasonStartTimeout, fmt.Sprintf("VirtualMachine %s %s within %s (VMI phase %q)", name, what, d.spec.Policy.StartDeadline(), phase))
		return
	}
	d.working(fmt.Sprintf("waiting for VirtualMachine %s to run (VMI phase %q)", name, phase), min(d.cfg.PollInterval, deadline.Sub(d.now.Time)))
}

// startRequestedAt is when the target was asked to run: the start timeout
// counts from then, not from entering Starting (a pre-start check that
// waited on vSphere, or a pause, must not count against the VM's start).
// A status without it (written by hand or by an older version) counts
// from entering Starting, else from now.
func (d *decider) startRequestedAt() time.Time {
	if t := d.st.Target; t.StartRequestedAt != nil {
		return t.StartRequestedAt.Time
	}
	if d.st.PhaseStartTime == nil {
		now := d.now
		d.st.PhaseStartTime = &now
	}
	return d.st.PhaseStartTime.Time
}

// startTarget starts the target VM once the source is seen off (or gone):
// never two copies running with the same MAC addresses. The intent is
// recorded first: from then on the target holds migrated data.
func (d *decider) startTarget(name string) {
	if d.st.Target.StartRequestedAt == nil {
		if d.reverifyBeforeStart() || !d.sourceStaysOff(name) {
			return
		}
		now := d.now
		d.st.Target.StartRequestedAt = &now
	}
	d.act(ActionStartVM, name, 0)
	d.working("starting VirtualMachine "+name, d.cfg.PollInterval)
}

// sourceStaysOff reports whether the source is seen off (or is gone), and
// fails the migration when it runs again.
func (d *decider) sourceStaysOff(name string) bool {
	if e := d.obs.Source.Error; e != nil && e.Class == ErrorGone {
		return true
	}
	src, ok := d.sourceState()
	if !ok {
		return false
	}
	if src.PowerState != PowerStateOff {
		d.fail(ReasonSourceRunning, fmt.Sprintf("the source VM is %s again: starting VirtualMachine %s beside it would run two copies with the same MAC addresses; power the source off and create a new migration, or start the target yourself", src.PowerState, name))
		return false
	}
	return true
}

// cleaningUp: staging objects are gone (per the cleanup policy).
func (d *decider) cleaningUp() {
	staging := d.obs.Children.Staging()
	if d.spec.Policy.CleanupPolicy() == v1alpha1.CleanupPolicyDelete && len(staging) > 0 {
		d.remove(ActionDeleteStaging, "", staging...)
		d.working(fmt.Sprintf("deleting %d staging objects", len(staging)), d.cfg.PollInterval)
		return
	}
	if d.removeSnapshots() {
		return
	}
	what := "staging objects deleted"
	if d.spec.Policy.CleanupPolicy() == v1alpha1.CleanupPolicyRetain {
		what = "staging objects retained (spec.policy.cleanup: Retain)"
	}
	d.advance(v1alpha1.PhaseSucceeded, what)
}
