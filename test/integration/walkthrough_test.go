//go:build integration

package integration

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/soap"
	vimtypes "github.com/vmware/govmomi/vim25/types"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	cdiclient "platform.example/vm-migration/pkg/generated/cdi/clientset/versioned"
	kvclient "platform.example/vm-migration/pkg/generated/kubevirt/clientset/versioned"
	migclient "platform.example/vm-migration/pkg/generated/migration/clientset/versioned"
	"platform.example/vm-migration/pkg/manager"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/steps/pipeline"
	"platform.example/vm-migration/pkg/steps/source"
	"platform.example/vm-migration/pkg/transfer/wire"
	"platform.example/vm-migration/pkg/vsphere"
	"platform.example/vm-migration/test/builders"
	"platform.example/vm-migration/test/framework"
)

// The walkthrough runs the controller in-process (manager.Run) as its
// ServiceAccount, against the real API server and an in-process vCenter
// simulator. The test plays what cannot run here, through the real API:
// the Job controller and kubelet (pods with termination messages, Job
// conditions), CDI (DataVolume phases), KubeVirt (the VMI) and the garbage
// collector (pods of deleted Jobs, disks of a deleted VM).

const (
	walkVCUser     = "migrator@vsphere.local"
	walkVCPassword = "Walk-Through-Integration-1!"
	walkSourceVM   = "DC0_H0_VM0"
	walkMigration  = "walk-01"
	// walkQuiet is how long the controller is watched for writes while a
	// migration waits on a child; it re-syncs every walkPoll meanwhile.
	walkQuiet = 3 * time.Second
	walkPoll  = 300 * time.Millisecond
)

// walkEnv is one controller, one namespace and one simulated vCenter.
type walkEnv struct {
	t       *testing.T
	ns      string
	kube    kubernetes.Interface
	mig     migclient.Interface
	kv      kvclient.Interface
	cdi     cdiclient.Interface
	counter *requestCounter
	vcURL   *url.URL
	secret  *corev1.Secret
	// model is the vCenter simulator's, for tests that shape its VMs.
	model *simulator.Model

	mu sync.Mutex
	// writeLog lists the controller's writes with their response codes.
	writeLog []string
}

// recordWrites logs each write the controller makes and its answer.
func (w *walkEnv) recordWrites(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(r)
		if r.Method != http.MethodGet && !strings.Contains(r.URL.Path, "/events") {
			code := 0
			if resp != nil {
				code = resp.StatusCode
			}
			w.mu.Lock()
			w.writeLog = append(w.writeLog, fmt.Sprintf("%s %s %s -> %d", time.Now().Format("15:04:05.000"), r.Method, r.URL.Path, code))
			w.mu.Unlock()
		}
		return resp, err
	})
}

func (w *walkEnv) writesSince(n int) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.writeLog[n:])
}

func (w *walkEnv) writeCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.writeLog)
}

func newWalkEnv(t *testing.T) *walkEnv {
	t.Helper()
	return newWalkEnvWith(t, nil)
}

// newWalkEnvWith is newWalkEnv with the controller's options changed by
// tune (nil: as they are).
func newWalkEnvWith(t *testing.T, tune func(*manager.Options)) *walkEnv {
	t.Helper()
	env := framework.Env(t)
	saConfig, _ := controllerIdentity(t, env)
	w := &walkEnv{t: t, ns: env.Namespace(t), kube: env.Kubernetes(t), counter: &requestCounter{}}
	var err error
	w.mig, err = migclient.NewForConfig(env.Config())
	require.NoError(t, err, "creating the migration clientset")
	w.kv, err = kvclient.NewForConfig(env.Config())
	require.NoError(t, err, "creating the KubeVirt clientset")
	w.cdi, err = cdiclient.NewForConfig(env.Config())
	require.NoError(t, err, "creating the CDI clientset")

	model := simulator.VPX()
	require.NoError(t, model.Create(), "creating the vCenter simulator's inventory")
	model.Service.TLS = new(tls.Config)
	model.Service.Listen = &url.URL{User: url.UserPassword(walkVCUser, walkVCPassword)}
	server := model.Service.NewServer()
	t.Cleanup(func() { server.Close(); model.Remove() })
	w.vcURL, w.model = server.URL, model

	ctx := testContext(t)
	w.secret = builders.CredentialsSecret(w.ns, "vcenter-credentials", map[string]string{
		"username": walkVCUser, "password": walkVCPassword, "thumbprint": soap.ThumbprintSHA256(server.Certificate()),
		"endpoints": server.URL.Host,
	})
	w.secret.UID = ""
	_, err = w.kube.CoreV1().Secrets(w.ns).Create(ctx, w.secret, metav1.CreateOptions{})
	require.NoError(t, err, "creating the credentials Secret")
	// A storage class of this test's own, named by the spec, so that the
	// cluster's default is left alone for the other tests.
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: w.ns + "-standard"}, Provisioner: "example.com/csi"}
	_, err = w.kube.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{})
	require.NoError(t, err, "creating the StorageClass %s", sc.Name)
	t.Cleanup(func() {
		_ = w.kube.StorageV1().StorageClasses().Delete(context.Background(), sc.Name, metav1.DeleteOptions{})
	})

	cfg := rest.CopyConfig(saConfig)
	cfg.Wrap(w.counter.wrap)
	cfg.Wrap(w.recordWrites)
	cfg.UserAgent = "vm-migration-controller-walkthrough"
	opts := manager.Options{
		Namespace:          w.ns,
		Workers:            2,
		VSphereCallTimeout: 20 * time.Second,
		Decisions:          statemachine.Config{PollInterval: walkPoll, ProgressInterval: walkPoll, WaitInterval: time.Second},
		Pipeline: pipeline.Config{
			TransferImage: "registry.example/vm-migration:test", ConversionImage: "registry.example/virt-v2v:test",
			TransferProgress: true,
		},
	}
	if tune != nil {
		tune(&opts)
	}
	runController(t, cfg, opts)
	return w
}

