package pipeline

import (
	"fmt"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kubeinformers "k8s.io/client-go/informers"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	cdiinformers "platform.example/vm-migration/pkg/generated/cdi/informers/externalversions"
	kvinformers "platform.example/vm-migration/pkg/generated/kubevirt/informers/externalversions"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	cdilisters "platform.example/vm-migration/pkg/generated/cdi/listers/core/v1beta1"
	kvlisters "platform.example/vm-migration/pkg/generated/kubevirt/listers/core/v1"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/untrusted"
)

// Listers are the informer caches the step observes its children through.
// Every one of them holds only objects that carry the migration UID label
// (the controller's informer factories filter on it), so an observation
// never sees, and a delete never names, an object that is not a
// migration's.
type Listers struct {
	Jobs            batchlisters.JobLister
	Pods            corelisters.PodLister
	Claims          corelisters.PersistentVolumeClaimLister
	ConfigMaps      corelisters.ConfigMapLister
	ServiceAccounts corelisters.ServiceAccountLister
	Roles           rbaclisters.RoleLister
	RoleBindings    rbaclisters.RoleBindingLister
	DataVolumes     cdilisters.DataVolumeLister
	VMs             kvlisters.VirtualMachineLister
	VMIs            kvlisters.VirtualMachineInstanceLister
	// Caches are the caches under the listers, by resource name (as
	// ChildInformers names them): those indexed by IndexMigrationUID give
	// a migration's children without reading its whole namespace.
	Caches map[string]cache.Indexer
}

// IndexMigrationUID is the index of the child caches by the migration UID
// label: a reconcile reads its own children, not every object of its
// namespace (bench-scale: with thousands of migrations in a namespace,
// label-selector lists made each reconcile cost O(N)).
const IndexMigrationUID = "migration-uid"

// byMigrationUID indexes an object by its migration UID label.
func byMigrationUID(obj any) ([]string, error) {
	o, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil
	}
	if uid := o.GetLabels()[v1alpha1.LabelMigrationUID]; uid != "" {
		return []string{uid}, nil
	}
	return nil, nil
}

// indexByMigration adds IndexMigrationUID to an informer that lacks it.
// An informer that already runs refuses new indexes: its cache is then
// read by label selector (owned falls back).
func indexByMigration(informer cache.SharedIndexInformer) cache.SharedIndexInformer {
	if _, ok := informer.GetIndexer().GetIndexers()[IndexMigrationUID]; !ok {
		_ = informer.AddIndexers(cache.Indexers{IndexMigrationUID: byMigrationUID})
	}
	return informer
}

// owned returns m's children in the cache of resource: through
// IndexMigrationUID, or, in a cache without that index (an informer that
// already ran refuses new indexes), by m's UID label over its namespace.
func owned[T metav1.Object](s *Step, resource string, m *v1alpha1.VirtualMachineMigration) ([]T, error) {
	x := s.Listers.Caches[resource]
	if x == nil {
		return nil, fmt.Errorf("no cache of %s", resource)
	}
	objs, err := x.ByIndex(IndexMigrationUID, string(m.UID))
	if err != nil {
		objs = nil
		if err := cache.ListAllByNamespace(x, m.Namespace, ownSelector(m), func(o any) { objs = append(objs, o) }); err != nil {
			return nil, err
		}
	}
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(T); ok && t.GetNamespace() == m.Namespace {
			out = append(out, t)
		}
	}
	return out, nil
}

// ListersFrom takes the listers from the controller's label-filtered
// informer factories (registering their informers before the factories
// start).
func ListersFrom(kube kubeinformers.SharedInformerFactory, kv kvinformers.SharedInformerFactory, cdi cdiinformers.SharedInformerFactory) Listers {
	return ListersOver(ChildInformers(kube, kv, cdi))
}

