package controller

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	types2 "k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/steps/pipeline"
	"platform.example/vm-migration/pkg/steps/source"
	"platform.example/vm-migration/pkg/transfer/wire"
	"platform.example/vm-migration/pkg/vsphere"
	"platform.example/vm-migration/test/builders"
)

// The walkthrough tests drive one migration through the real controller
// sync, the real pipeline step over fake clientsets and the real source step
// over an in-process vCenter simulator. The test plays everything that
// cannot run here: the informers (it copies the fake clients' objects into
// the indexers around every sync), the API server's deletion and garbage
// collection, the Job controller and kubelet (Jobs, pods, termination
// messages), CDI (DataVolume phases) and KubeVirt (the VMI).

const (
	walkNamespace = "apps"
	walkName      = "web-01"
	walkUID       = "uid-walk-1"
	vcsimUser     = "migrator@vsphere.local"
	vcsimPassword = "Walk-Through-Source-1!"
)

// walkFixture is one migration and every peer it talks to.
type walkFixture struct {
	*fixture
	// m names the migration (its queue key).
	m *v1alpha1.VirtualMachineMigration

	vcsimURL *url.URL
	srcVM    string // the source VM's name in vcsim
}

// walkOptions vary the migration of a walk.
type walkOptions struct {
	skipConversion bool
	retryLimit     *int32
}

func newWalkFixture(t *testing.T, opts walkOptions) *walkFixture {
	t.Helper()
	model := simulator.VPX()
	require.NoError(t, model.Create())
	model.Service.TLS = new(tls.Config)
	model.Service.Listen = &url.URL{User: url.UserPassword(vcsimUser, vcsimPassword)}
	server := model.Service.NewServer()
	t.Cleanup(func() { server.Close(); model.Remove() })

	secret := builders.CredentialsSecret(walkNamespace, "vcenter-credentials", map[string]string{
		"username": vcsimUser, "password": vcsimPassword, "thumbprint": soap.ThumbprintSHA256(server.Certificate()),
		"endpoints": server.URL.Host,
	})
	sessions := vsphere.NewSessionCache()
	t.Cleanup(func() { _ = sessions.Close(context.Background()) })
	src := &source.Step{Sessions: sessions, CallTimeout: 20 * time.Second}
	f := &walkFixture{fixture: newFixture(t, src, secret, builders.StorageClass("standard", true)),
		vcsimURL: server.URL, srcVM: "DC0_H0_VM0"}
	src.Secrets = f.factories.Secrets.Core().V1().Secrets().Lister()
	f.resync()

	m := builders.Migration(builders.Named(walkName), builders.InNamespace(walkNamespace), builders.WithUID(walkUID),
		builders.SourceAt("https://"+server.URL.Host+"/sdk"), builders.Credentials(secret.Name), builders.SourceVM(f.srcVM),
		builders.RequireApproval, func(m *v1alpha1.VirtualMachineMigration) {
			m.Spec.Conversion.Skip = opts.skipConversion
			m.Spec.Policy.Retry.Limit = opts.retryLimit
		})
	// Every source network is mapped: the first to the pod network, the
	// others ignored, so that preflight passes.
	obs := src.Observe(f.ctx, m, statemachine.SourceNeedInventory)
	require.Nil(t, obs.Error, "reading the simulator's VM")
	require.Equal(t, statemachine.PowerStateOn, obs.PowerState, "the simulator's VM starts powered on")
	for _, nic := range obs.Inventory.NICs {
		if slices.ContainsFunc(m.Spec.Target.Networks, func(n v1alpha1.NetworkMapping) bool { return n.Source == nic.Network }) {
			continue
		}
		mapping := builders.IgnoredNetwork(nic.Network)
		if len(m.Spec.Target.Networks) == 0 {
			mapping = builders.PodNetwork(nic.Network)
		}
		m.Spec.Target.Networks = append(m.Spec.Target.Networks, mapping)
	}
	f.add(m)
	f.m = m
	f.resync()
	return f
}

// sync runs one reconcile, then plays the API server's deletion and
// garbage collection.
func (f *walkFixture) sync() time.Duration {
	f.t.Helper()
	before := f.migrationPhase()
	after := f.fixture.sync(f.m)
	// The reads a reconcile makes (uncachedReads), and rolling back or
	// cancelling, once, the target's instance right before the source may
	// be powered on (the instance cache can lag).
	reads := f.uncachedReads()
	if i := slices.Index(reads, "get virtualmachineinstances"); i >= 0 && (before == v1alpha1.PhaseRollingBack || before == v1alpha1.PhaseCancelling) {
		reads = slices.Delete(reads, i, i+1)
	}
	assert.Empty(f.t, reads, "a reconcile in %s read from the API server", f.migrationPhase())
	f.playAPIServer()
	f.resync()
	return after
}

// uncachedReads are the last reconcile's reads from the API server but
// those a reconcile makes by design: creating the verification Job, the
// volume mode of each target claim of the clone path, which no cache
// holds yet; creating the target claims, CDI's StorageProfiles (at most
// once a minute for all migrations).
func (f *walkFixture) uncachedReads() []string {
	return slices.DeleteFunc(slices.Clone(f.reads), func(r string) bool {
		return (r == "get persistentvolumeclaims" && slices.Contains(f.writes, "create jobs")) ||
			(r == "list storageprofiles" && slices.Contains(f.writes, "create persistentvolumeclaims"))
	})
}

// syncTo syncs once and requires the phase it leads to.
func (f *walkFixture) syncTo(want v1alpha1.Phase) *v1alpha1.VirtualMachineMigration {
	f.t.Helper()
	f.sync()
	m := f.migration()
	require.NotNil(f.t, m, "the migration is gone")
	require.Equal(f.t, want, m.Status.Phase, "phase after sync; conditions: %s", conditionSummary(m))
	return m
}

// unchangedSyncWritesNothing syncs once more with nothing changed and
// requires that no client wrote anything.
func (f *walkFixture) unchangedSyncWritesNothing(where string) {
	f.t.Helper()
	before := f.migration()
	f.sync()
	assert.Empty(f.t, f.writes, "%s: an unchanged sync wrote", where)
	assert.Equal(f.t, before.ResourceVersion, f.migration().ResourceVersion, "%s: the migration changed", where)
}

// migrationPhase is the migration's phase, "" once it is gone.
func (f *walkFixture) migrationPhase() v1alpha1.Phase {
	if m := f.migration(); m != nil {
		return m.Status.Phase
	}
	return ""
}

// migration reads the migration from the fake API server; nil once deleted.
func (f *walkFixture) migration() *v1alpha1.VirtualMachineMigration { return f.get(f.m) }

// updateMigration changes the migration the way a user's write does:
// a spec change bumps the generation.
func (f *walkFixture) updateMigration(change func(*v1alpha1.VirtualMachineMigration)) {
	f.t.Helper()
	m := f.migration()
	require.NotNil(f.t, m)
	spec := m.Spec.DeepCopy()
	change(m)
	if !apiequal(spec, &m.Spec) {
		m.Generation++
	}
	_, err := f.mig.MigrationV1alpha1().VirtualMachineMigrations(walkNamespace).Update(f.ctx, m, metav1.UpdateOptions{})
	require.NoError(f.t, err)
}

