package statemachine

import (
	"time"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// TTLExpiry says when a finished migration is to be deleted because its
// time to live ended: its completion time (the start of its terminal
// phase for a status without one) plus spec.ttlSecondsAfterFinished, or
// plus defaultTTL when the spec sets none (defaultTTL 0: no default). ok
// is false when no TTL applies: the migration has not ended, none is set,
// it failed leaving its source VM powered off (SourceLeftOff): that
// record is what tells a person to act, and only a person deletes it; or
// it found its target already migrated (AlreadyMigrated): it did nothing,
// and deleting it would only have a GitOps tool apply it again, and find
// the same.
func TTLExpiry(m *v1alpha1.VirtualMachineMigration, defaultTTL time.Duration) (time.Time, bool) {
	st := &m.Status
	if !IsTerminal(st.Phase) || SourceLeftOff(st) || AlreadyMigrated(st) {
		return time.Time{}, false
	}
	ttl := defaultTTL
	if s := m.Spec.TTLSecondsAfterFinished; s != nil {
		ttl = time.Duration(*s) * time.Second
	} else if defaultTTL <= 0 {
		return time.Time{}, false
	}
	ended := st.CompletionTime
	if ended == nil || ended.IsZero() {
		ended = st.PhaseStartTime
	}
	if ended == nil || ended.IsZero() {
		return time.Time{}, false
	}
	return ended.Add(max(ttl, 0)), true
}

// SourceLeftOff reports a migration that ended other than Succeeded while
// the source VM the controller stopped, found running, is not known to run
// again (the rollback could not restore it).
func SourceLeftOff(st *v1alpha1.VirtualMachineMigrationStatus) bool {
	sc := st.SourceControl
	stopped := sc != nil && (sc.ShutdownRequestedAt != nil || sc.PowerOffRequestedAt != nil)
	return st.Phase == v1alpha1.PhaseFailed && stopped && sc.OriginalPowerState == PowerStateOn && sc.RestoredAt == nil
}