// ListersOver builds the listers over the caches of children, as
// ChildInformers names them: the informers of one set of factories, or
// those of several namespaces joined into one per resource.
func ListersOver(children map[string]cache.SharedIndexInformer) Listers {
	caches := map[string]cache.Indexer{}
	for resource, informer := range children {
		caches[resource] = informer.GetIndexer()
	}
	idx := func(resource string) cache.Indexer { return caches[resource] }
	return Listers{
		Caches:          caches,
		Jobs:            batchlisters.NewJobLister(idx("jobs")),
		Pods:            corelisters.NewPodLister(idx("pods")),
		Claims:          corelisters.NewPersistentVolumeClaimLister(idx("persistentvolumeclaims")),
		ConfigMaps:      corelisters.NewConfigMapLister(idx("configmaps")),
		ServiceAccounts: corelisters.NewServiceAccountLister(idx("serviceaccounts")),
		Roles:           rbaclisters.NewRoleLister(idx("roles")),
		RoleBindings:    rbaclisters.NewRoleBindingLister(idx("rolebindings")),
		DataVolumes:     cdilisters.NewDataVolumeLister(idx("datavolumes")),
		VMs:             kvlisters.NewVirtualMachineLister(idx("virtualmachines")),
		VMIs:            kvlisters.NewVirtualMachineInstanceLister(idx("virtualmachineinstances")),
	}
}

// ChildInformers are the informers the step's listers read (from the same
// factories as ListersFrom), by resource name, indexed by
// IndexMigrationUID and trimmed by cacheTransform: the controller waits
// for them and maps their events to migrations.
func ChildInformers(kube kubeinformers.SharedInformerFactory, kv kvinformers.SharedInformerFactory, cdi cdiinformers.SharedInformerFactory) map[string]cache.SharedIndexInformer {
	core, batch, rbac := kube.Core().V1(), kube.Batch().V1(), kube.Rbac().V1()
	informers := map[string]cache.SharedIndexInformer{
		"jobs":                    batch.Jobs().Informer(),
		"pods":                    core.Pods().Informer(),
		"persistentvolumeclaims":  core.PersistentVolumeClaims().Informer(),
		"configmaps":              core.ConfigMaps().Informer(),
		"serviceaccounts":         core.ServiceAccounts().Informer(),
		"roles":                   rbac.Roles().Informer(),
		"rolebindings":            rbac.RoleBindings().Informer(),
		"datavolumes":             cdi.Cdi().V1beta1().DataVolumes().Informer(),
		"virtualmachines":         kv.Kubevirt().V1().VirtualMachines().Informer(),
		"virtualmachineinstances": kv.Kubevirt().V1().VirtualMachineInstances().Informer(),
	}
	for _, informer := range informers {
		indexByMigration(informer)
		transformChild(informer)
	}
	return informers
}

// ownSelector selects the objects carrying this migration's UID.
func ownSelector(m *v1alpha1.VirtualMachineMigration) labels.Selector {
	return labels.SelectorFromSet(labels.Set{v1alpha1.LabelMigrationUID: string(m.UID)})
}

// refTo is the ref of an observed object of the given kind.
func refTo(kind string, o metav1.Object) statemachine.ObjectRef {
	return statemachine.ObjectRef{Kind: kind, Name: o.GetName(), UID: o.GetUID(),
		MigrationUID: v1alpha1.MigrationUIDOf(o)}
}

