package controller

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	cdifake "platform.example/vm-migration/pkg/generated/cdi/clientset/versioned/fake"
	cdiinformers "platform.example/vm-migration/pkg/generated/cdi/informers/externalversions"
	kvfake "platform.example/vm-migration/pkg/generated/kubevirt/clientset/versioned/fake"
	kvinformers "platform.example/vm-migration/pkg/generated/kubevirt/informers/externalversions"
	migfake "platform.example/vm-migration/pkg/generated/migration/clientset/versioned/fake"
	miginformers "platform.example/vm-migration/pkg/generated/migration/informers/externalversions"
	"platform.example/vm-migration/pkg/statemachine"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// fixture holds fake clients whose informer indexers the test preloads,
// as sample-controller's tests do: informers are never started.
type fixture struct {
	t        *testing.T
	mig      *migfake.Clientset
	kube     *k8sfake.Clientset
	recorder *record.FakeRecorder
	clock    *clocktesting.FakeClock
	source   *fakeSource
	c        *Controller
	migInf   miginformers.SharedInformerFactory
	kubeInf  kubeinformers.SharedInformerFactory
}

func newFixture(t *testing.T, migrations ...*v1alpha1.VirtualMachineMigration) *fixture {
	t.Helper()
	objs := make([]runtime.Object, 0, len(migrations))
	for _, m := range migrations {
		objs = append(objs, m)
	}
	f := &fixture{
		t:        t,
		mig:      migfake.NewSimpleClientset(objs...),
		kube:     k8sfake.NewSimpleClientset(),
		recorder: record.NewFakeRecorder(100),
		clock:    clocktesting.NewFakeClock(t0),
		source:   &fakeSource{},
	}
	f.migInf = miginformers.NewSharedInformerFactory(f.mig, 0)
	kubeInf := kubeinformers.NewSharedInformerFactory(f.kube, 0)
	f.kubeInf = kubeInf
	kv := kvfake.NewSimpleClientset()
	cdi := cdifake.NewSimpleClientset()
	kvInf := kvinformers.NewSharedInformerFactory(kv, 0)
	cdiInf := cdiinformers.NewSharedInformerFactory(cdi, 0)
	inf := Informers{
		Migrations:  f.migInf.Migration().V1alpha1().VirtualMachineMigrations(),
		Jobs:        kubeInf.Batch().V1().Jobs(),
		Claims:      kubeInf.Core().V1().PersistentVolumeClaims(),
		ConfigMaps:  kubeInf.Core().V1().ConfigMaps(),
		DataVolumes: cdiInf.Cdi().V1beta1().DataVolumes(),
		VMs:         kvInf.Kubevirt().V1().VirtualMachines(),
		VMIs:        kvInf.Kubevirt().V1().VirtualMachineInstances(),
	}
	c, err := New(Clients{Kube: f.kube, Migration: f.mig, KubeVirt: kv, CDI: cdi}, inf,
		Steps{Source: f.source}, f.recorder,
		Config{Clock: f.clock, BaseRetryDelay: 50 * time.Millisecond, MaxRetryDelay: time.Second})
	require.NoError(t, err)
	f.c = c
	for _, m := range migrations {
		f.setCached(m)
	}
	f.mig.ClearActions()
	return f
}

// setCached puts the object in the migration informer's indexer, as if the
// watch had delivered it.
func (f *fixture) setCached(m *v1alpha1.VirtualMachineMigration) {
	require.NoError(f.t, f.migInf.Migration().V1alpha1().VirtualMachineMigrations().Informer().GetIndexer().Update(m))
}

// refresh copies the object from the fake API server into the cache.
func (f *fixture) refresh(m *v1alpha1.VirtualMachineMigration) *v1alpha1.VirtualMachineMigration {
	cur, err := f.mig.MigrationV1alpha1().VirtualMachineMigrations(m.Namespace).Get(context.Background(), m.Name, metav1.GetOptions{})
	require.NoError(f.t, err)
	f.setCached(cur)
	return cur
}