// newWalkMigration is a migration of the simulator's first VM with every
// network mapped (the first to the pod network) and the test's storage
// class, waiting for approval.
func (w *walkEnv) newWalkMigration() *v1alpha1.VirtualMachineMigration {
	w.t.Helper()
	return w.newMigrationOf(walkMigration, walkSourceVM)
}

// newMigrationOf is newWalkMigration's migration named name, of the
// simulator's VM sourceVM.
func (w *walkEnv) newMigrationOf(name, sourceVM string) *v1alpha1.VirtualMachineMigration {
	w.t.Helper()
	m := builders.Migration(builders.Named(name), builders.InNamespace(w.ns), builders.WithoutUID,
		builders.SourceAt("https://"+w.vcURL.Host+"/sdk"), builders.Credentials(w.secret.Name), builders.SourceVM(sourceVM),
		builders.DefaultStorage(w.ns+"-standard"), builders.StagingClass(w.ns+"-standard"), builders.RequireApproval)
	// The networks are read with the source step itself, as the test's
	// own read-only look at the simulator.
	sessions := vsphere.NewSessionCache()
	defer func() { _ = sessions.Close(context.Background()) }()
	secrets := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	require.NoError(w.t, secrets.Add(w.secret), "adding the credentials Secret to the source step's cache")
	step := &source.Step{Secrets: corelisters.NewSecretLister(secrets), Sessions: sessions, CallTimeout: 20 * time.Second}
	obs := step.Observe(testContext(w.t), m, statemachine.SourceNeedInventory)
	require.Nil(w.t, obs.Error, "reading the simulator's VM")
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
	created, err := w.mig.MigrationV1alpha1().VirtualMachineMigrations(w.ns).Create(testContext(w.t), m, metav1.CreateOptions{})
	require.NoError(w.t, err, "creating the migration")
	return created
}