// live keeps the objects that are not being deleted, as refs, by name.
func live[T metav1.Object](kind string, objs []T, keep func(T) bool) []statemachine.ObjectRef {
	var out []statemachine.ObjectRef
	for _, o := range objs {
		if o.GetDeletionTimestamp() == nil && (keep == nil || keep(o)) {
			out = append(out, refTo(kind, o))
		}
	}
	slices.SortFunc(out, func(a, b statemachine.ObjectRef) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Observe fills what the step's children say into obs: the children that
// exist, the transfer and conversion Jobs named in status (when the phase
// looks at them), the target DataVolumes, VM and VMI. It reads the
// informer caches only and changes nothing.
func (s *Step) Observe(m *v1alpha1.VirtualMachineMigration, obs *statemachine.Observation) error {
	if err := s.observeChildren(m, &obs.Children); err != nil {
		return err
	}
	obs.Plan = s.observePlan(m)
	s.observeProofs(m, obs)
	if readsJobs(m) {
		if t := m.Status.Transfer; t != nil {
			obs.TransferJob = s.observeJob(m, t.JobName)
		}
		if cv := m.Status.Conversion; cv != nil && !cv.Skipped {
			obs.ConversionJob = s.observeJob(m, cv.JobName)
		}
	}
	if v := m.Status.Verification; v != nil && readsVerification(m) {
		obs.VerificationJob = s.observeVerificationJob(m, v.JobName)
	}
	if startsAttempts(m) {
		workers, err := s.observeWorkers(m)
		if err != nil {
			return err
		}
		obs.Workers = workers
	}
	return s.observeTarget(m, obs)
}

// startsAttempts reports whether the decision may start a transfer,
// conversion or verification attempt, and so looks at what of the
// earlier ones may still run.
func startsAttempts(m *v1alpha1.VirtualMachineMigration) bool {
	if m.DeletionTimestamp != nil {
		return false
	}
	switch m.Status.Phase {
	case v1alpha1.PhaseTransferringDisks, v1alpha1.PhaseConverting, v1alpha1.PhaseImporting, v1alpha1.PhaseStarting:
		return true
	}
	return false
}

// workerComponents are the components whose pods mount the migration's
// claims: the transfer and the conversion write the staging claims, the
// verification reads the target claims (and staging claims).
var workerComponents = []string{v1alpha1.ComponentTransfer, v1alpha1.ComponentConversion, v1alpha1.ComponentVerification}

// observeWorkers lists what may still run of the migration's transfer,
// conversion and verification attempts, from the caches: their Jobs that
// have not finished or are being deleted (deleted in the foreground, a
// Job stays until its pods are gone), and their pods that have not ended
// (Pending, Running, Unknown), being deleted or not. Jobs first, then
// pods, each by name.
func (s *Step) observeWorkers(m *v1alpha1.VirtualMachineMigration) ([]statemachine.WorkerObservation, error) {
	worker := func(o metav1.Object) bool {
		return slices.Contains(workerComponents, o.GetLabels()[v1alpha1.LabelComponent])
	}
	jobs, err := owned[*batchv1.Job](s, "jobs", m)
	if err != nil {
		return nil, fmt.Errorf("listing jobs: %w", err)
	}
	var out, pods []statemachine.WorkerObservation
	for _, job := range jobs {
		deleting := job.DeletionTimestamp != nil
		if o, _ := jobConditions(job); !worker(job) || ((o.Succeeded || o.Failed) && !deleting) {
			continue
		}
		out = append(out, statemachine.WorkerObservation{Ref: refTo(statemachine.KindJob, job), Job: job.Name, Deleting: deleting})
	}
	list, err := owned[*corev1.Pod](s, "pods", m)
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	for _, p := range list {
		if !worker(p) || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		pods = append(pods, statemachine.WorkerObservation{Ref: refTo(statemachine.KindPod, p), Job: jobOfPod(p), Deleting: p.DeletionTimestamp != nil})
	}
	byName := func(a, b statemachine.WorkerObservation) int { return strings.Compare(a.Ref.Name, b.Ref.Name) }
	slices.SortFunc(out, byName)
	slices.SortFunc(pods, byName)
	return append(out, pods...), nil
}

// jobOfPod is the name of the Job a pod belongs to: the Job controller's
// label (current, else legacy), else its controller owner's name.
func jobOfPod(p *corev1.Pod) string {
	for _, key := range []string{labelJobName, labelLegacyJobName} {
		if name := p.Labels[key]; name != "" {
			return name
		}
	}
	if c := metav1.GetControllerOf(p); c != nil && c.Kind == "Job" {
		return c.Name
	}
	return ""
}

// observeChildren lists the staging objects and the per-attempt access
// objects of the migration.
func (s *Step) observeChildren(m *v1alpha1.VirtualMachineMigration, c *statemachine.Children) error {
	claims, err := owned[*corev1.PersistentVolumeClaim](s, "persistentvolumeclaims", m)
	if err != nil {
		return fmt.Errorf("listing staging claims: %w", err)
	}
	// Staging volumes apart from target claims (those the transfer
	// writes the VM's disks into; those CDI made with the labels it
	// copied from a DataVolume, which the caches leave out), which a
	// cleanup must never take for staging.
	c.StagingClaims = live(statemachine.KindPersistentVolumeClaim, claims, func(p *corev1.PersistentVolumeClaim) bool {
		return p.Labels[v1alpha1.LabelComponent] == v1alpha1.ComponentStaging
	})
	// Target claims: only those named in status as its disks' (and, once
	// recorded, of the UID the transfer wrote). A copy made with the
	// same labels (a KubeVirt snapshot's restore copies a claim's
	// labels) is not the migration's, and no rollback deletes it.
	c.TargetClaims = live(statemachine.KindPersistentVolumeClaim, claims, func(p *corev1.PersistentVolumeClaim) bool {
		return p.Labels[v1alpha1.LabelComponent] == v1alpha1.ComponentDisk && targetClaim(m, p)
	})
	jobs, err := owned[*batchv1.Job](s, "jobs", m)
	if err != nil {
		return fmt.Errorf("listing jobs: %w", err)
	}
	c.Jobs = live(statemachine.KindJob, jobs, nil)
	cms, err := owned[*corev1.ConfigMap](s, "configmaps", m)
	if err != nil {
		return fmt.Errorf("listing config maps: %w", err)
	}
	c.ConfigMaps = live(statemachine.KindConfigMap, cms, nil)
	return s.observeAccess(m, c)
}

// targetClaim reports whether p is the claim status names for one of
// m's disks written in place, of the UID the transfer wrote once that is
// recorded.
func targetClaim(m *v1alpha1.VirtualMachineMigration, p *corev1.PersistentVolumeClaim) bool {
	for _, d := range m.Status.Disks {
		if d.WrittenInPlace() && d.StagingClaim == p.Name {
			return d.TargetClaimUID == "" || d.TargetClaimUID == p.UID
		}
	}
	return false
}

// observeAccess lists the transfer attempts' RoleBindings, Roles and
// ServiceAccounts, in the order they are deleted in.
func (s *Step) observeAccess(m *v1alpha1.VirtualMachineMigration, c *statemachine.Children) error {
	bindings, err := owned[*rbacv1.RoleBinding](s, "rolebindings", m)
	if err != nil {
		return fmt.Errorf("listing role bindings: %w", err)
	}
	roles, err := owned[*rbacv1.Role](s, "roles", m)
	if err != nil {
		return fmt.Errorf("listing roles: %w", err)
	}
	accounts, err := owned[*corev1.ServiceAccount](s, "serviceaccounts", m)
	if err != nil {
		return fmt.Errorf("listing service accounts: %w", err)
	}
	c.TransferAccess = slices.Concat(
		live(statemachine.KindRoleBinding, bindings, nil),
		live(statemachine.KindRole, roles, nil),
		live(statemachine.KindServiceAccount, accounts, nil))
	return nil
}

// readsJobs reports whether the decision looks at the transfer and
// conversion Jobs: only while they run or may run, paused or not (a
// paused migration still records a running transfer's progress).
func readsJobs(m *v1alpha1.VirtualMachineMigration) bool {
	if m.DeletionTimestamp != nil {
		return false
	}
	switch m.Status.Phase {
	case v1alpha1.PhaseTransferringDisks, v1alpha1.PhaseConverting, v1alpha1.PhaseRollingBack:
		return true
	}
	return false
}

// readsVerification reports whether the decision looks at the
// verification Job: while it may run (Importing, and Starting until the
// start is requested: a start later than the verification's bound reads
// the targets back again), and in a rollback that stops it.
func readsVerification(m *v1alpha1.VirtualMachineMigration) bool {
	if m.DeletionTimestamp != nil {
		return false
	}
	switch m.Status.Phase {
	case v1alpha1.PhaseImporting, v1alpha1.PhaseRollingBack:
		return true
	case v1alpha1.PhaseStarting:
		return m.Status.Target == nil || m.Status.Target.StartRequestedAt == nil
	}
	return false
}

// observeVerificationJob observes the verification Job of this migration
// by name, with its pods; nil when absent.
func (s *Step) observeVerificationJob(m *v1alpha1.VirtualMachineMigration, name string) *statemachine.JobObservation {
	job, err := s.Listers.Jobs.Jobs(m.Namespace).Get(name)
	if err != nil || !ours(job, m.UID) || job.DeletionTimestamp != nil {
		return nil
	}
	o := ObserveVerificationJob(job, s.jobPods(job))
	o.Ref = refTo(statemachine.KindJob, job)
	return &o
}

// observeJob observes a Job of this migration by name, with its pods and
// (for a transfer) its progress ConfigMap; nil when absent.
func (s *Step) observeJob(m *v1alpha1.VirtualMachineMigration, name string) *statemachine.JobObservation {
	job, err := s.Listers.Jobs.Jobs(m.Namespace).Get(name)
	if err != nil || !ours(job, m.UID) || job.DeletionTimestamp != nil {
		return nil
	}
	var data map[string]string
	// Only a pod given a progress ConfigMap writes progress and the result
	// there (progressData finds none otherwise).
	if job.Labels[v1alpha1.LabelComponent] == v1alpha1.ComponentTransfer {
		data = s.progressData(m, job)
	}
	o := ObserveJob(job, s.jobPods(job), data)
	o.Ref = refTo(statemachine.KindJob, job)
	return &o
}

// jobPods lists a Job's pods from the cache, by the Job controller's
// current label, else the legacy one, keeping those the Job controls.
func (s *Step) jobPods(job *batchv1.Job) []corev1.Pod {
	for _, key := range []string{labelJobName, labelLegacyJobName} {
		list, err := s.Listers.Pods.Pods(job.Namespace).List(labels.SelectorFromSet(labels.Set{key: job.Name}))
		if err != nil {
			continue
		}
		var pods []corev1.Pod
		for _, p := range list {
			if c := metav1.GetControllerOf(p); job.UID == "" || c == nil || c.UID == job.UID {
				pods = append(pods, *p)
			}
		}
		if len(pods) > 0 {
			return pods
		}
	}
	return nil
}

// progressData is the data of the transfer's progress ConfigMap (the one
// its --progress-configmap flag names) when it is this migration's.
func (s *Step) progressData(m *v1alpha1.VirtualMachineMigration, job *batchv1.Job) map[string]string {
	name := progressConfigMapOf(job)
	if name == "" {
		return nil
	}
	cm, err := s.Listers.ConfigMaps.ConfigMaps(job.Namespace).Get(name)
	if err != nil || !ours(cm, m.UID) {
		return nil
	}
	return cm.Data
}

// progressConfigMapOf is the ConfigMap a transfer Job's pod reports into,
// from its --progress-configmap argument; "" when it has none.
func progressConfigMapOf(job *batchv1.Job) string {
	for _, c := range job.Spec.Template.Spec.Containers {
		for _, a := range c.Args {
			if ref, ok := strings.CutPrefix(a, progressFlag); ok {
				if ns, n, ok := strings.Cut(ref, "/"); ok && ns == job.Namespace {
					return n
				}
			}
		}
	}
	return ""
}

// observeTarget observes the target DataVolumes, VM and VMI named in status.
func (s *Step) observeTarget(m *v1alpha1.VirtualMachineMigration, obs *statemachine.Observation) error {
	if m.Status.Target == nil || m.Status.Target.Name == "" {
		return nil
	}
	name := m.Status.Target.Name
	if err := s.observeDataVolumes(m, name, obs); err != nil {
		return err
	}
	vm, err := s.Listers.VMs.VirtualMachines(m.Namespace).Get(name)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("reading virtual machine %s: %w", name, err)
	case vm.DeletionTimestamp == nil:
		strategy := ""
		if vm.Spec.RunStrategy != nil {
			strategy = string(*vm.Spec.RunStrategy)
		}
		obs.VM = &statemachine.VMObservation{
			Ours: ours(vm, m.UID), UID: string(vm.UID), RunStrategy: strategy,
			Ref:     refTo(statemachine.KindVirtualMachine, vm),
			Created: vm.Status.Created, PrintableStatus: string(vm.Status.PrintableStatus),
		}
	}
	vmi, err := s.Listers.VMIs.VirtualMachineInstances(m.Namespace).Get(name)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("reading virtual machine instance %s: %w", name, err)
	default:
		obs.VMI = vmiObservation(vmi)
	}
	return nil
}

