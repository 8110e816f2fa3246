package controller

import (
	"fmt"
	"maps"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
)

// registerHandlers wires the informers to the queue: a migration enqueues
// itself; a child enqueues the migration named in its labels; a migration
// that leaves a transfer or conversion slot wakes the oldest ones waiting
// for it. A
// finished migration is enqueued by none of them (see finished).
func (c *Controller) registerHandlers(inf Informers) error {
	migReg, err := inf.Migrations.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueueMigration,
		UpdateFunc: func(old, obj any) {
			c.wakeSlotWaiters(old, obj)
			c.wakeOnFreedConversionSlot(old, obj)
			c.enqueueMigration(obj)
		},
		DeleteFunc: func(obj any) {
			c.wakeSlotWaiters(obj, nil)
			c.wakeOnFreedConversionSlot(obj, nil)
			if m := migrationOf(obj); m != nil {
				c.queue.Add(cache.MetaObjectToName(m))
			}
		},
	})
	if err != nil {
		return fmt.Errorf("registering migration handler: %w", err)
	}
	secretReg, err := inf.Secrets.AddEventHandler(onEvery(c.enqueueCredentialUsers))
	if err != nil {
		return fmt.Errorf("registering secret handler: %w", err)
	}
	c.synced = append(c.synced, migReg.HasSynced, secretReg.HasSynced, inf.StorageClasses.HasSynced)
	for _, informer := range inf.Names {
		c.synced = append(c.synced, informer.HasSynced)
	}
	for _, name := range slices.Sorted(maps.Keys(inf.Children)) {
		reg, err := inf.Children[name].AddEventHandler(onEvery(c.enqueueLabelledOwner))
		if err != nil {
			return fmt.Errorf("registering %s handler: %w", name, err)
		}
		c.synced = append(c.synced, reg.HasSynced)
	}
	return nil
}

// onEvery calls enqueue with the object of every add, update and delete.
func onEvery(enqueue func(obj any)) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}
}

// finished reports whether a cached migration needs no reconcile: it
// ended (Succeeded or Failed), it is not being deleted, and its status
// reflects its spec's generation. Only its deletion or a change of its
// spec (a new generation) gives it work again, and both come as events of
// the migration itself; its children's events, resyncs and requeues
// asked for before it ended are dropped (bench-scale: they were most of
// the reconciles once thousands of migrations had ended).
func finished(m *v1alpha1.VirtualMachineMigration) bool {
	return statemachine.IsTerminal(m.Status.Phase) && m.DeletionTimestamp == nil &&
		m.Status.ObservedGeneration == m.Generation
}

// migrationOf is the migration an event carries, nil for anything else.
func migrationOf(obj any) *v1alpha1.VirtualMachineMigration {
	m, _ := unwrapTombstone(obj).(*v1alpha1.VirtualMachineMigration)
	return m
}

// objectOf is the object an event carries, nil for anything without
// object metadata.
func objectOf(obj any) metav1.Object {
	o, _ := unwrapTombstone(obj).(metav1.Object)
	return o
}

// unwrapTombstone is the last known state a delete event carries when the
// informer missed the delete itself, or obj as it is.
func unwrapTombstone(obj any) any {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return tomb.Obj
	}
	return obj
}

// enqueueMigration enqueues the migration of an add or update event,
// unless it is finished: then only for when its time to live ends, if it
// has one, and the record of its writes goes (decidedVersions.observed).
func (c *Controller) enqueueMigration(obj any) {
	m := migrationOf(obj)
	switch {
	case m == nil:
	case finished(m):
		c.decided.observed(cache.MetaObjectToName(m), m.ResourceVersion)
		c.scheduleExpiry(m)
	default:
		c.queue.Add(cache.MetaObjectToName(m))
	}
}

// enqueueUnlessFinished enqueues a migration's key unless the cache holds
// it finished.
func (c *Controller) enqueueUnlessFinished(key cache.ObjectName) {
	if done, _ := c.cachedFinished(key); done {
		return
	}
	c.queue.Add(key)
}

// cachedFinished reports whether the cache holds the migration of key
// and it is finished.
func (c *Controller) cachedFinished(key cache.ObjectName) (bool, error) {
	m, err := c.migrations.VirtualMachineMigrations(key.Namespace).Get(key.Name)
	if err != nil {
		return false, err
	}
	return finished(m), nil
}