func (f *fixture) sync(m *v1alpha1.VirtualMachineMigration) time.Duration {
	f.t.Helper()
	after, err := f.c.sync(context.Background(), cache.MetaObjectToName(m))
	require.NoError(f.t, err)
	return after
}

// writes returns the verbs of the write actions on migrations, as
// "update", "update/status".
func (f *fixture) writes() []string {
	var out []string
	for _, a := range f.mig.Actions() {
		if a.GetVerb() == "get" || a.GetVerb() == "list" || a.GetVerb() == "watch" {
			continue
		}
		v := a.GetVerb()
		if a.GetSubresource() != "" {
			v += "/" + a.GetSubresource()
		}
		out = append(out, v)
	}
	return out
}

func newMigration(mods ...func(*v1alpha1.VirtualMachineMigration)) *v1alpha1.VirtualMachineMigration {
	m := &v1alpha1.VirtualMachineMigration{
		ObjectMeta: metav1.ObjectMeta{Name: "web-01", Namespace: "ns", UID: "uid-1", Generation: 1},
		Spec: v1alpha1.VirtualMachineMigrationSpec{
			Source: v1alpha1.SourceSpec{
				URL:                  "https://vcenter.example.com/sdk",
				CredentialsSecretRef: v1alpha1.SecretReference{Name: "creds"},
				VM:                   v1alpha1.VMSelector{Name: "web-01"},
			},
		},
	}
	for _, mod := range mods {
		mod(m)
	}
	return m
}

func withFinalizer(m *v1alpha1.VirtualMachineMigration) {
	m.Finalizers = append(m.Finalizers, v1alpha1.FinalizerName)
}

func inPhase(p v1alpha1.Phase) func(*v1alpha1.VirtualMachineMigration) {
	return func(m *v1alpha1.VirtualMachineMigration) {
		m.Status.Phase = p
		start := metav1.NewTime(t0)
		m.Status.StartTime = &start
	}
}

// fakeSource is a SourceStep that returns what the test sets and counts calls.
type fakeSource struct {
	obs      statemachine.SourceObservation
	findings []v1alpha1.PreflightFinding
	calls    []string
}

func (s *fakeSource) Observe(_ context.Context, _ *v1alpha1.VirtualMachineMigration, need statemachine.SourceNeed) statemachine.SourceObservation {
	s.calls = append(s.calls, "observe")
	return s.obs
}

func (s *fakeSource) Preflight(context.Context, *v1alpha1.VirtualMachineMigration, *v1alpha1.SourceInventory) ([]v1alpha1.PreflightFinding, error) {
	s.calls = append(s.calls, "preflight")
	return s.findings, nil
}

func (s *fakeSource) ShutdownGuest(context.Context, *v1alpha1.VirtualMachineMigration) error {
	s.calls = append(s.calls, "shutdown")
	return nil
}

func (s *fakeSource) PowerOff(context.Context, *v1alpha1.VirtualMachineMigration) error {
	s.calls = append(s.calls, "poweroff")
	return nil
}

func (s *fakeSource) PowerOn(context.Context, *v1alpha1.VirtualMachineMigration) error {
	s.calls = append(s.calls, "poweron")
	return nil
}

func (s *fakeSource) RemoveSnapshot(context.Context, *v1alpha1.VirtualMachineMigration, string) error {
	s.calls = append(s.calls, "removesnapshot")
	return nil
}

func TestNewMigrationGetsFinalizerThenValidating(t *testing.T) {
	m := newMigration()
	f := newFixture(t, m)

	f.sync(m)
	assert.Equal(t, []string{"update/status", "update"}, f.writes(), "status initialised, then the finalizer added")
	cur := f.refresh(m)
	assert.Contains(t, cur.Finalizers, v1alpha1.FinalizerName)
	assert.Equal(t, v1alpha1.PhasePending, cur.Status.Phase)
	require.NotNil(t, cur.Status.StartTime)
	assert.Equal(t, t0, cur.Status.StartTime.Time.UTC())

	f.mig.ClearActions()
	f.sync(cur)
	assert.Equal(t, []string{"update/status"}, f.writes())
	cur = f.refresh(cur)
	assert.Equal(t, v1alpha1.PhaseValidating, cur.Status.Phase)
	assert.Equal(t, int64(1), cur.Status.ObservedGeneration)
	require.Len(t, cur.Status.Evidence, 1)
	assert.Equal(t, v1alpha1.PhasePending, cur.Status.Evidence[0].Phase)
	assert.Empty(t, f.source.calls, "Pending never talks to vSphere")
	assert.Contains(t, drainEvents(f.recorder), "Normal PhaseChanged Pending -> Validating: finalizer set and status initialised")
}