// observeDataVolumes observes the migration's target DataVolumes; those
// the target VM does not control yet are also children.
func (s *Step) observeDataVolumes(m *v1alpha1.VirtualMachineMigration, target string, obs *statemachine.Observation) error {
	dvs, err := owned[*cdiv1.DataVolume](s, "datavolumes", m)
	if err != nil {
		return fmt.Errorf("listing data volumes: %w", err)
	}
	for _, dv := range dvs {
		if dv.Labels[v1alpha1.LabelComponent] != v1alpha1.ComponentImport || dv.DeletionTimestamp != nil || !diskDataVolume(m, dv.Name) {
			continue
		}
		owner := metav1.GetControllerOf(dv)
		owned := owner != nil && owner.Kind == "VirtualMachine" && owner.Name == target
		if obs.DataVolumes == nil {
			obs.DataVolumes = map[string]statemachine.DataVolumeObservation{}
		}
		ref := refTo(statemachine.KindDataVolume, dv)
		obs.DataVolumes[dv.Name] = statemachine.DataVolumeObservation{
			Ref: ref, Phase: string(dv.Status.Phase), Progress: string(dv.Status.Progress), OwnedByVM: owned,
			Message: dataVolumeMessage(dv), Claim: s.dataVolumeClaim(m, dv.Name),
		}
		if !owned {
			obs.Children.DataVolumes = append(obs.Children.DataVolumes, ref)
		}
	}
	slices.SortFunc(obs.Children.DataVolumes, func(a, b statemachine.ObjectRef) int { return strings.Compare(a.Name, b.Name) })
	return nil
}

