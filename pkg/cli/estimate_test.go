package cli

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
)

// finishedWith is a migration of gib GiB whose outage took the given
// seconds per part, in statemachine.OutagePhases order, ended minutesAgo.
func finishedWith(uid string, gib int64, minutesAgo int, seconds ...int64) v1alpha1.VirtualMachineMigration {
	m := v1alpha1.VirtualMachineMigration{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "apps", UID: types.UID(uid)}}
	m.Status.Source = &v1alpha1.SourceInventory{Disks: []v1alpha1.SourceDisk{{CapacityBytes: gib << 30}}}
	end := metav1.NewTime(testNow.Add(-time.Duration(minutesAgo) * time.Minute))
	m.Status.Downtime = &v1alpha1.DowntimeStatus{TargetRunningAt: &end, Seconds: ptr.To[int64](1)}
	for i, s := range seconds {
		m.Status.Downtime.Phases = append(m.Status.Downtime.Phases, v1alpha1.PhaseDowntime{Phase: statemachine.OutagePhases()[i], Seconds: s})
	}
	return m
}

func TestDowntimeEstimate(t *testing.T) {
	planned := func(gib int64, mods ...func(*v1alpha1.VirtualMachineMigration)) *v1alpha1.VirtualMachineMigration {
		m := finishedWith("planned", gib, 0)
		m.Status.Downtime = nil
		for _, mod := range mods {
			mod(&m)
		}
		return &m
	}
	// 1 GiB moved in 10 s and 3 GiB in 30 s: 102.4 MiB/s; the
	// conversion's median 60 s, the import's (CDI adopting the claims the
	// transfer wrote, whatever their size) 2 s.
	history := []v1alpha1.VirtualMachineMigration{
		finishedWith("a", 1, 10, 10, 50, 2, 1, 9),
		finishedWith("b", 3, 20, 30, 60, 1, 1, 10),
		finishedWith("c", 2, 30, 20, 70, 3, 2, 11),
		finishedWith("never-ran", 2, 5, 20, 70),
	}
	cases := map[string]struct {
		m      *v1alpha1.VirtualMachineMigration
		others []v1alpha1.VirtualMachineMigration
		want   string
	}{
		"scaled by the bytes": {m: planned(10), others: history,
			want: "about 2m53s for 10.0 GiB of disks, at the rates of the latest 3 finished migrations in namespace apps (TransferringDisks 1m40s at 102.4 MiB/s, Converting 1m, Importing 2s, CreatingVM 1s, Starting 10s)"},
		"conversion skipped, left halted": {m: planned(1, func(m *v1alpha1.VirtualMachineMigration) {
			m.Spec.Conversion.Skip, m.Spec.Target.Start = true, ptr.To(false)
		}), others: history,
			want: "about 13s for 1.0 GiB of disks, at the rates of the latest 3 finished migrations in namespace apps (TransferringDisks 10s at 102.4 MiB/s, Importing 2s, CreatingVM 1s)"},
		"nothing to measure from": {m: planned(1), others: history[3:],
			want: "none: no migration in namespace apps has yet run to a running VM, whose outage would give the rates to estimate 1.0 GiB of disks from"},
		"not inventoried": {m: &v1alpha1.VirtualMachineMigration{}, want: "none yet: the source VM is not inventoried"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, downtimeEstimate(tc.m, tc.others, nil))
		})
	}
}