// get reads the migration; nil once it is gone.
func (w *walkEnv) get() *v1alpha1.VirtualMachineMigration {
	m, err := w.mig.MigrationV1alpha1().VirtualMachineMigrations(w.ns).Get(context.Background(), walkMigration, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return m
}

// waitFor polls the migration until ok holds, and returns it. A timeout
// fails the test with the status of the last poll.
func (w *walkEnv) waitFor(what string, ok func(*v1alpha1.VirtualMachineMigration) bool) *v1alpha1.VirtualMachineMigration {
	w.t.Helper()
	// Written by one poll at a time; read once EventuallyWithT succeeded,
	// after the last poll ended.
	var last *v1alpha1.VirtualMachineMigration
	require.EventuallyWithT(w.t, func(c *assert.CollectT) {
		m := w.get()
		last = m
		assert.True(c, ok(m), "%s; status: %s", what, describeStatus(m))
	}, 30*time.Second, 100*time.Millisecond, "%s: not within 30s", what)
	return last
}

// waitPhase waits for a phase and, when given, a further condition.
func (w *walkEnv) waitPhase(p v1alpha1.Phase, and func(*v1alpha1.VirtualMachineMigration) bool) *v1alpha1.VirtualMachineMigration {
	w.t.Helper()
	return w.waitFor("phase "+string(p), func(m *v1alpha1.VirtualMachineMigration) bool {
		return m != nil && m.Status.Phase == p && (and == nil || and(m))
	})
}

// quiet requires that the controller writes nothing but events for
// walkQuiet while the migration waits.
func (w *walkEnv) quiet(where string) {
	w.t.Helper()
	// Let the controller's informers catch up with its own last write
	// first: a sync on a stale cache may still try the same write and meet
	// a conflict (409), which is the cache's lag, not a write of an
	// unchanged sync.
	time.Sleep(time.Second)
	before := w.counter.snapshot()
	logged := w.writeCount()
	rv := w.get().ResourceVersion
	time.Sleep(walkQuiet)
	if l := w.writesSince(logged); len(l) > 0 {
		w.t.Logf("%s: writes: %s", where, strings.Join(l, "; "))
	}
	delta := w.counter.snapshot().since(before)
	writes := 0
	for k, v := range delta {
		if !strings.HasPrefix(k, "GET ") && !strings.HasPrefix(k, "WATCH ") && !strings.Contains(k, "/events") {
			writes += v
		}
	}
	assert.Zero(w.t, writes, "%s: writes in %s while nothing changed:\n%s", where, walkQuiet, delta)
	m := w.get()
	assert.Equal(w.t, rv, m.ResourceVersion, "%s: the migration changed while nothing else did: %s", where, describeStatus(m))
}

// children lists the objects labelled with the migration's UID, as
// "Kind/name", after playing the garbage collector.
func (w *walkEnv) children(uid types.UID) []string {
	w.t.Helper()
	w.collectGarbage()
	ctx := testContext(w.t)
	opts := metav1.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{v1alpha1.LabelMigrationUID: string(uid)}).String()}
	var out []string
	add := func(kind string, list runtime.Object, err error) {
		require.NoError(w.t, err, "listing %s", kind)
		items, err := meta.ExtractList(list)
		require.NoError(w.t, err, "the items of the %s list", kind)
		for _, it := range items {
			acc, _ := meta.Accessor(it)
			if acc.GetDeletionTimestamp() == nil {
				out = append(out, kind+"/"+acc.GetName())
			}
		}
	}
	l1, err := w.kube.CoreV1().PersistentVolumeClaims(w.ns).List(ctx, opts)
	add("PersistentVolumeClaim", l1, err)
	l2, err := w.kube.CoreV1().ConfigMaps(w.ns).List(ctx, opts)
	add("ConfigMap", l2, err)
	l3, err := w.kube.BatchV1().Jobs(w.ns).List(ctx, opts)
	add("Job", l3, err)
	l4, err := w.kube.CoreV1().Pods(w.ns).List(ctx, opts)
	add("Pod", l4, err)
	l5, err := w.kube.CoreV1().ServiceAccounts(w.ns).List(ctx, opts)
	add("ServiceAccount", l5, err)
	l6, err := w.kube.RbacV1().Roles(w.ns).List(ctx, opts)
	add("Role", l6, err)
	l7, err := w.kube.RbacV1().RoleBindings(w.ns).List(ctx, opts)
	add("RoleBinding", l7, err)
	l8, err := w.cdi.CdiV1beta1().DataVolumes(w.ns).List(ctx, opts)
	add("DataVolume", l8, err)
	l9, err := w.kv.KubevirtV1().VirtualMachines(w.ns).List(ctx, opts)
	add("VirtualMachine", l9, err)
	l10, err := w.kv.KubevirtV1().VirtualMachineInstances(w.ns).List(ctx, opts)
	add("VirtualMachineInstance", l10, err)
	sort.Strings(out)
	return out
}