// diskDataVolume reports whether status names name as one of m's disks'
// DataVolumes (a copy with the same labels is not the migration's).
func diskDataVolume(m *v1alpha1.VirtualMachineMigration, name string) bool {
	for _, d := range m.Status.Disks {
		if d.DataVolume == name {
			return true
		}
	}
	return false
}

// dataVolumeClaim is what the cache holds of the claim of a target
// DataVolume's name: only a claim of m's own (its UID label; a claim CDI
// made from the DataVolume's labels is left out of the caches), never one
// being deleted. CDI's adoption of a claim makes the DataVolume its
// controller and leaves its labels.
func (s *Step) dataVolumeClaim(m *v1alpha1.VirtualMachineMigration, name string) *statemachine.ClaimState {
	pvc, err := s.Listers.Claims.PersistentVolumeClaims(m.Namespace).Get(name)
	if err != nil || !ours(pvc, m.UID) || pvc.DeletionTimestamp != nil {
		return nil
	}
	c := &statemachine.ClaimState{UID: pvc.UID, Bound: pvc.Status.Phase == corev1.ClaimBound}
	if owner := metav1.GetControllerOf(pvc); owner != nil && owner.Kind == "DataVolume" && owner.Name == name {
		c.ControllerUID = owner.UID
	}
	return c
}

