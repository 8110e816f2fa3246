package controller

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	kubevirtv1 "kubevirt.io/api/core/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/test/builders"
	"platform.example/vm-migration/test/fakes"
)

// TestRollbackReadsTheTargetInstanceLive: a migration rolls back after its
// target was started and halted; KubeVirt created the target's instance
// just before the halt, and the instance cache has not delivered it yet
// (the VM's cache already shows Halted). Right before powering the source
// on, the controller reads the instance from the API server itself: found
// there, or not readable, the source stays off; gone everywhere, it is
// powered on. What the VM itself reports of an instance (status.created,
// printableStatus) keeps the source off too.
func TestRollbackReadsTheTargetInstanceLive(t *testing.T) {
	started := builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
		s.Target.StartRequestedAt = builders.TP(-2 * time.Minute)
	})
	tests := map[string]struct {
		m       *v1alpha1.VirtualMachineMigration
		live    bool  // the API server has the instance the cache lacks
		failGet error // the live read fails
		created bool  // the VM reports its instance (status.created, Stopping)
		poweron bool
	}{
		"the VM reports its instance, none is seen: the source stays off": {
			m: builders.Migration(builders.WithFinalizer, builders.Reached(v1alpha1.PhaseRollingBack), started), created: true,
		},
		"rolling back, the instance only on the API server: the source stays off": {
			m: builders.Migration(builders.WithFinalizer, builders.Reached(v1alpha1.PhaseRollingBack), started), live: true,
		},
		"cancelling, the instance only on the API server: the source stays off": {
			m: builders.Migration(builders.WithFinalizer, builders.Reached(v1alpha1.PhaseCancelling), builders.Deleted, started), live: true,
		},
		"the live read fails: the source stays off": {
			m:       builders.Migration(builders.WithFinalizer, builders.Reached(v1alpha1.PhaseRollingBack), started),
			failGet: errors.New("the server is currently unable to handle the request"),
		},
		"no instance anywhere: the source is powered on": {
			m: builders.Migration(builders.WithFinalizer, builders.Reached(v1alpha1.PhaseRollingBack), started), poweron: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := tc.m
			src := &fakeSource{obs: statemachine.SourceObservation{Observed: true, PowerState: statemachine.PowerStateOff}}
			vm := builders.VirtualMachine(m, builders.DefaultTarget, kubevirtv1.RunStrategyHalted)
			if tc.created {
				vm.Status.Created, vm.Status.PrintableStatus = true, kubevirtv1.VirtualMachineStatusStopping
			}
			f := newFixture(t, src, m, vm)
			if tc.failGet != nil {
				// After the fake cluster's recorder, which comes first.
				f.kv.ReactionChain = slices.Insert(f.kv.ReactionChain, 1, k8stesting.Reactor(&k8stesting.SimpleReactor{
					Verb: "get", Resource: "virtualmachineinstances",
					Reaction: func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, tc.failGet },
				}))
			}
			f.resync()
			if tc.live {
				// Created on the API server after the caches were filled:
				// the instance cache lags behind.
				f.add(builders.VirtualMachineInstance(m, builders.DefaultTarget, kubevirtv1.Running))
				f.cluster.Clear()
			}
			_, err := f.c.sync(f.ctx, key(m))
			require.NoError(t, err)
			reads, _ := fakes.Calls(f.cluster.Actions())
			assert.Contains(t, reads, "get virtualmachineinstances", "the instance is read from the API server before the power-on")
			cur := f.get(m)
			require.NotNil(t, cur)
			if tc.poweron {
				assert.Equal(t, []string{"observe", "poweron"}, src.calls)
				return
			}
			assert.NotContains(t, src.calls, "poweron", "the source was powered on beside the target's instance")
			assert.Nil(t, cur.Status.SourceControl.RestoreRequestedAt)
			c := condition(cur, statemachine.ConditionProgressing)
			require.NotNil(t, c)
			assert.Equal(t, metav1.ConditionFalse, c.Status)
			assert.Equal(t, statemachine.ReasonWaitingForTargetInstance, c.Reason, c.Message)
			t.Log(c.Message)
		})
	}
}
