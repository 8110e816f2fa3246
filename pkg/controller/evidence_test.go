package controller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/test/builders"
)

func TestApprovedBy(t *testing.T) {
	at := builders.TP(-time.Minute)
	entry := func(manager, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Time: at, FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
	}
	cases := map[string]struct {
		entries []metav1.ManagedFieldsEntry
		want    string
	}{
		"the manager that set approved": {entries: []metav1.ManagedFieldsEntry{
			entry("kubectl-client-side-apply", `{"f:spec":{".":{},"f:source":{"f:url":{}},"f:policy":{"f:requireApproval":{}}}}`),
			entry("kubectl-patch", `{"f:spec":{"f:policy":{"f:approved":{}}}}`),
			entry("vm-migration-controller", `{"f:status":{"f:phase":{}}}`),
		}, want: "kubectl-patch"},
		"nobody":            {entries: []metav1.ManagedFieldsEntry{entry("kubectl-create", `{"f:spec":{"f:policy":{"f:paused":{}}}}`)}},
		"unreadable fields": {entries: []metav1.ManagedFieldsEntry{entry("odd", `{"f:spec":"not an object"}`), {Manager: "none"}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			manager, when, ok := approvedBy(tc.entries)
			assert.Equal(t, tc.want != "", ok)
			assert.Equal(t, tc.want, manager)
			if ok {
				assert.Equal(t, at, when)
			}
		})
	}
}

func TestEvidenceRecordOfAFailedMigration(t *testing.T) {
	m := builders.Migration(builders.Reached(v1alpha1.PhaseFailed))
	record := evidenceRecord(m)
	assert.Contains(t, record, "Failed in TransferringDisks: TransferFailed: transfer job failed")
	assert.Contains(t, record, "approval not required")
	assert.Contains(t, record, "sha256 -", "a disk never transferred has no checksum")
	assert.Contains(t, record, "completed "+stamp(m.Status.CompletionTime))
	assert.NotContains(t, evidenceRecord(&v1alpha1.VirtualMachineMigration{}), "source VM", "nothing recorded, nothing said")
}

func TestEvidenceRecordKeepsTheChecksumChain(t *testing.T) {
	m := builders.Migration(builders.Reached(v1alpha1.PhaseSucceeded))
	m.Status.Disks[0].Checksums = &v1alpha1.DiskChecksums{Converted: "c0ffee", Target: "c0ffee", VerifiedAt: builders.TP(-time.Minute), Compared: v1alpha1.ComparedConvertedAndTarget}
	record := evidenceRecord(m)
	assert.Contains(t, record, "sha256 "+m.Status.Disks[0].SHA256+", transferred "+stamp(m.Status.Disks[0].TransferredAt)+
		", converted sha256 c0ffee, target sha256 c0ffee, compared ConvertedAndTarget, verified "+stamp(builders.TP(-time.Minute)))
	assert.Contains(t, record, "converted sha256 -, target sha256 -, compared none, verified -", "a disk not verified says so")
	m.Status.Disks[1].Checksums = &v1alpha1.DiskChecksums{Converted: "beef", Target: "beef", Compared: v1alpha1.ComparedReadOnce}
	assert.Contains(t, evidenceRecord(m), "converted sha256 beef, target sha256 beef, compared ReadOnce, verified -", "one read: compared with nothing, verified never")
}

func TestEvidenceRecordSaysTheDowntime(t *testing.T) {
	m := builders.Migration(builders.Reached(v1alpha1.PhaseSucceeded))
	m.Status.Downtime = &v1alpha1.DowntimeStatus{
		SourceStoppedAt: builders.At(-10 * time.Minute), TargetRunningAt: builders.TP(-9 * time.Minute), Seconds: ptr.To[int64](60),
		Phases: []v1alpha1.PhaseDowntime{{Phase: v1alpha1.PhaseTransferringDisks, Seconds: 20}, {Phase: v1alpha1.PhaseConverting, Seconds: 40}},
	}
	assert.Contains(t, evidenceRecord(m), "downtime 60s (source stopped "+stamp(builders.TP(-10*time.Minute))+", target running "+
		stamp(builders.TP(-9*time.Minute))+"; by phase: TransferringDisks 20s, Converting 40s)")
	m.Status.Downtime = &v1alpha1.DowntimeStatus{SourceStoppedAt: builders.At(-10 * time.Minute)}
	assert.Contains(t, evidenceRecord(m), "downtime not ended (source stopped "+stamp(builders.TP(-10*time.Minute))+"; by phase: -)")
}
