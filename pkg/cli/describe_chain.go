package cli

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// convertedEvidence is a disk's converted image: its checksum and size,
// or why there is none yet.
func convertedEvidence(m *v1alpha1.VirtualMachineMigration, d v1alpha1.DiskStatus) string {
	c := m.Status.Conversion
	sums := d.Checksums
	switch {
	case sums != nil && sums.Compared == v1alpha1.ComparedReadOnce:
		return "not hashed by the conversion (a Block claim, or a disk past those its report has room for)"
	case sums != nil && sums.Converted != "" && c != nil && c.Skipped:
		return fmt.Sprintf("conversion skipped: the transferred image, sha256 %s", clean(sums.Converted))
	case sums != nil && sums.Converted != "":
		s := fmt.Sprintf("sha256 %s, %s (the staged image after virt-v2v)", clean(sums.Converted), humanBytesExact(sums.ConvertedBytes))
		if sums.Converted == d.SHA256 {
			s += ", unchanged by the conversion"
		}
		return s
	case c != nil && c.CompletedAt != nil:
		return "the conversion reported no checksum: the verification reads the staged image"
	}
	return "no checksum yet"
}

// targetEvidence is what the verification read back from the target claim.
func targetEvidence(d v1alpha1.DiskStatus) string {
	sums := d.Checksums
	if sums == nil || sums.Target == "" {
		return "not read back yet"
	}
	s := fmt.Sprintf("sha256 %s of its first %d bytes (image %s)", clean(sums.Target), d.CapacityBytes, humanBytesExact(sums.TargetBytes))
	switch {
	case sums.Compared == v1alpha1.ComparedReadOnce:
		s += ", read once after the conversion"
	case sums.Compared == v1alpha1.ComparedConvertedInPlace:
		s = fmt.Sprintf("sha256 %s: the claim the transfer wrote and the conversion hashed, not read again", clean(sums.Target))
	case sums.VerifiedAt != nil:
		s += ", read back"
	}
	if sums.VerifiedAt != nil {
		s += " (read began " + timestamp(sums.VerifiedAt) + ")"
	}
	return s
}

// chainVerdict says whether the disk's bytes are accounted for from the
// source to the target, and, verified, when the target was read back
// relative to the VM's start (a start later than the controller's bound
// reads it back again first).
func chainVerdict(m *v1alpha1.VirtualMachineMigration, d v1alpha1.DiskStatus) string {
	sums := d.Checksums
	switch {
	case sums != nil && sums.VerifiedAt != nil && sums.Compared == v1alpha1.ComparedConvertedInPlace:
		return "verified: the target is the claim the transfer wrote and the conversion hashed as it left it, bound under its DataVolume, " + readBackWhen(m, sums.VerifiedAt)
	case sums != nil && sums.VerifiedAt != nil:
		return "verified: the target holds the converted bytes, which came from the transferred ones, " + readBackWhen(m, sums.VerifiedAt)
	case sums != nil && sums.Compared == v1alpha1.ComparedReadOnce:
		return "read once, compared with nothing: the conversion hashed no image of this disk, so the chain vouches for the transferred bytes only; the target was read once after the conversion"
	case sums != nil && sums.Target != "" && sums.Target != sums.Converted:
		return "BROKEN: the target's bytes are not the converted ones (the VM was not started)"
	case d.SHA256 == "":
		return "incomplete: not transferred yet"
	case sums == nil || sums.Converted == "":
		return "incomplete: no checksum of the converted image yet"
	}
	return "incomplete: the target not read back yet"
}

// readBackWhen says when a target was read back relative to the VM's
// start (the time itself is on the "on the target" line), or that the VM
// was not started (yet).
func readBackWhen(m *v1alpha1.VirtualMachineMigration, at *metav1.Time) string {
	if t := m.Status.Target; t != nil && t.StartRequestedAt != nil {
		if before := t.StartRequestedAt.Sub(at.Time); before >= 0 {
			return fmt.Sprintf("read back %s before the VM was started", before.Round(time.Second))
		}
		return fmt.Sprintf("read back %s after the VM was started", at.Sub(t.StartRequestedAt.Time).Round(time.Second))
	}
	switch m.Status.Phase {
	case v1alpha1.PhaseImporting, v1alpha1.PhaseCreatingVM, v1alpha1.PhaseStarting:
		if m.DeletionTimestamp == nil {
			return "the VM not started yet (a start long after this reads the target back again)"
		}
	}
	return "the VM was not started by the migration"
}