// dataVolumeMessage is what CDI says of a DataVolume that is not ready:
// the reasons and messages of its conditions that are not true (Bound
// false while its claim is Pending, Running false with a quota exceeded),
// each once.
func dataVolumeMessage(dv *cdiv1.DataVolume) string {
	var parts []string
	for _, c := range dv.Status.Conditions {
		if c.Status == corev1.ConditionTrue || (c.Message == "" && c.Reason == "") {
			continue
		}
		part := c.Message
		if c.Reason != "" && c.Message != "" {
			part = c.Reason + ": " + c.Message
		} else if part == "" {
			part = c.Reason
		}
		if !slices.Contains(parts, part) {
			parts = append(parts, part)
		}
	}
	return strings.Join(parts, "; ")
}

// Bounds of what is kept of a VMI's interfaces (the status schema's).
const (
	maxVMIInterfaces = 64
	maxVMIAddresses  = 32
	maxVMIString     = v1alpha1.MaxGuestReported
)

// vmiInterfaces are a VMI's status.interfaces as KubeVirt reports them
// (the addresses its ipAddresses list, else its ipAddress), bounded. The
// guest agent reports them from inside the migrated guest: every string
// is kept without control characters, a cut marked (untrusted.CleanCut),
// and an address in its canonical form where it is one.
func vmiInterfaces(in []kubevirtv1.VirtualMachineInstanceNetworkInterface) []v1alpha1.TargetInterface {
	var out []v1alpha1.TargetInterface
	for _, i := range in {
		if len(out) == maxVMIInterfaces {
			break
		}
		ips := i.IPs
		if len(ips) == 0 && i.IP != "" {
			ips = []string{i.IP}
		}
		if len(ips) > maxVMIAddresses {
			ips = ips[:maxVMIAddresses]
		}
		kept := make([]string, 0, len(ips))
		for _, ip := range ips {
			if a, err := untrusted.Addr(ip); err == nil {
				kept = append(kept, a.String())
			} else {
				kept = append(kept, untrusted.CleanCut(ip, maxVMIString))
			}
		}
		if len(kept) == 0 {
			kept = nil
		}
		clean := func(s string) string { return untrusted.CleanCut(s, maxVMIString) }
		out = append(out, v1alpha1.TargetInterface{Name: clean(i.Name), MAC: clean(i.MAC), InterfaceName: clean(i.InterfaceName),
			IPAddresses: kept, InfoSource: clean(i.InfoSource)})
	}
	return out
}

// agentConnected reports whether the VMI's AgentConnected condition is true.
func agentConnected(conds []kubevirtv1.VirtualMachineInstanceCondition) bool {
	for _, c := range conds {
		if c.Type == "AgentConnected" && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