func apiequal(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// deleteMigration marks the migration deleted, as the API server does for
// an object with finalizers.
func (f *walkFixture) deleteMigration() {
	f.updateMigration(func(m *v1alpha1.VirtualMachineMigration) {
		now := metav1.NewTime(f.clock.Now())
		m.DeletionTimestamp = &now
	})
}

// playAPIServer removes a deleted migration once its finalizers are gone,
// and collects the garbage the API server would: pods of deleted Jobs,
// DataVolumes and VMIs of deleted VMs.
func (f *walkFixture) playAPIServer() {
	f.t.Helper()
	ctx := f.ctx
	if m := f.migration(); m != nil && m.DeletionTimestamp != nil && len(m.Finalizers) == 0 {
		require.NoError(f.t, f.mig.MigrationV1alpha1().VirtualMachineMigrations(walkNamespace).Delete(ctx, walkName, metav1.DeleteOptions{}))
	}
	jobs, err := f.kube.BatchV1().Jobs(walkNamespace).List(ctx, metav1.ListOptions{})
	require.NoError(f.t, err)
	pods, err := f.kube.CoreV1().Pods(walkNamespace).List(ctx, metav1.ListOptions{})
	require.NoError(f.t, err)
	for _, p := range pods.Items {
		owner := metav1.GetControllerOf(&p)
		if owner != nil && owner.Kind == "Job" && !slices.ContainsFunc(jobs.Items, func(j batchv1.Job) bool { return j.UID == owner.UID }) {
			require.NoError(f.t, f.kube.CoreV1().Pods(walkNamespace).Delete(ctx, p.Name, metav1.DeleteOptions{}))
		}
	}
	vms, err := f.kv.KubevirtV1().VirtualMachines(walkNamespace).List(ctx, metav1.ListOptions{})
	require.NoError(f.t, err)
	vmExists := func(uid types2.UID, name string) bool {
		return slices.ContainsFunc(vms.Items, func(vm kubevirtv1.VirtualMachine) bool {
			return (uid != "" && vm.UID == uid) || (uid == "" && vm.Name == name)
		})
	}
	dvs, err := f.cdi.CdiV1beta1().DataVolumes(walkNamespace).List(ctx, metav1.ListOptions{})
	require.NoError(f.t, err)
	for _, dv := range dvs.Items {
		if owner := metav1.GetControllerOf(&dv); owner != nil && owner.Kind == "VirtualMachine" && !vmExists(owner.UID, owner.Name) {
			require.NoError(f.t, f.cdi.CdiV1beta1().DataVolumes(walkNamespace).Delete(ctx, dv.Name, metav1.DeleteOptions{}))
		}
	}
	vmis, err := f.kv.KubevirtV1().VirtualMachineInstances(walkNamespace).List(ctx, metav1.ListOptions{})
	require.NoError(f.t, err)
	halted := func(name string) bool {
		return slices.ContainsFunc(vms.Items, func(vm kubevirtv1.VirtualMachine) bool {
			return vm.Name == name && vm.Spec.RunStrategy != nil && *vm.Spec.RunStrategy == kubevirtv1.RunStrategyHalted
		})
	}
	for _, vmi := range vmis.Items {
		// KubeVirt stops the instance of a halted VM.
		if !vmExists("", vmi.Name) || halted(vmi.Name) {
			require.NoError(f.t, f.kv.KubevirtV1().VirtualMachineInstances(walkNamespace).Delete(ctx, vmi.Name, metav1.DeleteOptions{}))
		}
	}
}

// children lists every object in the fake clients that carries the
// migration's UID label, as "Kind/name", sorted.
func (f *walkFixture) children() []string {
	f.t.Helper()
	ctx := f.ctx
	sel := metav1.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{v1alpha1.LabelMigrationUID: walkUID}).String()}
	var out []string
	add := func(kind string, list runtime.Object, err error) {
		require.NoError(f.t, err)
		items, err := meta.ExtractList(list)
		require.NoError(f.t, err)
		for _, it := range items {
			acc, err := meta.Accessor(it)
			require.NoError(f.t, err)
			out = append(out, kind+"/"+acc.GetName())
		}
	}
	l1, err := f.kube.CoreV1().PersistentVolumeClaims(walkNamespace).List(ctx, sel)
	add("PersistentVolumeClaim", l1, err)
	l2, err := f.kube.CoreV1().ConfigMaps(walkNamespace).List(ctx, sel)
	add("ConfigMap", l2, err)
	l3, err := f.kube.BatchV1().Jobs(walkNamespace).List(ctx, sel)
	add("Job", l3, err)
	l4, err := f.kube.CoreV1().Pods(walkNamespace).List(ctx, sel)
	add("Pod", l4, err)
	l5, err := f.kube.CoreV1().ServiceAccounts(walkNamespace).List(ctx, sel)
	add("ServiceAccount", l5, err)
	l6, err := f.kube.RbacV1().Roles(walkNamespace).List(ctx, sel)
	add("Role", l6, err)
	l7, err := f.kube.RbacV1().RoleBindings(walkNamespace).List(ctx, sel)
	add("RoleBinding", l7, err)
	l8, err := f.cdi.CdiV1beta1().DataVolumes(walkNamespace).List(ctx, sel)
	add("DataVolume", l8, err)
	l9, err := f.kv.KubevirtV1().VirtualMachines(walkNamespace).List(ctx, sel)
	add("VirtualMachine", l9, err)
	l10, err := f.kv.KubevirtV1().VirtualMachineInstances(walkNamespace).List(ctx, sel)
	add("VirtualMachineInstance", l10, err)
	sort.Strings(out)
	return out
}

// targetClaims are m's target claims, as children: the VM's disks, which
// keep the migration's labels once handed over (the controller may not
// patch claims), as the claims CDI makes keep those of their DataVolumes.
func targetClaims(m *v1alpha1.VirtualMachineMigration) []string {
	var out []string
	for _, d := range m.Status.Disks {
		if d.WrittenInPlace() {
			out = append(out, "PersistentVolumeClaim/"+d.StagingClaim)
		}
	}
	return out
}

// requireChildren requires exactly these children.
func (f *walkFixture) requireChildren(where string, want ...string) {
	f.t.Helper()
	sort.Strings(want)
	if want == nil {
		want = []string{}
	}
	got := f.children()
	if got == nil {
		got = []string{}
	}
	require.Equal(f.t, want, got, "%s: the children that exist", where)
}

// requireReleased requires m's target VM and its DataVolumes to exist,
// handed over: without the migration's labels (the VM's template too),
// annotated with the migration they came from.
func (f *walkFixture) requireReleased(m *v1alpha1.VirtualMachineMigration) {
	f.t.Helper()
	want := m.Namespace + "/" + m.Name
	vm, err := f.kv.KubevirtV1().VirtualMachines(walkNamespace).Get(f.ctx, m.Status.Target.Name, metav1.GetOptions{})
	require.NoError(f.t, err, "the kept VM")
	objs := []metav1.Object{vm, &metav1.ObjectMeta{Name: vm.Name + " (template)", Labels: vm.Spec.Template.ObjectMeta.Labels}}
	for _, d := range m.Status.Disks {
		dv, err := f.cdi.CdiV1beta1().DataVolumes(walkNamespace).Get(f.ctx, d.DataVolume, metav1.GetOptions{})
		require.NoError(f.t, err, "the kept DataVolume %s", d.DataVolume)
		objs = append(objs, dv)
	}
	for _, o := range objs {
		for _, l := range []string{v1alpha1.LabelMigrationName, v1alpha1.LabelMigrationUID, v1alpha1.LabelComponent} {
			assert.NotContains(f.t, o.GetLabels(), l, "%s still carries the deleted migration's label", o.GetName())
		}
		if !strings.HasSuffix(o.GetName(), " (template)") {
			assert.Equal(f.t, want, o.GetAnnotations()[v1alpha1.AnnotationMigratedBy], "%s: where it came from", o.GetName())
		}
	}
}

