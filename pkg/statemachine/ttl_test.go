package statemachine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/utils/ptr"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/test/builders"
)

func TestTTLExpiry(t *testing.T) {
	completed := builders.At(-time.Minute).Time // builders.Reached's completion time
	ttl := func(s int32) builders.MigrationMod {
		return builders.WithSpec(func(sp *v1alpha1.VirtualMachineMigrationSpec) { sp.TTLSecondsAfterFinished = ptr.To(s) })
	}
	leftOff := builders.WithSourceControl(func(sc *v1alpha1.SourceControlStatus) { sc.RestoredAt = nil })
	noCompletion := builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) { s.CompletionTime = nil })
	cases := map[string]struct {
		m          *v1alpha1.VirtualMachineMigration
		defaultTTL time.Duration
		want       time.Time
		ok         bool
	}{
		"succeeded, spec TTL":                {m: newMigration(builders.Reached(v1alpha1.PhaseSucceeded), ttl(3600)), want: completed.Add(time.Hour), ok: true},
		"spec TTL wins over the default":     {m: newMigration(builders.Reached(v1alpha1.PhaseSucceeded), ttl(60)), defaultTTL: time.Hour, want: completed.Add(time.Minute), ok: true},
		"the default when the spec is unset": {m: newMigration(builders.Reached(v1alpha1.PhaseSucceeded)), defaultTTL: time.Hour, want: completed.Add(time.Hour), ok: true},
		"spec TTL 0: at once":                {m: newMigration(builders.Reached(v1alpha1.PhaseSucceeded), ttl(0)), defaultTTL: time.Hour, want: completed, ok: true},
		"no TTL at all":                      {m: newMigration(builders.Reached(v1alpha1.PhaseSucceeded))},
		"failed, source restored":            {m: newMigration(builders.Reached(v1alpha1.PhaseFailed), ttl(10)), want: completed.Add(10 * time.Second), ok: true},
		"failed, source left off: never":     {m: newMigration(builders.Reached(v1alpha1.PhaseFailed), leftOff, ttl(10)), defaultTTL: time.Hour},
		"still running":                      {m: newMigration(builders.Reached(v1alpha1.PhaseStarting), ttl(10)), defaultTTL: time.Hour},
		"rolling back":                       {m: newMigration(builders.Reached(v1alpha1.PhaseRollingBack), ttl(10))},
		"no completion time: the terminal phase's start": {m: newMigration(builders.Reached(v1alpha1.PhaseSucceeded), noCompletion, ttl(10)),
			want: builders.At(-time.Minute).Add(10 * time.Second), ok: true},
		"no time at all": {m: newMigration(builders.InPhase(v1alpha1.PhaseSucceeded), ttl(10))},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := TTLExpiry(tc.m, tc.defaultTTL)
			assert.Equal(t, tc.ok, ok)
			assert.True(t, tc.want.Equal(got), "expiry %s, want %s", got, tc.want)
		})
	}
}