// collectGarbage deletes what the garbage collector would: pods of Jobs
// that are gone or deleted in the foreground (and then the Job, by
// removing its foregroundDeletion finalizer), DataVolumes and VMIs of
// VMs that are gone. (The Job controller is not running, so the Jobs'
// pods are the test's.)
func (w *walkEnv) collectGarbage() {
	w.t.Helper()
	ctx := testContext(w.t)
	jobs, err := w.kube.BatchV1().Jobs(w.ns).List(ctx, metav1.ListOptions{})
	require.NoError(w.t, err, "listing Jobs")
	pods, err := w.kube.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{})
	require.NoError(w.t, err, "listing Pods")
	live := func(uid types.UID) bool {
		return slices.ContainsFunc(jobs.Items, func(j batchv1.Job) bool { return j.UID == uid && j.DeletionTimestamp == nil })
	}
	for _, p := range pods.Items {
		if o := metav1.GetControllerOf(&p); o != nil && o.Kind == "Job" && !live(o.UID) {
			_ = w.kube.CoreV1().Pods(w.ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptrTo(int64(0))})
		}
	}
	for _, j := range jobs.Items {
		if j.DeletionTimestamp != nil && slices.Contains(j.Finalizers, metav1.FinalizerDeleteDependents) {
			patch := []byte(`{"metadata":{"finalizers":null,"resourceVersion":"` + j.ResourceVersion + `"}}`)
			_, _ = w.kube.BatchV1().Jobs(w.ns).Patch(ctx, j.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		}
	}
	vms, err := w.kv.KubevirtV1().VirtualMachines(w.ns).List(ctx, metav1.ListOptions{})
	require.NoError(w.t, err, "listing VirtualMachines")
	dvs, err := w.cdi.CdiV1beta1().DataVolumes(w.ns).List(ctx, metav1.ListOptions{})
	require.NoError(w.t, err, "listing DataVolumes")
	for _, dv := range dvs.Items {
		if o := metav1.GetControllerOf(&dv); o != nil && o.Kind == "VirtualMachine" &&
			!slices.ContainsFunc(vms.Items, func(vm kubevirtv1.VirtualMachine) bool { return vm.UID == o.UID }) {
			_ = w.cdi.CdiV1beta1().DataVolumes(w.ns).Delete(ctx, dv.Name, metav1.DeleteOptions{})
		}
	}
	vmis, err := w.kv.KubevirtV1().VirtualMachineInstances(w.ns).List(ctx, metav1.ListOptions{})
	require.NoError(w.t, err, "listing VirtualMachineInstances")
	for _, vmi := range vmis.Items {
		if !slices.ContainsFunc(vms.Items, func(vm kubevirtv1.VirtualMachine) bool { return vm.Name == vmi.Name }) {
			_ = w.kv.KubevirtV1().VirtualMachineInstances(w.ns).Delete(ctx, vmi.Name, metav1.DeleteOptions{})
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

// wantChildren requires exactly these children (sorted, as children
// lists them; none and an empty list alike).
func (w *walkEnv) wantChildren(where string, uid types.UID, want ...string) {
	w.t.Helper()
	sort.Strings(want)
	require.ElementsMatch(w.t, want, w.children(uid), "%s: children", where)
}

// wantReleased asserts that the target VM and DataVolumes of the deleted
// migration m exist, handed over: without the migration's labels (the
// VM's template too), annotated with the migration they came from.
func (w *walkEnv) wantReleased(m *v1alpha1.VirtualMachineMigration, target string, dataVolumes []string) {
	w.t.Helper()
	ctx := testContext(w.t)
	vm, err := w.kv.KubevirtV1().VirtualMachines(w.ns).Get(ctx, target, metav1.GetOptions{})
	require.NoError(w.t, err, "the kept VM %s", target)
	objs := []metav1.Object{vm}
	for _, name := range dataVolumes {
		dv, err := w.cdi.CdiV1beta1().DataVolumes(w.ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(w.t, err, "the kept DataVolume %s", name)
		objs = append(objs, dv)
	}
	for _, o := range objs {
		assert.NotContains(w.t, o.GetLabels(), v1alpha1.LabelMigrationUID, "%s: the deleted migration's label", o.GetName())
		assert.NotContains(w.t, o.GetLabels(), v1alpha1.LabelMigrationName, "%s: the deleted migration's label", o.GetName())
		assert.Equal(w.t, w.ns+"/"+m.Name, o.GetAnnotations()[v1alpha1.AnnotationMigratedBy], "%s: where it came from", o.GetName())
	}
	assert.NotContains(w.t, vm.Spec.Template.ObjectMeta.Labels, v1alpha1.LabelMigrationUID, "the kept VM's template")
	assert.Equal(w.t, walkSourceVM, vm.Annotations[v1alpha1.AnnotationSourceVM], "the kept VM's source")
}

// wantOwnedBy asserts a controller owner reference to the migration.
func (w *walkEnv) wantOwnedBy(obj metav1.Object, m *v1alpha1.VirtualMachineMigration) {
	w.t.Helper()
	o := metav1.GetControllerOf(obj)
	if !assert.NotNil(w.t, o, "%s: no controller owner, want the migration %s (%s)", obj.GetName(), m.Name, m.UID) {
		return
	}
	assert.Equal(w.t, "VirtualMachineMigration", o.Kind, "%s: controller owner %+v, want the migration %s (%s)", obj.GetName(), o, m.Name, m.UID)
	assert.Equal(w.t, m.Name, o.Name, "%s: controller owner %+v, want the migration %s (%s)", obj.GetName(), o, m.Name, m.UID)
	assert.Equal(w.t, m.UID, o.UID, "%s: controller owner %+v, want the migration %s (%s)", obj.GetName(), o, m.Name, m.UID)
}

// withSourceVM runs do with the source VM as the test's own client finds
// it (logged in to the vCenter simulator, logged out after).
func (w *walkEnv) withSourceVM(do func(ctx context.Context, vm *object.VirtualMachine)) {
	w.t.Helper()
	ctx := testContext(w.t)
	c, err := govmomi.NewClient(ctx, w.vcURL, true)
	require.NoError(w.t, err, "logging in to the vCenter simulator")
	defer func() { _ = c.Logout(ctx) }()
	vm, err := find.NewFinder(c.Client).VirtualMachine(ctx, walkSourceVM)
	require.NoError(w.t, err, "finding the source VM %s", walkSourceVM)
	do(ctx, vm)
}

// powerState reads the source VM's power state with the test's own client.
func (w *walkEnv) powerState() vimtypes.VirtualMachinePowerState {
	w.t.Helper()
	var state vimtypes.VirtualMachinePowerState
	w.withSourceVM(func(ctx context.Context, vm *object.VirtualMachine) {
		var err error
		state, err = vm.PowerState(ctx)
		require.NoError(w.t, err, "reading the source VM's power state")
	})
	return state
}

// finishJob plays the Job controller and kubelet for a Job that
// succeeded: a pod whose container terminated with message, and the Job's
// terminal conditions.
func (w *walkEnv) finishJob(name, container string, message string) {
	w.t.Helper()
	w.endJob(name, container, message, true)
}

// failJob plays them for a Job whose container failed with message.
func (w *walkEnv) failJob(name, container, message string) {
	w.t.Helper()
	w.endJob(name, container, message, false)
}

// endJob plays the Job controller and kubelet: a pod of the Job whose
// container terminated with message (exit code 0 when succeeded, else 1),
// and the Job's terminal conditions.
func (w *walkEnv) endJob(name, container, message string, succeeded bool) {
	w.t.Helper()
	ctx := testContext(w.t)
	// The controller writes the status that names the Job (its intent)
	// before it creates the Job: wait for the Job a moment.
	var job *batchv1.Job
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		job, err = w.kube.BatchV1().Jobs(w.ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil, nil
	})
	require.NoError(w.t, err, "waiting for job %s", name)
	podLabels := map[string]string{}
	for k, v := range job.Spec.Template.Labels {
		podLabels[k] = v
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name + "-p0d1", Namespace: w.ns, Labels: podLabels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))},
		},
		Spec: *job.Spec.Template.Spec.DeepCopy(),
	}
	pod, err = w.kube.CoreV1().Pods(w.ns).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(w.t, err, "creating the pod of job %s", name)
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	image := pod.Spec.Containers[0].Image
	phase, exit, reason := corev1.PodSucceeded, int32(0), "Completed"
	if !succeeded {
		phase, exit, reason = corev1.PodFailed, 1, "Error"
	}
	pod.Status = corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{
		Name: container, Image: image, ImageID: image,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: exit, Reason: reason, Message: message, StartedAt: now, FinishedAt: now}},
	}}}
	_, err = w.kube.CoreV1().Pods(w.ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	require.NoError(w.t, err, "updating the pod of job %s", name)
	job.Status.StartTime = &now
	if succeeded {
		job.Status.CompletionTime, job.Status.Succeeded = &now, 1
		job.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now, Reason: "CompletionsReached"},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now, Reason: "CompletionsReached"},
		}
	} else {
		job.Status.Failed = 1
		job.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now, Reason: "BackoffLimitExceeded"},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now, Reason: "BackoffLimitExceeded",
				Message: "Job has reached the specified backoff limit"},
		}
	}
	_, err = w.kube.BatchV1().Jobs(w.ns).UpdateStatus(ctx, job, metav1.UpdateOptions{})
	require.NoError(w.t, err, "ending job %s", name)
}