func TestMissingSecretWaitsWithConditionAndWritesOnce(t *testing.T) {
	m := newMigration(withFinalizer, inPhase(v1alpha1.PhaseValidating))
	f := newFixture(t, m)
	f.source.obs = statemachine.SourceObservation{Error: &statemachine.ObservedError{
		Class: statemachine.ErrorNeedsUser, Reason: "CredentialsSecretNotFound", Message: `Secret "creds" not found in namespace ns`,
	}}

	after := f.sync(m)
	assert.Equal(t, statemachine.DefaultWaitInterval, after, "a migration waiting on a person is looked at again later")
	assert.Equal(t, []string{"update/status"}, f.writes())
	cur := f.refresh(m)
	cond := findCondition(cur, statemachine.ConditionProgressing)
	require.NotNil(t, cond)
	assert.Equal(t, metav1.ConditionFalse, cond.Status)
	assert.Equal(t, "CredentialsSecretNotFound", cond.Reason)
	assert.Contains(t, cond.Message, `"creds"`)
	assert.Equal(t, int64(1), cond.ObservedGeneration)

	// The same observation later: nothing changed, nothing is written.
	f.mig.ClearActions()
	f.clock.Step(time.Minute)
	f.sync(cur)
	assert.Empty(t, f.writes(), "an unchanged sync writes no status")
}

func TestUnchangedSyncWritesNothing(t *testing.T) {
	m := newMigration(withFinalizer, inPhase(v1alpha1.PhaseAwaitingApproval), func(m *v1alpha1.VirtualMachineMigration) {
		m.Spec.Policy.RequireApproval = true
		m.Status.ObservedGeneration = 1
	})
	f := newFixture(t, m)
	f.sync(m)
	cur := f.refresh(m)
	require.NotNil(t, findCondition(cur, statemachine.ConditionApprovalRequired))

	for i := range 3 {
		f.mig.ClearActions()
		f.clock.Step(time.Duration(i+1) * time.Minute)
		f.sync(cur)
		assert.Empty(t, f.writes(), "sync %d wrote although nothing changed", i)
	}
}

func TestErrorRequeuesWithBackoff(t *testing.T) {
	m := newMigration()
	f := newFixture(t, m)
	f.mig.PrependReactor("update", "virtualmachinemigrations", func(a core.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("etcd is on fire")
	})
	key := cache.MetaObjectToName(m)
	ctx := context.Background()

	f.c.Enqueue(key)
	require.True(t, f.c.processNextItem(ctx))
	assert.Equal(t, 1, f.c.queue.NumRequeues(key), "a failed sync is requeued through the rate limiter")
	assert.Equal(t, 0, f.c.queue.Len(), "the retry waits for its backoff")

	// The backoff doubles on each failure.
	time.Sleep(60 * time.Millisecond)
	require.Equal(t, 1, f.c.queue.Len(), "the key comes back after the base delay")
	require.True(t, f.c.processNextItem(ctx))
	assert.Equal(t, 2, f.c.queue.NumRequeues(key))
	time.Sleep(60 * time.Millisecond)
	assert.Equal(t, 0, f.c.queue.Len(), "the second retry waits twice as long")
	time.Sleep(60 * time.Millisecond)
	assert.Equal(t, 1, f.c.queue.Len())

	// Success forgets the failures.
	f.mig.ReactionChain = f.mig.ReactionChain[1:]
	require.True(t, f.c.processNextItem(ctx))
	assert.Equal(t, 0, f.c.queue.NumRequeues(key))
}