// requireOwnedByMigration requires a controller owner reference to the migration.
func (f *walkFixture) requireOwnedByMigration(obj metav1.Object) {
	f.t.Helper()
	owner := metav1.GetControllerOf(obj)
	require.NotNil(f.t, owner, "%s has no controller owner", obj.GetName())
	assert.Equal(f.t, "VirtualMachineMigration", owner.Kind, obj.GetName())
	assert.Equal(f.t, walkName, owner.Name, obj.GetName())
	assert.Equal(f.t, types2.UID(walkUID), owner.UID, obj.GetName())
}

// requireUnowned requires a target claim to have no owner yet: CDI's
// DataVolume becomes its controller, and no migration owns it, so that
// no migration's deletion takes the VM's disk.
func (f *walkFixture) requireUnowned(obj metav1.Object) {
	f.t.Helper()
	require.Empty(f.t, obj.GetOwnerReferences(), obj.GetName())
	assert.Equal(f.t, walkUID, obj.GetLabels()[v1alpha1.LabelMigrationUID], "%s: tied to the migration by its label", obj.GetName())
}

// powerState reads the source VM's power state from vcsim with a client
// of the test's own.
func (f *walkFixture) powerState() types.VirtualMachinePowerState {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(f.ctx, 20*time.Second)
	defer cancel()
	c, err := govmomi.NewClient(ctx, f.vcsimURL, true)
	require.NoError(f.t, err)
	defer func() { _ = c.Logout(ctx) }()
	vm, err := find.NewFinder(c.Client).VirtualMachine(ctx, f.srcVM)
	require.NoError(f.t, err)
	state, err := vm.PowerState(ctx)
	require.NoError(f.t, err)
	return state
}

// evidence returns what status recorded for a phase.
func evidence(m *v1alpha1.VirtualMachineMigration, p v1alpha1.Phase) string {
	for _, e := range m.Status.Evidence {
		if e.Phase == p {
			return e.Observed
		}
	}
	return ""
}

func conditionSummary(m *v1alpha1.VirtualMachineMigration) string {
	var parts []string
	for _, c := range m.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message))
	}
	if e := m.Status.LastError; e != nil {
		parts = append(parts, fmt.Sprintf("lastError %s/%s: %s", e.Phase, e.Reason, e.Message))
	}
	return strings.Join(parts, "; ")
}

// The test plays the Job controller and the kubelet.

// finishJob marks a Job finished the way the Job controller does, with a
// pod whose container terminated with message.
func (f *walkFixture) finishJob(name, container string, succeeded bool, message string) {
	f.t.Helper()
	jobs := f.kube.BatchV1().Jobs(walkNamespace)
	job, err := jobs.Get(f.ctx, name, metav1.GetOptions{})
	require.NoError(f.t, err)
	podLabels := map[string]string{"batch.kubernetes.io/job-name": name, "job-name": name}
	for k, v := range job.Spec.Template.Labels {
		podLabels[k] = v
	}
	exit, phase := int32(0), corev1.PodSucceeded
	cond := batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}
	if !succeeded {
		exit, phase = 1, corev1.PodFailed
		cond = batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name + "-x7k2p", Namespace: walkNamespace, Labels: podLabels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))},
		},
		Spec: job.Spec.Template.Spec,
		Status: corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{
			Name:  container,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Message: message}},
		}}},
	}
	_, err = f.kube.CoreV1().Pods(walkNamespace).Create(f.ctx, pod, metav1.CreateOptions{})
	require.NoError(f.t, err)
	now := metav1.NewTime(f.clock.Now())
	cond.LastTransitionTime = now
	job.Status.Conditions = append(job.Status.Conditions, cond)
	job.Status.StartTime = &now
	if succeeded {
		job.Status.Succeeded, job.Status.CompletionTime = 1, &now
	} else {
		job.Status.Failed = 1
	}
	_, err = jobs.UpdateStatus(f.ctx, job, metav1.UpdateOptions{})
	require.NoError(f.t, err)
}

// transferResult is the vm-transfer result the pod writes as its
// termination message: every disk of status.disks copied, or a failure.
func transferResult(t *testing.T, m *v1alpha1.VirtualMachineMigration, failReason string) string {
	t.Helper()
	res := wire.Result{Kind: wire.KindResult, Succeeded: failReason == ""}
	if failReason != "" {
		res.Reason, res.Error = failReason, "reading disk 2000 from the datastore: connection reset by peer"
	}
	for _, d := range m.Status.Disks {
		dr := wire.DiskResult{Key: d.Key, Bytes: d.CapacityBytes, DurationSeconds: 1.5}
		if failReason == "" {
			dr.SHA256 = fmt.Sprintf("%064x", d.Key)
		} else {
			dr.Bytes = d.CapacityBytes / 2
		}
		res.Disks = append(res.Disks, dr)
	}
	data, err := json.Marshal(res)
	require.NoError(t, err)
	return string(data) + "\n"
}

// inspection is a virt-v2v inspection document, as the conversion pod
// writes it as its termination message.
const inspection = `<?xml version="1.0"?>
<v2v-inspection>
  <operatingsystem>
    <name>linux</name>
    <distro>rhel</distro>
    <major_version>9</major_version>
    <minor_version>4</minor_version>
    <product_name>Red Hat Enterprise Linux 9.4 (Plow)</product_name>
  </operatingsystem>
</v2v-inspection>
`

// setDataVolumePhases plays CDI.
func (f *walkFixture) setDataVolumePhases(phase cdiv1.DataVolumePhase, progress string) {
	f.t.Helper()
	api := f.cdi.CdiV1beta1().DataVolumes(walkNamespace)
	list, err := api.List(f.ctx, metav1.ListOptions{})
	require.NoError(f.t, err)
	require.NotEmpty(f.t, list.Items)
	for i := range list.Items {
		dv := &list.Items[i]
		if phase == cdiv1.Succeeded {
			// CDI adopts the claim before the DataVolume succeeds.
			require.NoError(f.t, builders.AdoptClaim(f.ctx, f.kube, dv))
		}
		dv.Status.Phase, dv.Status.Progress = phase, cdiv1.DataVolumeProgress(progress)
		_, err := api.UpdateStatus(f.ctx, dv, metav1.UpdateOptions{})
		require.NoError(f.t, err)
	}
}