// setDataVolumesSucceeded plays CDI: each DataVolume adopts the claim of
// its name (bound), then succeeds.
func (w *walkEnv) setDataVolumesSucceeded(names []string) {
	w.t.Helper()
	ctx := testContext(w.t)
	for _, name := range names {
		dv, err := w.cdi.CdiV1beta1().DataVolumes(w.ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(w.t, err, "getting DataVolume %s", name)
		require.NoError(w.t, builders.AdoptClaim(ctx, w.kube, dv), "CDI adopts the claim before the DataVolume succeeds")
		dv.Status.Phase, dv.Status.Progress = cdiv1.Succeeded, "100.0%"
		_, err = w.cdi.CdiV1beta1().DataVolumes(w.ns).UpdateStatus(ctx, dv, metav1.UpdateOptions{})
		require.NoError(w.t, err, "marking DataVolume %s Succeeded", name)
	}
}

// importAll plays CDI for every disk of m (each DataVolume adopts its
// claim and succeeds) and waits for the migration to start its VM.
func (w *walkEnv) importAll(m *v1alpha1.VirtualMachineMigration) *v1alpha1.VirtualMachineMigration {
	w.t.Helper()
	var names []string
	for _, d := range m.Status.Disks {
		names = append(names, d.DataVolume)
	}
	w.setDataVolumesSucceeded(names)
	return w.waitPhase(v1alpha1.PhaseStarting, progressing("waiting for VirtualMachine "))
}

// runVMI plays KubeVirt: the VM's instance is created in the given phase.
func (w *walkEnv) runVMI(name string, phase kubevirtv1.VirtualMachineInstancePhase) {
	w.t.Helper()
	ctx := testContext(w.t)
	vm, err := w.kv.KubevirtV1().VirtualMachines(w.ns).Get(ctx, name, metav1.GetOptions{})
	require.NoError(w.t, err, "getting VirtualMachine %s", name)
	vmi := &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns, Labels: vm.Spec.Template.ObjectMeta.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(vm, kubevirtv1.SchemeGroupVersion.WithKind("VirtualMachine"))}},
		Spec:   vm.Spec.Template.Spec,
		Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: phase},
	}
	_, err = w.kv.KubevirtV1().VirtualMachineInstances(w.ns).Create(ctx, vmi, metav1.CreateOptions{})
	require.NoError(w.t, err, "creating VirtualMachineInstance %s", name)
}