func TestDeletionRunsFinalizerPath(t *testing.T) {
	deleted := metav1.NewTime(t0)
	m := newMigration(withFinalizer, inPhase(v1alpha1.PhaseValidating), func(m *v1alpha1.VirtualMachineMigration) {
		m.DeletionTimestamp = &deleted
	})
	f := newFixture(t, m)

	f.sync(m)
	cur := f.refresh(m)
	assert.Equal(t, v1alpha1.PhaseCancelling, cur.Status.Phase)

	f.mig.ClearActions()
	f.sync(cur)
	assert.Equal(t, []string{"update/status", "update"}, f.writes(), "nothing to undo: the finalizer is released")
	cur = f.refresh(cur)
	assert.NotContains(t, cur.Finalizers, v1alpha1.FinalizerName)
	assert.Empty(t, f.source.calls, "a source never touched is not called during cancellation")
}

func TestDeletionRestoresSourceBeforeReleasingFinalizer(t *testing.T) {
	deleted := metav1.NewTime(t0)
	requested := metav1.NewTime(t0.Add(-time.Hour))
	m := newMigration(withFinalizer, inPhase(v1alpha1.PhaseCancelling), func(m *v1alpha1.VirtualMachineMigration) {
		m.DeletionTimestamp = &deleted
		m.Status.SourceControl = &v1alpha1.SourceControlStatus{OriginalPowerState: "poweredOn", PowerOffRequestedAt: &requested}
	})
	f := newFixture(t, m)
	f.source.obs = statemachine.SourceObservation{Observed: true, PowerState: "poweredOff"}

	f.sync(m)
	assert.Equal(t, []string{"observe", "poweron"}, f.source.calls)
	cur := f.refresh(m)
	require.NotNil(t, cur.Status.SourceControl.RestoreRequestedAt, "the intent is written before the call")
	assert.Contains(t, cur.Finalizers, v1alpha1.FinalizerName)

	f.source.obs.PowerState = "poweredOn"
	f.source.calls = nil
	f.sync(cur)
	cur = f.refresh(cur)
	require.NotNil(t, cur.Status.SourceControl.RestoredAt)
	f.source.calls = nil
	f.sync(cur)
	cur = f.refresh(cur)
	assert.NotContains(t, cur.Finalizers, v1alpha1.FinalizerName)
}

func TestTransferSlotsLimitPerHost(t *testing.T) {
	onHost := func(name string, phase v1alpha1.Phase) *v1alpha1.VirtualMachineMigration {
		return newMigration(withFinalizer, inPhase(phase), func(m *v1alpha1.VirtualMachineMigration) {
			m.Name, m.UID = name, types.UID("uid-"+name)
			m.Status.Source = &v1alpha1.SourceInventory{Name: name, HostMoRef: "host-1",
				Disks: []v1alpha1.SourceDisk{{Key: 2000, Datastore: "ds1"}}}
		})
	}
	busy := onHost("a", v1alpha1.PhaseTransferringDisks)
	waiting1 := onHost("b", v1alpha1.PhaseQueued)
	waiting2 := onHost("c", v1alpha1.PhaseQueued)
	f := newFixture(t, busy, waiting1, waiting2)
	f.c.cfg.MaxTransfersPerHost = 2

	slot, err := f.c.transferSlot(waiting1)
	require.NoError(t, err)
	assert.True(t, slot.Available, slot.Message)
	slot, err = f.c.transferSlot(waiting2)
	require.NoError(t, err)
	assert.False(t, slot.Available, "the reservation of b counts before the cache shows it")
	assert.Contains(t, slot.Message, "2 of 2 transfers")

	// b's decision did not use the slot: it is free again.
	f.c.slots.settle(cache.MetaObjectToName(waiting1), v1alpha1.PhaseQueued)
	slot, err = f.c.transferSlot(waiting2)
	require.NoError(t, err)
	assert.True(t, slot.Available)
}

