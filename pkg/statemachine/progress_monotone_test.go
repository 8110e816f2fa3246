package statemachine

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/test/builders"
)

// slowWorld is a world whose transfer Jobs and DataVolumes take their
// time: each transfer Job reports a quarter more of every disk at each
// look before it succeeds, each DataVolume a quarter more of its import;
// a first conversion can fail, for the disks to be transferred again.
type slowWorld struct {
	*world
	looks          map[string]int // how often each Job or the DataVolumes were seen
	failConversion bool
}

func (w *slowWorld) observe(m *v1alpha1.VirtualMachineMigration) Observation {
	o := w.world.observe(m)
	const steps = 4
	if j := o.TransferJob; j != nil && j.Succeeded {
		if n := w.looks[j.Name]; n < steps {
			w.looks[j.Name]++
			j.Succeeded, j.Results = false, nil
			for _, d := range m.Status.Disks {
				j.Progress = append(j.Progress, DiskProgress{Key: d.Key, BytesDone: d.CapacityBytes * int64(n) / steps,
					BytesTotal: d.CapacityBytes, RateBytesPerSecond: 100 << 20})
			}
		}
	}
	if j := o.ConversionJob; j != nil && w.failConversion && m.Status.Conversion.Attempt == 1 {
		j.Succeeded, j.Failed, j.Message = false, true, "virt-v2v: the appliance crashed"
	}
	if len(o.DataVolumes) > 0 {
		n := w.looks["dvs"]
		if n < steps {
			w.looks["dvs"]++
			for name, dv := range o.DataVolumes {
				dv.Phase, dv.Progress = "ImportInProgress", fmt.Sprintf("%d.0%%", 100*n/steps)
				o.DataVolumes[name] = dv
			}
		}
	}
	return o
}

// progressAlong drives a migration to its end in w and returns
// status.progress after every decision, with the phase it was written in.
func progressAlong(t *testing.T, w *slowWorld) (phases []v1alpha1.Phase, progress []string) {
	t.Helper()
	m := newMigration(builders.WithoutFinalizer)
	now := time.Duration(0)
	for step := 0; step < 500; step++ {
		d := decideAt(m, w.observe(m), now)
		m = after(m, d)
		w.apply(m, d.Action)
		phases, progress = append(phases, m.Status.Phase), append(progress, m.Status.Progress)
		if IsTerminal(m.Status.Phase) {
			return phases, progress
		}
		now += max(d.RequeueAfter, 10*time.Second)
	}
	require.FailNow(t, "no terminal phase after 500 decisions", "phase %s", m.Status.Phase)
	return nil, nil
}

// TestProgressNeverGoesBack: status.progress, kubectl get's PROGRESS
// and the figure kubectl vmm shows beside the phase, never goes back
// within a migration (issue 50 item 7: Converting 100%, then Importing
// 0%, then CreatingVM 100%): from the transfer's start to Succeeded, and
// through a transfer made again after a failed conversion. It is set
// from TransferringDisks on and reaches 100% only once the target runs.
func TestProgressNeverGoesBack(t *testing.T) {
	for name, failConversion := range map[string]bool{"the happy path": false, "a conversion that fails once": true} {
		t.Run(name, func(t *testing.T) {
			w := &slowWorld{world: &world{sourceOn: true, jobs: map[string]bool{}}, looks: map[string]int{}, failConversion: failConversion}
			phases, progress := progressAlong(t, w)
			require.Equal(t, v1alpha1.PhaseSucceeded, phases[len(phases)-1])
			// The figures as a watch shows them, each change once.
			var seen []string
			var pcts []int
			early := "" // a phase before the target runs that showed 100%
			for i, p := range progress {
				if p == "" {
					require.Empty(t, pcts, "status.progress cleared in %s after %v", phases[i], seen)
					continue
				}
				pct, err := strconv.Atoi(strings.TrimSuffix(p, "%"))
				require.NoError(t, err, "status.progress %q", p)
				if shown := string(phases[i]) + " " + p; len(seen) == 0 || seen[len(seen)-1] != shown {
					seen, pcts = append(seen, shown), append(pcts, pct)
				}
				if pct == 100 && phases[i] != v1alpha1.PhaseCleaningUp && phases[i] != v1alpha1.PhaseSucceeded && early == "" {
					early = string(phases[i])
				}
			}
			for i := 1; i < len(pcts); i++ {
				require.GreaterOrEqual(t, pcts[i], pcts[i-1], "status.progress went back: %v", seen)
			}
			assert.Empty(t, early, "100%% before the target runs: %v", seen)
			require.NotEmpty(t, pcts)
			assert.Equal(t, 100, pcts[len(pcts)-1], "the end: %v", seen)
			t.Logf("%v", seen)
		})
	}
}