// transferDone is the vm-transfer result of a successful copy of every disk.
func transferDone(t *testing.T, m *v1alpha1.VirtualMachineMigration) string {
	res := wire.Result{Kind: wire.KindResult, Succeeded: true}
	for _, d := range m.Status.Disks {
		res.Disks = append(res.Disks, wire.DiskResult{Key: d.Key, Bytes: d.CapacityBytes, SHA256: fmt.Sprintf("%064x", d.Key)})
	}
	b, err := json.Marshal(res)
	require.NoError(t, err, "encoding the transfer result")
	return string(b)
}

const walkInspection = `<v2v-inspection><operatingsystem><name>linux</name><distro>rhel</distro>` +
	`<major_version>9</major_version><minor_version>4</minor_version></operatingsystem></v2v-inspection>`

// progressing holds once the Progressing condition's message starts with
// prefix: the controller recorded that it waits on a child.
func progressing(prefix string) func(*v1alpha1.VirtualMachineMigration) bool {
	return func(m *v1alpha1.VirtualMachineMigration) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, statemachine.ConditionProgressing)
		return c != nil && strings.HasPrefix(c.Message, prefix)
	}
}

func walkEvidence(m *v1alpha1.VirtualMachineMigration, p v1alpha1.Phase) string {
	for _, e := range m.Status.Evidence {
		if e.Phase == p {
			return e.Observed
		}
	}
	return ""
}