func findCondition(m *v1alpha1.VirtualMachineMigration, t string) *metav1.Condition {
	i := slices.IndexFunc(m.Status.Conditions, func(c metav1.Condition) bool { return c.Type == t })
	if i < 0 {
		return nil
	}
	return &m.Status.Conditions[i]
}

func drainEvents(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestCleanupDeletesStagingAndTransferAccess(t *testing.T) {
	m := newMigration(withFinalizer, inPhase(v1alpha1.PhaseCleaningUp), func(m *v1alpha1.VirtualMachineMigration) {
		m.Status.Transfer = &v1alpha1.JobStatus{JobName: "web-01-transfer-2", Attempt: 2}
	})
	f := newFixture(t, m)
	labels := map[string]string{v1alpha1.LabelMigrationUID: "uid-1", v1alpha1.LabelMigrationName: "web-01", v1alpha1.LabelComponent: v1alpha1.ComponentStaging}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "web-01-staging-2000", Namespace: "ns", Labels: labels}}
	_, err := f.kube.CoreV1().PersistentVolumeClaims("ns").Create(context.Background(), pvc, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, f.kubeInf.Core().V1().PersistentVolumeClaims().Informer().GetIndexer().Add(pvc))
	for _, attempt := range []string{"1", "2"} {
		name := "web-01-transfer-" + attempt
		meta := metav1.ObjectMeta{Name: name, Namespace: "ns"}
		_, err := f.kube.CoreV1().ServiceAccounts("ns").Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: meta}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = f.kube.RbacV1().Roles("ns").Create(context.Background(), &rbacv1.Role{ObjectMeta: meta}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = f.kube.RbacV1().RoleBindings("ns").Create(context.Background(), &rbacv1.RoleBinding{ObjectMeta: meta}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	f.sync(m)
	ctx := context.Background()
	claims, _ := f.kube.CoreV1().PersistentVolumeClaims("ns").List(ctx, metav1.ListOptions{})
	sas, _ := f.kube.CoreV1().ServiceAccounts("ns").List(ctx, metav1.ListOptions{})
	roles, _ := f.kube.RbacV1().Roles("ns").List(ctx, metav1.ListOptions{})
	bindings, _ := f.kube.RbacV1().RoleBindings("ns").List(ctx, metav1.ListOptions{})
	assert.Empty(t, claims.Items, "staging claims deleted")
	assert.Empty(t, sas.Items, "transfer service accounts deleted")
	assert.Empty(t, roles.Items, "transfer roles deleted")
	assert.Empty(t, bindings.Items, "transfer role bindings deleted")
}

func TestQueuedWithoutSlotDoesNotReadSource(t *testing.T) {
	onHost := func(name string, phase v1alpha1.Phase) *v1alpha1.VirtualMachineMigration {
		return newMigration(withFinalizer, inPhase(phase), func(m *v1alpha1.VirtualMachineMigration) {
			m.Name, m.UID = name, types.UID("uid-"+name)
			m.Status.ObservedGeneration = m.Generation
			m.Status.Source = &v1alpha1.SourceInventory{Name: name, HostMoRef: "host-1"}
		})
	}
	busy := onHost("a", v1alpha1.PhaseTransferringDisks)
	waiting := onHost("b", v1alpha1.PhaseQueued)
	f := newFixture(t, busy, waiting)
	f.c.cfg.MaxTransfersPerHost = 1

	after := f.sync(waiting)
	assert.Empty(t, f.source.calls, "a migration waiting for a slot does not look at its source")
	assert.Equal(t, statemachine.DefaultWaitInterval, after)
	cur := f.refresh(waiting)
	assert.Equal(t, v1alpha1.PhaseQueued, cur.Status.Phase)
	cond := findCondition(cur, statemachine.ConditionProgressing)
	require.NotNil(t, cond)
	assert.Equal(t, statemachine.ReasonWaitingForTransferSlot, cond.Reason)
	assert.Contains(t, cond.Message, "1 of 1 transfers already run from host")
}