// setVMI plays KubeVirt: the VM's instance exists in this phase.
func (f *walkFixture) setVMI(name string, phase kubevirtv1.VirtualMachineInstancePhase) {
	f.t.Helper()
	api := f.kv.KubevirtV1().VirtualMachineInstances(walkNamespace)
	vm, err := f.kv.KubevirtV1().VirtualMachines(walkNamespace).Get(f.ctx, name, metav1.GetOptions{})
	require.NoError(f.t, err)
	vmi, err := api.Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		vmi = &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: walkNamespace, Labels: vm.Spec.Template.ObjectMeta.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(vm, kubevirtv1.SchemeGroupVersion.WithKind("VirtualMachine"))},
		}}
		vmi, err = api.Create(f.ctx, vmi, metav1.CreateOptions{})
		require.NoError(f.t, err)
	}
	vmi.Status.Phase = phase
	_, err = api.Update(f.ctx, vmi, metav1.UpdateOptions{})
	require.NoError(f.t, err)
}

// writeTransferProgress plays vm-transfer's progress report into its
// ConfigMap: half of every disk copied.
func (f *walkFixture) writeTransferProgress(m *v1alpha1.VirtualMachineMigration, attempt int32) {
	f.t.Helper()
	p := wire.Progress{Kind: wire.KindProgress, Time: f.clock.Now()}
	for _, d := range m.Status.Disks {
		p.Disks = append(p.Disks, wire.DiskProgress{Key: d.Key, State: wire.StateCopying,
			BytesDone: d.CapacityBytes / 2, TotalBytes: d.CapacityBytes, RateBytesPerSecond: 1 << 20})
	}
	data, err := json.Marshal(p)
	require.NoError(f.t, err)
	api := f.kube.CoreV1().ConfigMaps(walkNamespace)
	cm, err := api.Get(f.ctx, naming.TransferProgressConfigMap(walkName, attempt), metav1.GetOptions{})
	require.NoError(f.t, err)
	cm.Data = map[string]string{wire.ConfigMapKeyProgress: string(data)}
	_, err = api.Update(f.ctx, cm, metav1.UpdateOptions{})
	require.NoError(f.t, err)
}

// stagingChildren are the objects of the transfer of attempt 1 and the
// staging claims of m's disks.
func transferChildren(m *v1alpha1.VirtualMachineMigration, attempt int32) []string {
	var out []string
	for _, d := range m.Status.Disks {
		out = append(out, "PersistentVolumeClaim/"+d.StagingClaim)
	}
	access := naming.TransferAccess(walkName, attempt)
	return append(out,
		"ConfigMap/"+naming.TransferSpecConfigMap(walkName, attempt),
		"ConfigMap/"+naming.TransferProgressConfigMap(walkName, attempt),
		"Job/"+naming.TransferJob(walkName, attempt),
		"ServiceAccount/"+access, "Role/"+access, "RoleBinding/"+access,
	)
}