// TestWalkthroughAgainstAPIServer walks a migration through every phase
// with the controller running against the real API server, then deletes
// it; the migrated VM and its disks stay, the source stays off.
func TestWalkthroughAgainstAPIServer(t *testing.T) {
	w := newWalkEnv(t)
	ctx := testContext(t)
	m := w.newWalkMigration()
	uid := m.UID

	m = w.waitPhase(v1alpha1.PhaseAwaitingApproval, func(m *v1alpha1.VirtualMachineMigration) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, statemachine.ConditionProgressing)
		return c != nil && c.Reason == statemachine.ReasonAwaitingApproval
	})
	assert.Contains(t, m.Finalizers, v1alpha1.FinalizerName, "no finalizer")
	require.NotNil(t, m.Status.Source, "no inventory recorded: %s", describeStatus(m))
	require.Equal(t, walkSourceVM, m.Status.Source.Name, "the inventoried source VM: %s", describeStatus(m))
	require.NotNil(t, m.Status.Target, "no target recorded: %s", describeStatus(m))
	target := m.Status.Target.Name
	w.wantChildren("AwaitingApproval", uid)
	w.quiet("AwaitingApproval")
	require.Equal(t, vimtypes.VirtualMachinePowerStatePoweredOn, w.powerState(), "the source's power state before the cutover")

	patch := []byte(`{"spec":{"policy":{"approved":true}}}`)
	_, err := w.mig.MigrationV1alpha1().VirtualMachineMigrations(w.ns).Patch(ctx, walkMigration, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err, "approving the migration")
	m = w.waitPhase(v1alpha1.PhaseTransferringDisks, progressing("transferring disks"))
	require.Equal(t, vimtypes.VirtualMachinePowerStatePoweredOff, w.powerState(), "the source's power state during the transfer")
	assert.NotEmpty(t, walkEvidence(m, v1alpha1.PhaseAwaitingApproval), "no evidence of the approval")
	var staging []string
	for _, d := range m.Status.Disks {
		staging = append(staging, "PersistentVolumeClaim/"+d.StagingClaim)
		pvc, err := w.kube.CoreV1().PersistentVolumeClaims(w.ns).Get(ctx, d.StagingClaim, metav1.GetOptions{})
		require.NoError(t, err, "getting the target claim %s", d.StagingClaim)
		assert.Equal(t, d.DataVolume, d.StagingClaim, "written in place, into the claim its DataVolume adopts")
		assert.Nil(t, metav1.GetControllerOf(pvc), "%s: controlled, which CDI's adoption refuses", pvc.Name)
		assert.Empty(t, pvc.OwnerReferences, "%s: the VM's disk, owned by no migration (its deletion must never take it)", pvc.Name)
	}
	tjob := naming.TransferJob(walkMigration, 1)
	access := tjob
	transferObjs := append(slices.Clone(staging), "Job/"+tjob, "ConfigMap/"+naming.TransferSpecConfigMap(walkMigration, 1),
		"ConfigMap/"+tjob+"-progress", "ServiceAccount/"+access, "Role/"+access, "RoleBinding/"+access)
	w.wantChildren("transfer running", uid, transferObjs...)
	job, err := w.kube.BatchV1().Jobs(w.ns).Get(ctx, tjob, metav1.GetOptions{})
	require.NoError(t, err, "getting the transfer job %s", tjob)
	w.wantOwnedBy(job, m)
	w.quiet("transfer running")

	w.finishJob(tjob, pipeline.TransferContainer, transferDone(t, m))
	cjob := naming.ConversionJob(walkMigration, 1)
	m = w.waitPhase(v1alpha1.PhaseConverting, func(m *v1alpha1.VirtualMachineMigration) bool {
		_, err := w.kube.BatchV1().Jobs(w.ns).Get(ctx, cjob, metav1.GetOptions{})
		return err == nil
	})
	for _, d := range m.Status.Disks {
		assert.NotEmpty(t, d.SHA256, "disk %d: no transfer evidence (sha256): %+v", d.Key, d)
		assert.Equal(t, d.CapacityBytes, d.BytesTransferred, "disk %d: no transfer evidence (bytes transferred, want the capacity): %+v", d.Key, d)
	}
	w.finishJob(cjob, pipeline.ConversionContainer, builders.ConvertedChecksumLines(m)+walkInspection)

	m = w.waitPhase(v1alpha1.PhaseImporting, progressing("importing disks: 0 of"))
	if assert.NotNil(t, m.Status.Conversion, "no conversion evidence") {
		assert.True(t, strings.HasPrefix(m.Status.Conversion.OperatingSystem, "rhel 9.4"),
			"conversion evidence %+v, want the operating system rhel 9.4...", m.Status.Conversion)
	}
	var dvNames, dvChildren []string
	for _, d := range m.Status.Disks {
		dvNames = append(dvNames, d.DataVolume)
		dvChildren = append(dvChildren, "DataVolume/"+d.DataVolume)
		dv, err := w.cdi.CdiV1beta1().DataVolumes(w.ns).Get(ctx, d.DataVolume, metav1.GetOptions{})
		require.NoError(t, err, "getting DataVolume %s", d.DataVolume)
		assert.Empty(t, dv.OwnerReferences, "DataVolume %s is owned before the VM adopts it", dv.Name)
	}
	w.quiet("import running")
	w.setDataVolumesSucceeded(dvNames)

	// Written in place and hashed by the conversion: nothing is read back.
	m = w.waitPhase(v1alpha1.PhaseStarting, progressing("waiting for VirtualMachine "+target+" to run"))
	assert.Nil(t, m.Status.Verification, "no verification Job: nothing was copied")
	for _, d := range m.Status.Disks {
		if assert.NotNil(t, d.Checksums, "disk %d: no checksums past the transfer", d.Key) {
			assert.Equal(t, d.Checksums.Converted, d.Checksums.Target, "disk %d: the target's checksum", d.Key)
			assert.NotNil(t, d.Checksums.VerifiedAt, "disk %d", d.Key)
		}
	}
	vm, err := w.kv.KubevirtV1().VirtualMachines(w.ns).Get(ctx, target, metav1.GetOptions{})
	require.NoError(t, err, "getting the target VM %s", target)
	assert.Empty(t, vm.OwnerReferences, "the VM has owners")
	assert.Equal(t, vm.UID, m.Status.Target.UID, "status.target.uid, want the VM's")
	for _, name := range dvNames {
		dv, err := w.cdi.CdiV1beta1().DataVolumes(w.ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err, "getting DataVolume %s", name)
		if o := metav1.GetControllerOf(dv); assert.NotNil(t, o, "DataVolume %s not adopted by the VM: %+v", name, dv.OwnerReferences) {
			assert.Equal(t, vm.UID, o.UID, "DataVolume %s not adopted by the VM: %+v", name, dv.OwnerReferences)
		}
	}
	w.quiet("VM starting")
	w.runVMI(target, kubevirtv1.Running)

	m = w.waitPhase(v1alpha1.PhaseSucceeded, nil)
	for _, p := range []v1alpha1.Phase{v1alpha1.PhasePending, v1alpha1.PhaseValidating, v1alpha1.PhaseAwaitingApproval,
		v1alpha1.PhaseQueued, v1alpha1.PhaseStoppingSource, v1alpha1.PhaseTransferringDisks, v1alpha1.PhaseConverting,
		v1alpha1.PhaseImporting, v1alpha1.PhaseCreatingVM, v1alpha1.PhaseStarting, v1alpha1.PhaseCleaningUp} {
		assert.NotEmpty(t, walkEvidence(m, p), "no evidence for %s", p)
	}
	var claims []string
	for _, name := range dvNames {
		claims = append(claims, "PersistentVolumeClaim/"+name)
	}
	kept := append(slices.Concat(dvChildren, claims), "VirtualMachine/"+target, "VirtualMachineInstance/"+target)
	w.wantChildren("Succeeded", uid, kept...)
	w.quiet("Succeeded")

	require.NoError(t, w.mig.MigrationV1alpha1().VirtualMachineMigrations(w.ns).Delete(ctx, walkMigration, metav1.DeleteOptions{}),
		"deleting the finished migration")
	w.waitFor("the finished migration is deleted", func(m *v1alpha1.VirtualMachineMigration) bool { return m == nil })
	// Handed over: the running instance keeps its template's labels, the
	// VM's disks' claims theirs (the controller may not patch claims).
	w.wantChildren("after deleting the finished migration", uid, append(claims, "VirtualMachineInstance/"+target)...)
	w.wantReleased(m, target, dvNames)
	assert.Equal(t, vimtypes.VirtualMachinePowerStatePoweredOff, w.powerState(), "the source's power state after the migration; it stays off")
}