// enqueueLabelledOwner maps a child's event to its migration through the
// migration-name label every child carries (DataVolumes and VMs are not
// owned by the migration, so owner references cannot serve).
func (c *Controller) enqueueLabelledOwner(obj any) {
	o := objectOf(obj)
	if o == nil {
		return
	}
	name := o.GetLabels()[v1alpha1.LabelMigrationName]
	if name == "" {
		c.enqueueProofWaiters(obj)
		return
	}
	c.enqueueUnlessFinished(cache.NewObjectName(o.GetNamespace(), name))
}

// enqueueProofWaiters maps the event of a shared proof Job (no
// migration's: it names none) that has its outcome, or is gone, to the
// migrations of its namespace in Validating, which may wait on it; while
// it runs, they look at it at their next poll.
func (c *Controller) enqueueProofWaiters(obj any) {
	job, ok := unwrapTombstone(obj).(*batchv1.Job)
	if !ok || job.Labels[v1alpha1.LabelComponent] != v1alpha1.ComponentProof {
		return
	}
	if _, gone := obj.(cache.DeletedFinalStateUnknown); !gone && job.DeletionTimestamp == nil && !jobEnded(job) {
		return
	}
	all, err := c.migrations.VirtualMachineMigrations(job.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, m := range all {
		if m.Status.Phase == v1alpha1.PhaseValidating {
			c.enqueueMigration(m)
		}
	}
}

// jobEnded reports whether a Job has its Complete or Failed condition.
func jobEnded(job *batchv1.Job) bool {
	for _, cond := range job.Status.Conditions {
		if (cond.Type == batchv1.JobComplete || cond.Type == batchv1.JobFailed) && cond.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// enqueueCredentialUsers maps a credentials Secret's event to the
// migrations of its namespace that name it, so that a migration waiting
// for its Secret moves on as soon as it appears (or is labelled).
func (c *Controller) enqueueCredentialUsers(obj any) {
	o := objectOf(obj)
	if o == nil {
		return
	}
	all, err := c.migrations.VirtualMachineMigrations(o.GetNamespace()).List(labels.Everything())
	if err != nil {
		return
	}
	for _, m := range all {
		if m.SpecInForce().Source.CredentialsSecretRef.Name == o.GetName() {
			c.enqueueMigration(m)
		}
	}
}

// wakeSlotWaiters enqueues, when a migration leaves a transfer slot (its
// phase moves on, its deletion begins or it is gone: obj is nil), the
// oldest migration waiting in Queued on its host and the oldest waiting
// on each of its datastores (and the oldest waiting there to transfer
// again after a failed conversion, which goes first), so that a freed slot is taken at once rather
// than at the waiters' next periodic look (bench-scale: slots stood idle
// for most of the wait interval). The informer calls it once the cache
// shows the change, so the woken reconcile counts the slot as free.
func (c *Controller) wakeSlotWaiters(old, obj any) {
	before := migrationOf(old)
	if before == nil || !holdsSlotNow(before) {
		return
	}
	if now := migrationOf(obj); now != nil && holdsSlotNow(now) {
		return
	}
	freed := slotKeys(before)
	lim := c.limits()
	var lookups []lookup
	if lim.perHost > 0 {
		lookups = append(lookups, lookup{indexQueuedHost, []string{freed.host}})
	}
	if lim.perDatastore > 0 {
		for _, ds := range freed.datastores {
			lookups = append(lookups, lookup{indexQueuedDatastore, []string{ds}})
		}
	}
	for _, l := range lookups {
		waiters, err := c.indexed(l)
		if err != nil {
			continue
		}
		// A migration that transfers again after a failed conversion
		// goes first (its source is off); the oldest in Queued is woken
		// too, for a slot the former cannot use.
		retries := slices.DeleteFunc(slices.Clone(waiters), func(m *v1alpha1.VirtualMachineMigration) bool { return !retransferWaits(m) })
		queued := slices.DeleteFunc(waiters, retransferWaits)
		for _, group := range [][]*v1alpha1.VirtualMachineMigration{retries, queued} {
			if len(group) > 0 {
				c.queue.Add(cache.MetaObjectToName(oldest(group)))
			}
		}
	}
}

// oldest is the migration created first (by name among equals).
func oldest(ms []*v1alpha1.VirtualMachineMigration) *v1alpha1.VirtualMachineMigration {
	first := ms[0]
	for _, m := range ms[1:] {
		if m.CreationTimestamp.Before(&first.CreationTimestamp) ||
			m.CreationTimestamp.Equal(&first.CreationTimestamp) && m.Namespace+"/"+m.Name < first.Namespace+"/"+first.Name {
			first = m
		}
	}
	return first
}