// walk drives the migration from Pending towards Succeeded, asserting after
// every sync. It stops, returning true, at the first checkpoint for which
// stop returns true; the checkpoints sit where the phase's own objects
// exist and the migration waits on its children.
func (f *walkFixture) walk(opts walkOptions, stop func(v1alpha1.Phase) bool) bool {
	t := f.t
	t.Helper()
	if stop == nil {
		stop = func(v1alpha1.Phase) bool { return false }
	}

	// Pending: status initialised and the finalizer added.
	m := f.syncTo(v1alpha1.PhasePending)
	assert.Equal(t, []string{"update virtualmachinemigrations/status", "patch virtualmachinemigrations"}, f.writes)
	assert.Contains(t, m.Finalizers, v1alpha1.FinalizerName)
	require.NotNil(t, m.Status.StartTime)
	assert.True(t, m.Status.StartTime.Time.Equal(builders.T0))
	f.requireChildren("Pending")
	if stop(v1alpha1.PhasePending) {
		return true
	}

	m = f.syncTo(v1alpha1.PhaseValidating)
	assert.Equal(t, "finalizer set and status initialised", evidence(m, v1alpha1.PhasePending))
	if stop(v1alpha1.PhaseValidating) {
		return true
	}

	// Validating reads the inventory from vcsim; the spec asks for approval.
	m = f.syncTo(v1alpha1.PhaseAwaitingApproval)
	require.NotNil(t, m.Status.Source)
	assert.Equal(t, f.srcVM, m.Status.Source.Name)
	assert.NotEmpty(t, m.Status.Source.MoRef)
	require.NotEmpty(t, m.Status.Source.Disks)
	require.NotNil(t, m.Status.Target)
	target := m.Status.Target.Name
	assert.Equal(t, naming.DNS1123Label(f.srcVM), target)
	assert.Contains(t, evidence(m, v1alpha1.PhaseValidating), "found "+f.srcVM)
	assert.Equal(t, vsphereOn, f.powerState(), "validation does not touch the source")
	f.requireChildren("AwaitingApproval")
	cond := meta.FindStatusCondition(m.Status.Conditions, statemachine.ConditionApprovalRequired)
	require.NotNil(t, cond)
	assert.Equal(t, metav1.ConditionTrue, cond.Status)
	// The next sync records the wait (Progressing false), the one after
	// it finds nothing to write.
	m = f.syncTo(v1alpha1.PhaseAwaitingApproval)
	cond = meta.FindStatusCondition(m.Status.Conditions, statemachine.ConditionProgressing)
	require.NotNil(t, cond)
	assert.Equal(t, metav1.ConditionFalse, cond.Status)
	assert.Equal(t, statemachine.ReasonAwaitingApproval, cond.Reason)
	f.unchangedSyncWritesNothing("AwaitingApproval")
	if stop(v1alpha1.PhaseAwaitingApproval) {
		return true
	}

	// A person approves. The approval is a spec change (a new generation),
	// so the source is validated again before the cutover.
	f.updateMigration(func(m *v1alpha1.VirtualMachineMigration) { m.Spec.Policy.Approved = true })
	m = f.syncTo(v1alpha1.PhaseValidating)
	m = f.syncTo(v1alpha1.PhaseQueued)
	assert.Equal(t, int64(2), m.Status.ObservedGeneration)
	assert.Equal(t, "cutover approved (spec.policy.approved)", evidence(m, v1alpha1.PhaseAwaitingApproval))
	cond = meta.FindStatusCondition(m.Status.Conditions, statemachine.ConditionApprovalRequired)
	require.NotNil(t, cond)
	assert.Equal(t, metav1.ConditionFalse, cond.Status)
	if stop(v1alpha1.PhaseQueued) {
		return true
	}

	// Queued: a slot is free; the cutover is committed.
	m = f.syncTo(v1alpha1.PhaseStoppingSource)
	require.NotNil(t, m.Status.AppliedSpec)
	require.NotNil(t, m.Status.SourceControl)
	assert.Equal(t, statemachine.PowerStateOn, m.Status.SourceControl.OriginalPowerState)
	assert.Contains(t, evidence(m, v1alpha1.PhaseQueued), "source poweredOn")
	assert.Equal(t, vsphereOn, f.powerState())

	// StoppingSource: the intent is written, then the source stopped.
	m = f.syncTo(v1alpha1.PhaseStoppingSource)
	sc := m.Status.SourceControl
	require.True(t, sc.ShutdownRequestedAt != nil || sc.PowerOffRequestedAt != nil, "the stop was recorded before the call")
	require.Eventually(t, func() bool { return f.powerState() == vsphereOff }, 10*time.Second, 50*time.Millisecond,
		"the controller stopped the source in vcsim")
	if stop(v1alpha1.PhaseStoppingSource) {
		return true
	}
	m = f.syncTo(v1alpha1.PhaseTransferringDisks)
	require.NotNil(t, m.Status.SourceControl.PoweredOffAt)
	assert.Regexp(t, "^source (shut down by the guest|powered off)$", evidence(m, v1alpha1.PhaseStoppingSource))
	f.requireChildren("entering TransferringDisks")

	// TransferringDisks: staging claims, then the transfer Job.
	m = f.syncTo(v1alpha1.PhaseTransferringDisks)
	require.Len(t, m.Status.Disks, len(m.Status.Source.Disks))
	var claims []string
	for _, d := range m.Status.Disks {
		claims = append(claims, "PersistentVolumeClaim/"+d.StagingClaim)
		pvc, err := f.kube.CoreV1().PersistentVolumeClaims(walkNamespace).Get(f.ctx, d.StagingClaim, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, d.DataVolume, d.StagingClaim, "written in place, into the claim its DataVolume adopts")
		f.requireUnowned(pvc)
		assert.Equal(t, "kubevirt", pvc.Annotations[pipeline.AnnotationContentType])
	}
	f.requireChildren("staging claims created", claims...)

	m = f.syncTo(v1alpha1.PhaseTransferringDisks)
	require.NotNil(t, m.Status.Transfer)
	assert.Equal(t, naming.TransferJob(walkName, 1), m.Status.Transfer.JobName)
	assert.Equal(t, int32(1), m.Status.Transfer.Attempt)
	f.requireChildren("transfer job created", transferChildren(m, 1)...)
	job, err := f.kube.BatchV1().Jobs(walkNamespace).Get(f.ctx, m.Status.Transfer.JobName, metav1.GetOptions{})
	require.NoError(t, err)
	f.requireOwnedByMigration(job)
	for _, name := range []string{naming.TransferSpecConfigMap(walkName, 1), naming.TransferProgressConfigMap(walkName, 1)} {
		cm, err := f.kube.CoreV1().ConfigMaps(walkNamespace).Get(f.ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		f.requireOwnedByMigration(cm)
	}

	// The Job runs: the status says so once, then nothing is written.
	m = f.syncTo(v1alpha1.PhaseTransferringDisks)
	f.unchangedSyncWritesNothing("transfer running")
	// Progress reported by the pod reaches status once the progress interval passed.
	f.writeTransferProgress(m, 1)
	f.clock.Step(statemachine.DefaultProgressInterval)
	m = f.syncTo(v1alpha1.PhaseTransferringDisks)
	for _, d := range m.Status.Disks {
		assert.Equal(t, d.CapacityBytes/2, d.BytesTransferred, "disk %d progress", d.Key)
	}
	assert.Equal(t, "35%", m.Status.Progress, "the overall progress: half the transfer's 70%")
	f.unchangedSyncWritesNothing("transfer progress recorded")
	if stop(v1alpha1.PhaseTransferringDisks) {
		return true
	}

	f.finishJob(m.Status.Transfer.JobName, pipeline.TransferContainer, true, transferResult(t, m, ""))
	f.clock.Step(time.Minute)
	m = f.syncTo(v1alpha1.PhaseConverting)
	require.NotNil(t, m.Status.Transfer.CompletedAt)
	for _, d := range m.Status.Disks {
		assert.Equal(t, d.CapacityBytes, d.BytesTransferred, "disk %d", d.Key)
		assert.Equal(t, fmt.Sprintf("%064x", d.Key), d.SHA256, "disk %d", d.Key)
		assert.NotNil(t, d.TransferredAt, "disk %d", d.Key)
	}
	assert.Contains(t, evidence(m, v1alpha1.PhaseTransferringDisks), "each verified by size and sha256")
	assert.Equal(t, "70%", m.Status.Progress, "the overall progress: the transfer's share")

	// Converting.
	children := append(transferChildren(m, 1), "Pod/"+naming.TransferJob(walkName, 1)+"-x7k2p")
	if opts.skipConversion {
		m = f.syncTo(v1alpha1.PhaseImporting)
		require.NotNil(t, m.Status.Conversion)
		assert.True(t, m.Status.Conversion.Skipped)
		assert.Equal(t, "conversion skipped (spec.conversion.skip)", evidence(m, v1alpha1.PhaseConverting))
		f.requireChildren("conversion skipped", children...)
	} else {
		m = f.syncTo(v1alpha1.PhaseConverting)
		require.NotNil(t, m.Status.Conversion)
		convJob, convCM := naming.ConversionJob(walkName, 1), naming.ConversionConfigMap(walkName, 1)
		assert.Equal(t, convJob, m.Status.Conversion.JobName)
		assert.Equal(t, convCM, m.Status.Conversion.ConfigMapName)
		children = append(children, "Job/"+convJob, "ConfigMap/"+convCM)
		f.requireChildren("conversion job created", children...)
		job, err := f.kube.BatchV1().Jobs(walkNamespace).Get(f.ctx, convJob, metav1.GetOptions{})
		require.NoError(t, err)
		f.requireOwnedByMigration(job)
		cm, err := f.kube.CoreV1().ConfigMaps(walkNamespace).Get(f.ctx, convCM, metav1.GetOptions{})
		require.NoError(t, err)
		f.requireOwnedByMigration(cm)
		assert.Contains(t, cm.Data[pipeline.DomainXMLKey], "<domain")

		m = f.syncTo(v1alpha1.PhaseConverting)
		f.unchangedSyncWritesNothing("conversion running")
		if stop(v1alpha1.PhaseConverting) {
			return true
		}
		f.finishJob(convJob, pipeline.ConversionContainer, true, builders.ConvertedChecksumLines(m)+inspection)
		m = f.syncTo(v1alpha1.PhaseImporting)
		require.NotNil(t, m.Status.Conversion.CompletedAt)
		assert.Equal(t, "rhel 9.4 (Red Hat Enterprise Linux 9.4 (Plow))", m.Status.Conversion.OperatingSystem)
		assert.Contains(t, evidence(m, v1alpha1.PhaseConverting), "converted the guest (rhel 9.4")
		children = append(children, "Pod/"+convJob+"-x7k2p")
	}

	// Importing: DataVolumes owned by nothing, adopting the claims the
	// disks were written and converted in.
	m = f.syncTo(v1alpha1.PhaseImporting)
	var dvNames []string
	for i, d := range m.Status.Disks {
		require.Equal(t, naming.DataVolume(target, i), d.DataVolume)
		dvNames = append(dvNames, "DataVolume/"+d.DataVolume)
		dv, err := f.cdi.CdiV1beta1().DataVolumes(walkNamespace).Get(f.ctx, d.DataVolume, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Empty(t, dv.OwnerReferences, "a DataVolume is owned by nothing until the VM adopts it")
		assert.NotNil(t, dv.Spec.Source.Blank, "nothing to import: the claim exists")
		assert.Equal(t, "true", dv.Annotations[pipeline.AnnotationAllowClaimAdoption])
		assert.Equal(t, d.StagingClaim, dv.Name, "the DataVolume adopts the claim of its name")
	}
	children = append(children, dvNames...)
	f.requireChildren("data volumes created", children...)
	f.setDataVolumePhases(cdiv1.ImportInProgress, "45.00%")
	m = f.syncTo(v1alpha1.PhaseImporting)
	for _, d := range m.Status.Disks {
		assert.Equal(t, string(cdiv1.ImportInProgress), d.ImportPhase)
	}
	f.unchangedSyncWritesNothing("import running")
	if stop(v1alpha1.PhaseImporting) {
		return true
	}
	f.setDataVolumePhases(cdiv1.Succeeded, "N/A")
	// The disks were written in place and hashed by the conversion (or,
	// skipped, by the transfer): no copy, so no read back.
	m = f.syncTo(v1alpha1.PhaseCreatingVM)
	assert.Nil(t, m.Status.Verification, "no verification Job")
	for _, d := range m.Status.Disks {
		require.NotNil(t, d.Checksums, "disk %d checksums", d.Key)
		assert.NotEmpty(t, d.Checksums.Converted, "disk %d converted checksum", d.Key)
		assert.Equal(t, d.Checksums.Converted, d.Checksums.Target, "disk %d: the target is the converted volume", d.Key)
		assert.NotNil(t, d.Checksums.VerifiedAt, "disk %d", d.Key)
	}
	f.requireChildren("data volumes populated", children...)
	assert.Contains(t, evidence(m, v1alpha1.PhaseImporting), fmt.Sprintf("%d DataVolumes populated; adopting the claims the transfer wrote and the conversion hashed, unread since, with no copy", len(m.Status.Disks)))

	// CreatingVM: the VM, owned by nothing, halted; then it adopts its disks.
	m = f.syncTo(v1alpha1.PhaseCreatingVM)
	vm, err := f.kv.KubevirtV1().VirtualMachines(walkNamespace).Get(f.ctx, target, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, vm.OwnerReferences, "the VM must outlive the migration")
	require.NotNil(t, vm.Spec.RunStrategy)
	assert.Equal(t, kubevirtv1.RunStrategyHalted, *vm.Spec.RunStrategy)
	children = append(children, "VirtualMachine/"+target)
	f.requireChildren("VM created", children...)

	m = f.syncTo(v1alpha1.PhaseCreatingVM)
	for _, d := range m.Status.Disks {
		dv, err := f.cdi.CdiV1beta1().DataVolumes(walkNamespace).Get(f.ctx, d.DataVolume, metav1.GetOptions{})
		require.NoError(t, err)
		owner := metav1.GetControllerOf(dv)
		require.NotNil(t, owner, "DataVolume %s adopted", d.DataVolume)
		assert.Equal(t, "VirtualMachine", owner.Kind)
		assert.Equal(t, vm.UID, owner.UID)
	}
	if stop(v1alpha1.PhaseCreatingVM) {
		return true
	}
	m = f.syncTo(v1alpha1.PhaseStarting)
	assert.Equal(t, vm.UID, m.Status.Target.UID)
	assert.Contains(t, evidence(m, v1alpha1.PhaseCreatingVM), string(vm.UID))

	// Starting: run strategy Always, then the VMI runs.
	m = f.syncTo(v1alpha1.PhaseStarting)
	vm, err = f.kv.KubevirtV1().VirtualMachines(walkNamespace).Get(f.ctx, target, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, kubevirtv1.RunStrategyAlways, *vm.Spec.RunStrategy)
	f.setVMI(target, kubevirtv1.Scheduling)
	children = append(children, "VirtualMachineInstance/"+target)
	m = f.syncTo(v1alpha1.PhaseStarting)
	assert.Equal(t, string(kubevirtv1.Scheduling), m.Status.Target.VMIPhase)
	f.unchangedSyncWritesNothing("VM starting")
	f.requireChildren("VM starting", children...)
	if stop(v1alpha1.PhaseStarting) {
		return true
	}
	f.setVMI(target, kubevirtv1.Running)
	m = f.syncTo(v1alpha1.PhaseCleaningUp)
	assert.Equal(t, string(kubevirtv1.Running), m.Status.Target.VMIPhase)
	// vcsim reports no guest address: nothing to compare.
	assert.Equal(t, "VirtualMachineInstance "+target+" running; network identity Unknown (GuestNetworkUnknown)", evidence(m, v1alpha1.PhaseStarting))
	if stop(v1alpha1.PhaseCleaningUp) {
		return true
	}

	// CleaningUp: staging objects go, the VM and its disks (DataVolumes
	// and the claims they adopted) stay.
	m = f.syncTo(v1alpha1.PhaseCleaningUp)
	kept := append(slices.Clone(dvNames), "VirtualMachine/"+target, "VirtualMachineInstance/"+target)
	for _, d := range m.Status.Disks {
		kept = append(kept, "PersistentVolumeClaim/"+d.StagingClaim)
	}
	slices.Sort(kept)
	f.requireChildren("staging deleted", kept...)
	m = f.syncTo(v1alpha1.PhaseSucceeded)
	assert.Equal(t, "staging objects deleted", evidence(m, v1alpha1.PhaseCleaningUp))
	require.NotNil(t, m.Status.CompletionTime)
	ready := meta.FindStatusCondition(m.Status.Conditions, statemachine.ConditionReady)
	require.NotNil(t, ready)
	assert.Equal(t, metav1.ConditionTrue, ready.Status)
	for _, p := range []v1alpha1.Phase{v1alpha1.PhasePending, v1alpha1.PhaseValidating, v1alpha1.PhaseAwaitingApproval, v1alpha1.PhaseQueued,
		v1alpha1.PhaseStoppingSource, v1alpha1.PhaseTransferringDisks, v1alpha1.PhaseConverting, v1alpha1.PhaseImporting,
		v1alpha1.PhaseCreatingVM, v1alpha1.PhaseStarting, v1alpha1.PhaseCleaningUp} {
		assert.NotEmpty(t, evidence(m, p), "evidence for %s", p)
	}
	f.unchangedSyncWritesNothing("Succeeded")
	f.requireChildren("Succeeded", kept...)
	assert.Equal(t, vsphereOff, f.powerState(), "a migrated source stays off")
	return false
}

const (
	vsphereOn  = types.VirtualMachinePowerStatePoweredOn
	vsphereOff = types.VirtualMachinePowerStatePoweredOff
)

// TestWalkThroughEveryPhase walks a migration from Pending to Succeeded,
// with and without the conversion, then deletes it: the migrated VM and its
// disks stay, the source stays off.
func TestWalkThroughEveryPhase(t *testing.T) {
	for name, opts := range map[string]walkOptions{
		"with conversion":    {},
		"conversion skipped": {skipConversion: true},
	} {
		t.Run(name, func(t *testing.T) {
			f := newWalkFixture(t, opts)
			require.False(t, f.walk(opts, nil))
			m := f.migration()
			target := m.Status.Target.Name

			f.deleteMigration()
			f.sync()
			f.sync()
			assert.Nil(t, f.migration(), "the finalizer of a finished migration is released once its VM is handed over")
			// The running instance keeps its template's labels until the
			// VM restarts; the VM and its disks are handed over.
			f.requireChildren("after deleting the finished migration", append(targetClaims(m), "VirtualMachineInstance/"+target)...)
			f.requireReleased(m)
			vm, err := f.kv.KubevirtV1().VirtualMachines(walkNamespace).Get(f.ctx, target, metav1.GetOptions{})
			require.NoError(t, err, "the migrated VM outlives its migration")
			assert.Empty(t, vm.OwnerReferences)
			assert.Equal(t, vsphereOff, f.powerState(), "deleting a finished migration does not restart the source")
		})
	}
}

// TestWalkCancelInEveryPhase deletes the migration at a checkpoint of every
// non-terminal phase the walk reaches: every child goes (a target VM that
// never ran too), the finalizer is released and a source the controller
// stopped is powered on again. A target VM that was started holds migrated
// data: it is halted and kept with its DataVolumes, and the TargetKept
// condition and event name them.
func TestWalkCancelInEveryPhase(t *testing.T) {
	phases := []v1alpha1.Phase{
		v1alpha1.PhasePending, v1alpha1.PhaseValidating, v1alpha1.PhaseAwaitingApproval, v1alpha1.PhaseQueued,
		v1alpha1.PhaseStoppingSource, v1alpha1.PhaseTransferringDisks, v1alpha1.PhaseConverting,
		v1alpha1.PhaseImporting, v1alpha1.PhaseCreatingVM, v1alpha1.PhaseStarting, v1alpha1.PhaseCleaningUp,
	}
	for _, phase := range phases {
		t.Run(string(phase), func(t *testing.T) {
			f := newWalkFixture(t, walkOptions{})
			require.True(t, f.walk(walkOptions{}, func(p v1alpha1.Phase) bool { return p == phase }), "the walk reaches %s", phase)
			m := f.migration()
			require.Equal(t, phase, m.Status.Phase)
			stopped := m.Status.SourceControl != nil &&
				(m.Status.SourceControl.ShutdownRequestedAt != nil || m.Status.SourceControl.PowerOffRequestedAt != nil)
			if stopped {
				require.Equal(t, vsphereOff, f.powerState())
			}
			t.Logf("cancelling in %s with children %v", phase, f.children())
			var kept, claims []string
			if started := m.Status.Target != nil && m.Status.Target.StartRequestedAt != nil; started {
				claims = targetClaims(m)
				kept = append(kept, "VirtualMachine/"+m.Status.Target.Name)
				for _, d := range m.Status.Disks {
					kept = append(kept, "DataVolume/"+d.DataVolume)
				}
			}

			f.deleteMigration()
			m = f.syncTo(v1alpha1.PhaseCancelling)
			source := "; the source VM was not stopped and is left as it is"
			if stopped {
				source = "; powering the source VM back on"
			}
			assert.True(t, slices.ContainsFunc(f.events, func(e string) bool {
				return strings.HasPrefix(e, "Normal "+statemachine.ReasonCancelled+" cancelling: ") && strings.HasSuffix(e, source)
			}), "want a %s event ending %q: %v", statemachine.ReasonCancelled, source, f.events)
			for i := 0; f.migration() != nil; i++ {
				require.Less(t, i, 20, "the migration is still there after 20 syncs: %s", conditionSummary(f.migration()))
				f.clock.Step(statemachine.DefaultPollInterval)
				f.sync()
			}
			f.requireChildren("after cancelling in "+string(phase), claims...)
			if kept != nil {
				f.requireReleased(m)
				vm, err := f.kv.KubevirtV1().VirtualMachines(walkNamespace).Get(f.ctx, m.Status.Target.Name, metav1.GetOptions{})
				require.NoError(t, err)
				assert.Equal(t, kubevirtv1.RunStrategyHalted, *vm.Spec.RunStrategy, "the kept target is halted")
				assert.True(t, slices.ContainsFunc(f.events, func(e string) bool { return strings.Contains(e, statemachine.ReasonTargetKept) }),
					"no TargetKept event: %v", f.events)
			}
			assert.Equal(t, vsphereOn, f.powerState(), "the source is powered on, as it was found")
			if stopped {
				assert.Contains(t, f.events, "Normal "+statemachine.ReasonSourceRestored+" the source VM is powered on again, as it was found")
			}
		})
	}
}

// TestWalkTransferRetryBudget fails every transfer attempt: after the
// retry limit's new attempts the migration fails in TransferringDisks with
// the transfer's reason, and the source is powered on again.
func TestWalkTransferRetryBudget(t *testing.T) {
	limit := int32(2)
	opts := walkOptions{retryLimit: &limit}
	f := newWalkFixture(t, opts)
	require.True(t, f.walk(opts, func(p v1alpha1.Phase) bool { return p == v1alpha1.PhaseTransferringDisks }))
	m := f.migration()

	var jobs []string
	for attempt := int32(1); attempt <= limit+1; attempt++ {
		require.Equal(t, v1alpha1.PhaseTransferringDisks, m.Status.Phase)
		require.Equal(t, attempt, m.Status.Transfer.Attempt)
		name := naming.TransferJob(walkName, attempt)
		require.Equal(t, name, m.Status.Transfer.JobName)
		_, err := f.kube.BatchV1().Jobs(walkNamespace).Get(f.ctx, name, metav1.GetOptions{})
		require.NoError(t, err, "attempt %d has its Job", attempt)
		jobs = append(jobs, name)
		f.finishJob(name, pipeline.TransferContainer, false, transferResult(t, m, "SourceReadFailed"))
		f.clock.Step(time.Minute)
		m = f.syncTo(map[bool]v1alpha1.Phase{true: v1alpha1.PhaseRollingBack, false: v1alpha1.PhaseTransferringDisks}[attempt == limit+1])
		if attempt <= limit {
			assert.Equal(t, attempt, m.Status.Retries)
			require.NotNil(t, m.Status.LastError)
			assert.Equal(t, statemachine.ReasonTransferFailed, m.Status.LastError.Reason)
			// The next attempt's Job is created under a new name.
			m = f.syncTo(v1alpha1.PhaseTransferringDisks)
		}
	}
	assert.Equal(t, limit, m.Status.Retries)
	for i := 0; m.Status.Phase != v1alpha1.PhaseFailed; i++ {
		require.Less(t, i, 10, "not Failed after 10 syncs: %s", conditionSummary(m))
		f.clock.Step(statemachine.DefaultPollInterval)
		f.sync()
		m = f.migration()
	}
	require.NotNil(t, m.Status.LastError)
	assert.Equal(t, v1alpha1.PhaseTransferringDisks, m.Status.LastError.Phase)
	assert.Equal(t, statemachine.ReasonTransferFailed, m.Status.LastError.Reason)
	assert.Contains(t, m.Status.LastError.Message, "SourceReadFailed")
	assert.Contains(t, m.Status.LastError.Message, fmt.Sprintf("%d of %d retries spent", limit, limit))
	failed := meta.FindStatusCondition(m.Status.Conditions, statemachine.ConditionFailed)
	require.NotNil(t, failed)
	assert.Equal(t, metav1.ConditionTrue, failed.Status)
	assert.Equal(t, statemachine.ReasonTransferFailed, failed.Reason)
	require.NotNil(t, m.Status.SourceControl.RestoredAt)
	assert.Equal(t, vsphereOn, f.powerState(), "the source is powered on again after the failure")
	transferJobs, err := f.kube.BatchV1().Jobs(walkNamespace).List(f.ctx, metav1.ListOptions{
		LabelSelector: v1alpha1.LabelComponent + "=" + v1alpha1.ComponentTransfer})
	require.NoError(t, err)
	assert.Len(t, transferJobs.Items, int(limit)+1, "one transfer Job per attempt exists")
	// Failed keeps the staging objects for inspection, and writes nothing more.
	for _, job := range jobs {
		assert.Contains(t, f.children(), "Job/"+job)
	}
	f.unchangedSyncWritesNothing("Failed")

	// Deleting the failed migration removes every child.
	f.deleteMigration()
	for i := 0; f.migration() != nil; i++ {
		require.Less(t, i, 10, "the failed migration is still there after 10 syncs")
		f.sync()
	}
	f.requireChildren("after deleting the failed migration")
	assert.Equal(t, vsphereOn, f.powerState())
}

// TestReconcilesReadOnlyFromCaches counts the API requests of reconciles
// in Validating, TransferringDisks and Converting: none is a read (every
// sync of the walk asserts that), and the writes are exactly the ones the
// decisions asked for: a status write, then the action's creates.
func TestReconcilesReadOnlyFromCaches(t *testing.T) {
	f := newWalkFixture(t, walkOptions{})
	require.True(t, f.walk(walkOptions{}, func(p v1alpha1.Phase) bool { return p == v1alpha1.PhaseStoppingSource }))
	for f.migrationPhase() != v1alpha1.PhaseTransferringDisks {
		f.sync()
	}
	type step struct {
		phase  v1alpha1.Phase
		writes []string
	}
	claims := slices.Repeat([]string{"create persistentvolumeclaims"}, len(f.migration().Status.Source.Disks))
	for _, want := range []step{
		{v1alpha1.PhaseTransferringDisks, append([]string{"update virtualmachinemigrations/status"}, claims...)},
		{v1alpha1.PhaseTransferringDisks, []string{"update virtualmachinemigrations/status", "create configmaps", "create serviceaccounts",
			"create roles", "create rolebindings", "create configmaps", "create jobs"}},
		{v1alpha1.PhaseTransferringDisks, []string{"update virtualmachinemigrations/status"}},
		{v1alpha1.PhaseTransferringDisks, nil},
	} {
		f.sync()
		assert.Equal(t, want.phase, f.migrationPhase())
		assert.Empty(t, f.uncachedReads())
		assert.Equal(t, want.writes, f.writes, "writes of a reconcile in %s", want.phase)
	}
	m := f.migration()
	f.finishJob(m.Status.Transfer.JobName, pipeline.TransferContainer, true, transferResult(t, m, ""))
	for _, want := range []step{
		{v1alpha1.PhaseConverting, []string{"update virtualmachinemigrations/status"}},
		{v1alpha1.PhaseConverting, []string{"update virtualmachinemigrations/status", "create configmaps", "create jobs"}},
		{v1alpha1.PhaseConverting, []string{"update virtualmachinemigrations/status"}},
		{v1alpha1.PhaseConverting, nil},
	} {
		f.sync()
		assert.Equal(t, want.phase, f.migrationPhase())
		assert.Empty(t, f.uncachedReads())
		assert.Equal(t, want.writes, f.writes, "writes of a reconcile in %s", want.phase)
	}
}

// syncUntil syncs m until its phase leaves the given ones (at most 20
// times) and returns it.
func (f *walkFixture) syncUntil(m *v1alpha1.VirtualMachineMigration, stay ...v1alpha1.Phase) *v1alpha1.VirtualMachineMigration {
	f.t.Helper()
	for i := 0; ; i++ {
		require.Less(f.t, i, 20, "%s still in %s after 20 syncs: %s", m.Name, f.get(m).Status.Phase, conditionSummary(f.get(m)))
		f.fixture.sync(m)
		if cur := f.get(m); !slices.Contains(stay, cur.Status.Phase) {
			return cur
		}
	}
}

// TestForeignNameBlocksBeforeTheSourceStops: a DataVolume the migration
// would create exists and is somebody else's: validation fails, naming
// it, and the source is never touched.
func TestForeignNameBlocksBeforeTheSourceStops(t *testing.T) {
	f := newWalkFixture(t, walkOptions{})
	target := naming.TargetName(f.srcVM)
	f.add(&cdiv1.DataVolume{ObjectMeta: builders.Foreign(walkNamespace, naming.DataVolume(target, 0))})
	m := f.syncUntil(f.m, "", v1alpha1.PhasePending, v1alpha1.PhaseValidating)
	require.Equal(t, v1alpha1.PhaseFailed, m.Status.Phase)
	require.NotNil(t, m.Status.LastError)
	assert.Equal(t, statemachine.ReasonPreflightFailed, m.Status.LastError.Reason)
	assert.Contains(t, m.Status.LastError.Message, "ChildNameTaken")
	assert.Contains(t, m.Status.LastError.Message, "DataVolume/"+naming.DataVolume(target, 0))
	assert.Nil(t, m.Status.SourceControl, "the source was never touched")
	assert.Equal(t, vsphereOn, f.powerState())
	// Nothing was rolled back, and no event says otherwise.
	assert.Contains(t, f.events, "Warning Failed Validating -> Failed: refused (PreflightFailed) before the source VM was touched: nothing to roll back")
	for _, e := range f.events {
		assert.NotContains(t, e, "RollingBack", "an event of a refusal before the stop")
	}
}

// TestSecondMigrationOfTheSameVMIsRefused: while one migration of a VM is
// in flight, a second one (another name, another target) is refused
// before any power operation, naming the first; a third that would create
// the same target VM from another source is refused too.
func TestSecondMigrationOfTheSameVMIsRefused(t *testing.T) {
	f := newWalkFixture(t, walkOptions{})
	first := f.syncUntil(f.m, "", v1alpha1.PhasePending, v1alpha1.PhaseValidating)
	require.Equal(t, v1alpha1.PhaseAwaitingApproval, first.Status.Phase)

	second := f.m.DeepCopy()
	second.Name, second.UID, second.Status = "web-01-again", "uid-again", v1alpha1.VirtualMachineMigrationStatus{}
	second.Spec.Target.Name = "another-name"
	f.add(second)
	got := f.syncUntil(second, "", v1alpha1.PhasePending, v1alpha1.PhaseValidating)
	require.Equal(t, v1alpha1.PhaseFailed, got.Status.Phase)
	require.NotNil(t, got.Status.LastError)
	assert.Equal(t, statemachine.ReasonSourceVMClaimed, got.Status.LastError.Reason)
	assert.Contains(t, got.Status.LastError.Message, walkNamespace+"/"+walkName)
	assert.Nil(t, got.Status.SourceControl, "the source was never touched")

	third := f.m.DeepCopy()
	third.Name, third.UID, third.Status = "other-vm", "uid-other", v1alpha1.VirtualMachineMigrationStatus{}
	third.Spec.Source.VM = v1alpha1.VMSelector{Name: "DC0_H0_VM1"}
	third.Spec.Target.Name = first.Status.Target.Name
	f.add(third)
	got = f.syncUntil(third, "", v1alpha1.PhasePending, v1alpha1.PhaseValidating)
	require.NotNil(t, got.Status.LastError, "phase %s", got.Status.Phase)
	assert.Equal(t, statemachine.ReasonTargetNameClaimed, got.Status.LastError.Reason)
	assert.Equal(t, vsphereOn, f.powerState())
}