// TestWalkthroughCancelAgainstAPIServer deletes a migration while its VM
// starts: the started VM holds migrated data, so it is halted and kept with
// its DataVolumes, every other child goes, the finalizer is released and
// the source is powered on again.
func TestWalkthroughCancelAgainstAPIServer(t *testing.T) {
	w := newWalkEnv(t)
	ctx := testContext(t)
	m := w.newWalkMigration()
	uid := m.UID
	w.waitPhase(v1alpha1.PhaseAwaitingApproval, nil)
	patch := []byte(`{"spec":{"policy":{"approved":true}}}`)
	_, err := w.mig.MigrationV1alpha1().VirtualMachineMigrations(w.ns).Patch(ctx, walkMigration, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err, "approving the migration")
	m = w.waitPhase(v1alpha1.PhaseTransferringDisks, func(m *v1alpha1.VirtualMachineMigration) bool {
		_, err := w.kube.BatchV1().Jobs(w.ns).Get(ctx, naming.TransferJob(walkMigration, 1), metav1.GetOptions{})
		return err == nil
	})
	w.finishJob(naming.TransferJob(walkMigration, 1), pipeline.TransferContainer, transferDone(t, m))
	w.waitPhase(v1alpha1.PhaseConverting, func(m *v1alpha1.VirtualMachineMigration) bool {
		_, err := w.kube.BatchV1().Jobs(w.ns).Get(ctx, naming.ConversionJob(walkMigration, 1), metav1.GetOptions{})
		return err == nil
	})
	w.finishJob(naming.ConversionJob(walkMigration, 1), pipeline.ConversionContainer, builders.ConvertedChecksumLines(m)+walkInspection)
	m = w.waitPhase(v1alpha1.PhaseImporting, func(m *v1alpha1.VirtualMachineMigration) bool {
		dvs, err := w.cdi.CdiV1beta1().DataVolumes(w.ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(dvs.Items) == len(m.Status.Disks)
	})
	var dvNames []string
	for _, d := range m.Status.Disks {
		dvNames = append(dvNames, d.DataVolume)
	}
	w.setDataVolumesSucceeded(dvNames)
	m = w.waitPhase(v1alpha1.PhaseStarting, func(m *v1alpha1.VirtualMachineMigration) bool {
		vm, err := w.kv.KubevirtV1().VirtualMachines(w.ns).Get(ctx, m.Status.Target.Name, metav1.GetOptions{})
		return err == nil && vm.Spec.RunStrategy != nil && *vm.Spec.RunStrategy == kubevirtv1.RunStrategyAlways
	})
	// Scheduling, not Running: the migration must still be starting when
	// it is deleted, or it would succeed first and keep its VM.
	w.runVMI(m.Status.Target.Name, kubevirtv1.Scheduling)
	t.Logf("cancelling with children %v", w.children(uid))
	require.Equal(t, vimtypes.VirtualMachinePowerStatePoweredOff, w.powerState(), "the source's power state before the cancellation")

	require.NoError(t, w.mig.MigrationV1alpha1().VirtualMachineMigrations(w.ns).Delete(ctx, walkMigration, metav1.DeleteOptions{}),
		"deleting the migration")
	target := m.Status.Target.Name
	// Play KubeVirt: the halted VM's instance stops.
	require.Eventually(t, func() bool {
		vm, err := w.kv.KubevirtV1().VirtualMachines(w.ns).Get(ctx, target, metav1.GetOptions{})
		return err == nil && vm.Spec.RunStrategy != nil && *vm.Spec.RunStrategy == kubevirtv1.RunStrategyHalted
	}, 30*time.Second, 100*time.Millisecond, "the started target VM was not halted within 30s")
	require.NoError(t, w.kv.KubevirtV1().VirtualMachineInstances(w.ns).Delete(ctx, target, metav1.DeleteOptions{}),
		"deleting the VirtualMachineInstance %s", target)
	w.waitFor("the cancelled migration is deleted", func(m *v1alpha1.VirtualMachineMigration) bool { return m == nil })
	var claims []string
	for _, name := range dvNames {
		claims = append(claims, "PersistentVolumeClaim/"+name)
	}
	// The kept disks' claims keep their labels (the controller may not
	// patch claims); nothing else of the migration is left.
	w.wantChildren("after cancelling", uid, claims...)
	w.wantReleased(m, target, dvNames)
	assert.Equal(t, vimtypes.VirtualMachinePowerStatePoweredOn, w.powerState(), "the source's power state after the cancellation, want poweredOn as it was found")
}
