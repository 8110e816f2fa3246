package controller

import (
	"context"
	"errors"
	"fmt"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
)

// A fleet migrates in waves over months, and the controller holds every
// migration that ended: thousands of them, each an audit record whose
// status (inventory, evidence, applied spec: about 5.5 KB of JSON, much
// more once decoded) nothing reads until it is deleted. The migration
// cache holds a finished migration (see finished: ended, not being
// deleted, its status up to date with its spec) as a summary instead:
// what the controller reads of it while it stays finished, and nothing
// else. The summary is marked (isSummary) and never written from:
// whatever must write to a finished migration reads it whole from the API
// server first (wholeMigration). A finished migration stops being one, and
// the cache holds it whole again, with the event that changes that: its
// deletion, or a change of its spec (a new generation).

// annotationCacheSummary marks a cached summary. It exists in the
// controller's memory only: no summary is ever written.
const annotationCacheSummary = "migration.platform.example/cache-summary"

// summaryAnnotations are the annotations of every summary: one map,
// shared and never changed, so that the mark costs a summary nothing.
var summaryAnnotations = map[string]string{annotationCacheSummary: "finished"}

// errSummaryWrite refuses a write built from a summary.
var errSummaryWrite = errors.New("refusing to write a migration from its cached summary: read it whole first")

// isSummary reports whether m is a cached summary, not the whole migration.
func isSummary(m *v1alpha1.VirtualMachineMigration) bool {
	return m.Annotations[annotationCacheSummary] != ""
}

// cacheMigration is the transform of the migration cache: every migration
// loses what stripManagedFields drops, and a finished one is held as its
// summary.
func cacheMigration(obj any) (any, error) {
	obj, err := stripManagedFields(obj)
	if m, ok := obj.(*v1alpha1.VirtualMachineMigration); ok && err == nil && finished(m) {
		return summarize(m), nil
	}
	return obj, err
}

// summarize is what the controller reads of a finished migration while it
// stays finished: its identity and generation, its finalizers, its TTL
// (ttl.go), and what its metrics are made of (migrationMetrics gives the
// same series for the summary as for the whole). Claims and transfer
// slots count no finished migration (holdsClaims, holdsSlotNow), its
// children are found by its UID, and nothing else is kept: the source
// inventory, the evidence, the applied spec, the messages.
func summarize(m *v1alpha1.VirtualMachineMigration) *v1alpha1.VirtualMachineMigration {
	st := &m.Status
	s := &v1alpha1.VirtualMachineMigration{
		TypeMeta: m.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
			Generation: m.Generation, CreationTimestamp: m.CreationTimestamp, Finalizers: m.Finalizers,
			Annotations: summaryAnnotations,
		},
	}
	s.Spec.TTLSecondsAfterFinished = m.Spec.TTLSecondsAfterFinished
	s.Status = v1alpha1.VirtualMachineMigrationStatus{
		ObservedGeneration: st.ObservedGeneration, Phase: st.Phase,
		StartTime: st.StartTime, CompletionTime: st.CompletionTime, PhaseStartTime: st.PhaseStartTime,
		Conditions: summaryConditions(st.Conditions), Disks: summaryDisks(st.Disks),
	}
	if statemachine.SourceLeftOff(st) {
		sc := st.SourceControl
		s.Status.SourceControl = &v1alpha1.SourceControlStatus{OriginalPowerState: sc.OriginalPowerState,
			ShutdownRequestedAt: sc.ShutdownRequestedAt, PowerOffRequestedAt: sc.PowerOffRequestedAt}
	}
	return s
}

// summaryConditions keeps each condition without its message, its type,
// status and reason interned (a few constants, shared by every summary).
func summaryConditions(conditions []metav1.Condition) []metav1.Condition {
	if len(conditions) == 0 {
		return nil
	}
	out := make([]metav1.Condition, len(conditions))
	for i, c := range conditions {
		out[i] = metav1.Condition{Type: unique.Make(c.Type).Value(), Status: metav1.ConditionStatus(unique.Make(string(c.Status)).Value()),
			Reason:             unique.Make(c.Reason).Value(),
			ObservedGeneration: c.ObservedGeneration, LastTransitionTime: c.LastTransitionTime}
	}
	return out
}

// summaryDisks keeps each disk's sizes, and its rate while its transfer
// had not completed.
func summaryDisks(disks []v1alpha1.DiskStatus) []v1alpha1.DiskStatus {
	if len(disks) == 0 {
		return nil
	}
	out := make([]v1alpha1.DiskStatus, len(disks))
	for i, d := range disks {
		out[i] = v1alpha1.DiskStatus{Key: d.Key, CapacityBytes: d.CapacityBytes, BytesTransferred: d.BytesTransferred,
			TransferredAt: d.TransferredAt}
		if d.TransferredAt == nil {
			out[i].RateBytesPerSecond = d.RateBytesPerSecond
		}
	}
	return out
}

// wholeMigration is a copy of the migration to work on: the cached one,
// or, for a summary, the migration read from the API server (an error
// for which apierrors.IsNotFound holds when it is gone).
func (c *Controller) wholeMigration(ctx context.Context, cached *v1alpha1.VirtualMachineMigration) (*v1alpha1.VirtualMachineMigration, error) {
	if !isSummary(cached) {
		return cached.DeepCopy(), nil
	}
	m, err := c.clients.Migration.MigrationV1alpha1().VirtualMachineMigrations(cached.Namespace).Get(ctx, cached.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading the finished migration whole from the API server: %w", err)
	}
	return m, nil
}
