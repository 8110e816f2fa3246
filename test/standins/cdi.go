package standins

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	cdiinformers "platform.example/vm-migration/pkg/generated/cdi/informers/externalversions"
	cdilisters "platform.example/vm-migration/pkg/generated/cdi/listers/core/v1beta1"
)

// cloneRun is a clone in progress.
type cloneRun struct {
	uid    types.UID
	cancel context.CancelFunc
}

// CDI is the CDI stand-in; see the package documentation.
type CDI struct {
	cfg Config
	c   *clients
	// tokens checks the clone tokens the admission stand-in signs.
	tokens *cloneTokens

	dvs cdilisters.DataVolumeLister

	mu      sync.Mutex
	copying map[string]*cloneRun // by DataVolume key
	wg      sync.WaitGroup
}

func (d *CDI) run(ctx context.Context) error {
	d.copying = map[string]*cloneRun{}
	factory := cdiinformers.NewSharedInformerFactoryWithOptions(d.c.cdi, time.Minute, cdiinformers.WithNamespace(d.cfg.Namespace))
	inf := factory.Cdi().V1beta1().DataVolumes()
	d.dvs = inf.Lister()
	l := newLoop("standin-cdi", d.sync)
	if _, err := inf.Informer().AddEventHandler(l.handler()); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		l.run(ctx, d.cfg.workers(2))
	}
	d.wg.Wait()
	return nil
}

// sync moves a DataVolume one step. A DataVolume whose claim exists and
// needs no work (claimMayExistBefore) adopts it; a blank one gets an empty
// claim; a clone goes: target claim, bind, copy, done.
func (d *CDI) sync(ctx context.Context, key string) (time.Duration, error) {
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	dv, err := d.dvs.DataVolumes(ns).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return 0, err
	}
	if err != nil || dv.DeletionTimestamp != nil {
		// A deleted DataVolume's clone stops.
		d.mu.Lock()
		if r := d.copying[key]; r != nil && (dv == nil || r.uid == dv.UID) {
			r.cancel()
		}
		d.mu.Unlock()
		return 0, nil
	}
	switch dv.Status.Phase {
	case cdiv1.Failed:
		return 0, nil
	case cdiv1.Succeeded:
		// CDI goes on trying to become the controller of an adopted claim
		// after it marked the DataVolume Succeeded; any other is done.
		if allow, _ := strconv.ParseBool(dv.Annotations[AnnotationAllowClaimAdoption]); !allow {
			return 0, nil
		}
	}
	d.mu.Lock()
	cloning := d.copying[key] != nil
	d.mu.Unlock()
	if cloning {
		return 0, nil
	}
	claim, err := d.c.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil && claimMayExistBefore(claim, dv):
		return 0, d.adopt(ctx, dv, claim)
	case apierrors.IsNotFound(err):
		claim = nil
	case err != nil:
		return 0, fmt.Errorf("reading the claim of data volume %s: %w", key, err)
	}
	if dv.Status.Phase == cdiv1.Succeeded {
		return 0, nil
	}
	src := dv.Spec.Source
	switch {
	case src != nil && src.Blank != nil:
		return d.blank(ctx, dv, claim)
	case src == nil || src.PVC == nil:
		return 0, d.setPhase(ctx, dv, cdiv1.Failed, "", messageUnsupportedSource)
	}
	return d.syncClone(ctx, key, dv, src.PVC)
}

// messageUnsupportedSource is the Running condition's message of a
// DataVolume the stand-in cannot fill, which it fails.
const messageUnsupportedSource = "the CDI stand-in only clones PVCs (spec.source.pvc), creates blank images (spec.source.blank) " +
	"and adopts existing claims (annotation " + AnnotationAllowClaimAdoption + `: "true")`

// syncClone moves a clone one step: target claim, bind, copy, done.
func (d *CDI) syncClone(ctx context.Context, key string, dv *cdiv1.DataVolume, src *cdiv1.DataVolumeSourcePVC) (time.Duration, error) {
	srcNS := orDefault(src.Namespace, dv.Namespace)
	if err := d.authorized(dv, srcNS, src.Name); err != nil {
		return 0, fmt.Errorf("data volume %s: %w", key, err)
	}
	srcDir, ready, err := d.sourceReady(ctx, dv, srcNS, src.Name)
	if err != nil || !ready {
		return time.Second, err
	}
	if err := d.ensureTarget(ctx, dv, srcNS, src.Name); err != nil {
		return 0, err
	}
	dstDir, ok, err := claimDir(ctx, d.c, d.cfg.Root, dv.Namespace, dv.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return 0, err
	}
	if !ok {
		return time.Second, d.setPhase(ctx, dv, cdiv1.CloneScheduled, "", "waiting for target claim "+dv.Name+" to bind")
	}
	d.mu.Lock()
	if r := d.copying[key]; r != nil {
		d.mu.Unlock()
		return 0, nil
	}
	cctx, cancel := context.WithCancel(ctx)
	run := &cloneRun{uid: dv.UID, cancel: cancel}
	d.copying[key] = run
	d.mu.Unlock()
	d.wg.Go(func() {
		defer func() {
			cancel()
			d.mu.Lock()
			if d.copying[key] == run {
				delete(d.copying, key)
			}
			d.mu.Unlock()
		}()
		d.clone(cctx, dv, srcDir, dstDir)
	})
	return 0, nil
}

// authorized is CDI's check of the clone token its webhook added (CDI
// v1.66 pkg/controller/datavolume/clone-controller-base.go,
// ensureExtendedTokenDV): a clone from another namespace goes on only with
// a valid token; without one the DataVolume stays as it is, with no target
// claim, and the sync is retried. A clone within a namespace needs none.
func (d *CDI) authorized(dv *cdiv1.DataVolume, srcNS, srcName string) error {
	if srcNS == dv.Namespace {
		return nil
	}
	token, ok := dv.Annotations[AnnotationCloneToken]
	if !ok {
		return errors.New("token missing")
	}
	return d.tokens.verify(token, cloneTokenPayload{
		SourceNamespace: srcNS, SourceName: srcName, TargetNamespace: dv.Namespace, TargetName: dv.Name,
	})
}

// Event reasons and messages of CDI's clone controllers (CDI v1.66
// pkg/controller/datavolume/clone-controller-base.go and
// pkg/controller/common/util.go).
const (
	reasonCloneWithoutSource    = "CloneWithoutSource"
	reasonCloneValidationFailed = "CloneValidationFailed"
	reasonCloneSourceInUse      = "CloneSourceInUse"
)

// sourceReady is CDI's wait for a clone's source (CDI v1.66
// pkg/controller/datavolume/pvc-clone-controller.go,
// validateCloneAndSourcePVC and isSourceReadyToClone): the claim exists
// (else event CloneWithoutSource), its content type is the target's and a
// spec.pvc target is no smaller (else event CloneValidationFailed), it is
// bound, and no running pod writes to it (else event CloneSourceInUse). It
// returns the source volume's directory once all hold.
func (d *CDI) sourceReady(ctx context.Context, dv *cdiv1.DataVolume, srcNS, srcName string) (string, bool, error) {
	src, err := d.c.kube.CoreV1().PersistentVolumeClaims(srcNS).Get(ctx, srcName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		d.c.events.Eventf(dv, corev1.EventTypeWarning, reasonCloneWithoutSource, "The source pvc %s doesn't exist", srcName)
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	if err := validateClone(src, &dv.Spec); err != nil {
		d.c.events.Eventf(dv, corev1.EventTypeWarning, reasonCloneValidationFailed, "The clone doesn't meet the validation requirements: %v", err)
		return "", false, nil
	}
	dir, bound, err := claimDir(ctx, d.c, d.cfg.Root, srcNS, srcName)
	if err != nil || !bound {
		return "", false, err
	}
	users, err := podsWritingTo(ctx, d.c, srcNS, srcName)
	if err != nil {
		return "", false, err
	}
	for _, p := range users {
		d.c.events.Eventf(dv, corev1.EventTypeWarning, reasonCloneSourceInUse, "pod %s/%s using PersistentVolumeClaim %s", srcNS, p, srcName)
	}
	return dir, len(users) == 0, nil
}

// validateClone is CDI's validateClone (pvc-clone-controller.go): the
// source's content type (annotation cdi.kubevirt.io/storage.contentType,
// kubevirt unless archive) is the target's, and a target given as spec.pvc
// asks for at least the source's size.
func validateClone(src *corev1.PersistentVolumeClaim, spec *cdiv1.DataVolumeSpec) error {
	srcType := cdiv1.DataVolumeKubeVirt
	if src.Annotations[AnnotationContentType] == string(cdiv1.DataVolumeArchive) {
		srcType = cdiv1.DataVolumeArchive
	}
	dstType := spec.ContentType
	if dstType != cdiv1.DataVolumeArchive {
		dstType = cdiv1.DataVolumeKubeVirt
	}
	if srcType != dstType {
		return fmt.Errorf("Source contentType (%s) and target contentType (%s) do not match", srcType, dstType) //nolint:staticcheck // CDI's message
	}
	if spec.PVC == nil {
		return nil
	}
	have, okSrc := src.Spec.Resources.Requests[corev1.ResourceStorage]
	want, okDst := spec.PVC.Resources.Requests[corev1.ResourceStorage]
	if !okSrc || !okDst {
		return errors.New("source/target missing storage resource requests")
	}
	if have.Value() > want.Value() {
		return fmt.Errorf("target resources requests storage size is smaller than the source %d < %d", want.Value(), have.Value())
	}
	return nil
}

// AnnotationContentType is the content type of a claim's data, which CDI
// reads on a clone's source.
const AnnotationContentType = "cdi.kubevirt.io/storage.contentType"

// podsWritingTo names the pods, not finished, that mount the claim
// writable (CDI's GetPodsUsingPVCs with read-only mounts allowed).
func podsWritingTo(ctx context.Context, c *clients, namespace, claim string) ([]string, error) {
	pods, err := c.kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing pods in %s: %w", namespace, err)
	}
	var out []string
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim && writes(&p, v) {
				out = append(out, p.Name)
				break
			}
		}
	}
	return out, nil
}

// writes says whether a pod may write to one of its claim volumes: the
// volume is not read-only and some container mounts it writable or as a
// block device.
func writes(p *corev1.Pod, v corev1.Volume) bool {
	if v.PersistentVolumeClaim.ReadOnly {
		return false
	}
	for _, c := range p.Spec.Containers {
		for _, m := range c.VolumeMounts {
			if m.Name == v.Name && !m.ReadOnly {
				return true
			}
		}
		for _, dev := range c.VolumeDevices {
			if dev.Name == v.Name {
				return true
			}
		}
	}
	return false
}

// ensureTarget creates the DataVolume's claim: its name, its labels, the
// requested storage, the source claim's size, controlled by the DataVolume.
func (d *CDI) ensureTarget(ctx context.Context, dv *cdiv1.DataVolume, srcNS, srcName string) error {
	api := d.c.kube.CoreV1().PersistentVolumeClaims(dv.Namespace)
	if _, err := api.Get(ctx, dv.Name, metav1.GetOptions{}); err == nil {
		return nil
	}
	src, err := d.c.kube.CoreV1().PersistentVolumeClaims(srcNS).Get(ctx, srcName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading source claim %s/%s: %w", srcNS, srcName, err)
	}
	spec := storageClaimSpec(dv.Spec.Storage)
	if _, ok := spec.Resources.Requests[corev1.ResourceStorage]; !ok {
		spec.Resources.Requests[corev1.ResourceStorage] = src.Spec.Resources.Requests[corev1.ResourceStorage]
	}
	return d.createClaim(ctx, dv, spec)
}

// storageClaimSpec is the claim spec.storage asks for (ReadWriteOnce when
// it names no access mode), with a requests map to add to.
func storageClaimSpec(st *cdiv1.StorageSpec) corev1.PersistentVolumeClaimSpec {
	spec := corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}}
	if st != nil {
		spec.StorageClassName = st.StorageClassName
		spec.VolumeMode = st.VolumeMode
		if len(st.AccessModes) > 0 {
			spec.AccessModes = st.AccessModes
		}
		spec.Resources = *st.Resources.DeepCopy()
	}
	if spec.Resources.Requests == nil {
		spec.Resources.Requests = corev1.ResourceList{}
	}
	return spec
}

// createClaim creates the DataVolume's claim with spec, as CDI does: the
// DataVolume's name and labels, annotated as created for this DataVolume
// (so it never adopts it: claimMayExistBefore), controlled by it.
func (d *CDI) createClaim(ctx context.Context, dv *cdiv1.DataVolume, spec corev1.PersistentVolumeClaimSpec) error {
	labels := map[string]string{}
	for k, v := range dv.Labels {
		labels[k] = v
	}
	labels["app"] = "containerized-data-importer"
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: dv.Name, Namespace: dv.Namespace, Labels: labels,
			Annotations: map[string]string{
				AnnotationContentType:          string(cdiv1.DataVolumeKubeVirt),
				AnnotationCreatedForDataVolume: string(dv.UID),
			},
			OwnerReferences: []metav1.OwnerReference{dataVolumeControllerRef(dv)},
		},
		Spec: spec,
	}
	_, err := d.c.kube.CoreV1().PersistentVolumeClaims(dv.Namespace).Create(ctx, pvc, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the target claim of data volume %s/%s: %w", dv.Namespace, dv.Name, err)
	}
	return nil
}

// dataVolumeControllerRef is the owner reference that makes dv an
// object's controller, as CDI's (controller-runtime's
// SetControllerReference) is: blocking the owner's deletion.
func dataVolumeControllerRef(dv *cdiv1.DataVolume) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: cdiv1.SchemeGroupVersion.String(), Kind: "DataVolume", Name: dv.Name, UID: dv.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}
}

// Event reasons and messages of CDI's DataVolume controller for a claim
// of the DataVolume's name it did not create (CDI v1.65 and v1.66
// pkg/controller/datavolume/controller-base.go, validatePVC).
const (
	reasonResourceExists             = "ErrResourceExists"
	messageResourceExists            = "Resource %q already exists and is not managed by DataVolume"
	reasonResourceMarkedForDeletion  = "ErrResourceMarkedForDeletion"
	messageResourceMarkedForDeletion = "Resource %q marked for deletion"
	// reasonClaimNotAdopted is the stand-in's own: where another
	// controller holds the claim, CDI's controller only logs the error.
	reasonClaimNotAdopted = "StandinClaimNotAdopted"
)

// adoptedProgress is the progress of a DataVolume that adopted its claim:
// no pod reported any, and CDI's reconcileProgressUpdate writes "N/A"
// where there is none.
const adoptedProgress = "N/A"

// messageAdopted is the Running condition's message of a DataVolume that
// adopted its claim.
const messageAdopted = "claim adopted (simulated CDI: no pod, nothing copied)"

// adopt is what CDI's DataVolume controller does with a claim that exists
// and needs no work (claimMayExistBefore; controller-base.go: validatePVC
// in its sync, then updateStatus): it makes the DataVolume the claim's
// controller (setControllerReference; other owner references stay) and
// marks the DataVolume Succeeded, with no pod and the bytes untouched. A
// claim being deleted gets an event and an error, and the phase stays.
// Where another controller holds the claim, CDI's sync fails (and is
// retried) while its status update, which does not look at owners, marks
// the DataVolume Succeeded all the same: the stand-in does both, and
// records a Warning event when it first meets the refusal.
func (d *CDI) adopt(ctx context.Context, dv *cdiv1.DataVolume, claim *corev1.PersistentVolumeClaim) error {
	if claim.DeletionTimestamp != nil {
		msg := fmt.Sprintf(messageResourceMarkedForDeletion, claim.Name)
		d.c.events.Event(dv, corev1.EventTypeWarning, reasonResourceMarkedForDeletion, msg)
		return errors.New(msg)
	}
	var ownErr error
	if !metav1.IsControlledBy(claim, dv) {
		ownErr = d.takeClaim(ctx, dv, claim)
		var owned *alreadyOwnedError
		if errors.As(ownErr, &owned) && dv.Status.Phase != cdiv1.Succeeded {
			d.c.events.Event(dv, corev1.EventTypeWarning, reasonClaimNotAdopted, ownErr.Error())
		}
	}
	if dv.Status.Phase != cdiv1.Succeeded {
		if err := d.setPhase(ctx, dv, cdiv1.Succeeded, adoptedProgress, messageAdopted); err != nil {
			return errors.Join(ownErr, err)
		}
	}
	return ownErr
}

// takeClaim makes dv the controller of its claim.
func (d *CDI) takeClaim(ctx context.Context, dv *cdiv1.DataVolume, claim *corev1.PersistentVolumeClaim) error {
	cur := claim.DeepCopy()
	if err := setControllerReference(dv, cur); err != nil {
		return err
	}
	if _, err := d.c.kube.CoreV1().PersistentVolumeClaims(cur.Namespace).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("adopting claim %s/%s: %w", cur.Namespace, cur.Name, err)
	}
	return nil
}

// alreadyOwnedError is controller-runtime's AlreadyOwnedError, which CDI's
// controller returns for a claim another controller holds.
type alreadyOwnedError struct {
	namespace, name string
	owner           metav1.OwnerReference
}

func (e *alreadyOwnedError) Error() string {
	return fmt.Sprintf("Object %s/%s is already owned by another %s controller %s", e.namespace, e.name, e.owner.Kind, e.owner.Name)
}

// setControllerReference is controller-runtime's SetControllerReference
// (pkg/controller/controllerutil), which CDI calls to adopt a claim: it
// refuses an object whose controller is another object, replaces a
// reference to the same owner (same group, kind and name), and keeps every
// other reference.
func setControllerReference(dv *cdiv1.DataVolume, obj metav1.Object) error {
	ref := dataVolumeControllerRef(dv)
	if cur := metav1.GetControllerOf(obj); cur != nil && !sameOwner(*cur, ref) {
		return &alreadyOwnedError{namespace: obj.GetNamespace(), name: obj.GetName(), owner: *cur}
	}
	refs := obj.GetOwnerReferences()
	for i := range refs {
		if sameOwner(refs[i], ref) {
			refs[i] = ref
			obj.SetOwnerReferences(refs)
			return nil
		}
	}
	obj.SetOwnerReferences(append(refs, ref))
	return nil
}

// sameOwner says whether two owner references name the same object, as
// controller-runtime compares them: group, kind and name.
func sameOwner(a, b metav1.OwnerReference) bool {
	ga, errA := schema.ParseGroupVersion(a.APIVersion)
	gb, errB := schema.ParseGroupVersion(b.APIVersion)
	return errA == nil && errB == nil && ga.Group == gb.Group && a.Kind == b.Kind && a.Name == b.Name
}

// messageBlank is the Running condition's message of a blank DataVolume
// done.
const messageBlank = "blank image created (simulated CDI: a sparse disk.img)"

// blank is CDI's import of a blank image (spec.source.blank) into a claim
// of its own: it creates the claim from spec.pvc or spec.storage, and once
// the claim is bound writes a sparse disk.img of the requested size on a
// Filesystem claim (nothing on a Block one), and the DataVolume is
// Succeeded. A claim of the name that it did not create and may not adopt
// is refused as CDI refuses it (event ErrResourceExists, the sync retried).
func (d *CDI) blank(ctx context.Context, dv *cdiv1.DataVolume, claim *corev1.PersistentVolumeClaim) (time.Duration, error) {
	spec := storageClaimSpec(dv.Spec.Storage)
	if dv.Spec.PVC != nil {
		spec = *dv.Spec.PVC.DeepCopy()
	}
	switch {
	case claim == nil:
		if err := d.createClaim(ctx, dv, spec); err != nil {
			return 0, err
		}
	case !metav1.IsControlledBy(claim, dv):
		msg := fmt.Sprintf(messageResourceExists, claim.Name)
		d.c.events.Event(dv, corev1.EventTypeWarning, reasonResourceExists, msg)
		return 0, errors.New(msg)
	}
	dir, bound, err := claimDir(ctx, d.c, d.cfg.Root, dv.Namespace, dv.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return 0, err
	}
	if !bound {
		return time.Second, d.setPhase(ctx, dv, cdiv1.ImportScheduled, "", "waiting for claim "+dv.Name+" to bind")
	}
	if !d.cfg.Light && (spec.VolumeMode == nil || *spec.VolumeMode == corev1.PersistentVolumeFilesystem) {
		size := spec.Resources.Requests[corev1.ResourceStorage]
		if err := blankImage(filepath.Join(dir, "disk.img"), size.Value()); err != nil {
			return 0, d.setPhase(ctx, dv, cdiv1.Failed, "", "creating the blank image: "+err.Error())
		}
	}
	return 0, d.setPhase(ctx, dv, cdiv1.Succeeded, "100.0%", messageBlank)
}

// blankImage makes path a sparse file of size bytes.
func blankImage(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// clone copies the files at the root of the source volume into the target,
// reporting progress, and ends the DataVolume Succeeded or Failed. The
// copy runs at disk speed (issue 25: on a busy machine an import of 320
// MiB took many times a plain copy): progress is written by a reporter of
// its own, so a slow API server never holds the copy up, unless
// Config.CloneBytesPerSecond throttles it, which the DataVolume's Running
// condition then says.
func (d *CDI) clone(ctx context.Context, dv *cdiv1.DataVolume, srcDir, dstDir string) {
	logger := klog.FromContext(ctx).WithValues("dataVolume", klog.KObj(dv))
	message := "cloning (simulated CDI: a local copy at disk speed)"
	if d.cfg.CloneBytesPerSecond > 0 {
		message = fmt.Sprintf("cloning (simulated CDI: a local copy throttled to %d KiB/s by the stand-ins' clone-bytes-per-second)", d.cfg.CloneBytesPerSecond>>10)
	}
	if err := d.setPhase(ctx, dv, cdiv1.CloneInProgress, "0.00%", message); err != nil {
		logger.Error(err, "reporting progress")
	}
	if d.cfg.Light {
		if err := d.setPhase(ctx, dv, cdiv1.Succeeded, "100.0%", "clone complete (simulated CDI, light mode: nothing copied)"); err != nil {
			logger.Error(err, "reporting success")
		}
		return
	}
	files, total, err := volumeFiles(srcDir)
	if err != nil {
		_ = d.setPhase(ctx, dv, cdiv1.Failed, "", "reading the source volume: "+err.Error())
		return
	}
	var done atomic.Int64
	stop := d.reportProgress(ctx, dv, &done, total, message)
	for _, name := range files {
		err := sparseCopy(ctx, filepath.Join(srcDir, name), filepath.Join(dstDir, name), d.cfg.CloneBytesPerSecond, func(n int64) { done.Add(n) })
		if err != nil {
			stop()
			if ctx.Err() != nil {
				return
			}
			_ = d.setPhase(ctx, dv, cdiv1.Failed, "", fmt.Sprintf("cloning %s: %v", name, err))
			return
		}
	}
	stop()
	if err := d.setPhase(ctx, dv, cdiv1.Succeeded, "100.0%", "clone complete (simulated CDI: a local copy)"); err != nil {
		logger.Error(err, "reporting success")
	}
}

// volumeFiles lists the regular files at the root of a volume, and their
// total size.
func volumeFiles(dir string) ([]string, int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0, err
	}
	var names []string
	var total int64
	for _, e := range entries {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			names = append(names, e.Name())
			total += info.Size()
		}
	}
	return names, total, nil
}

// progressInterval is how often a clone's progress is written.
const progressInterval = 500 * time.Millisecond

// reportProgress writes done/total into the DataVolume every
// progressInterval until the returned stop is called (which waits for the
// last write to end).
func (d *CDI) reportProgress(ctx context.Context, dv *cdiv1.DataVolume, done *atomic.Int64, total int64, message string) (stop func()) {
	quit, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(progressInterval)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if total > 0 {
				_ = d.setPhase(ctx, dv, cdiv1.CloneInProgress, fmt.Sprintf("%.2f%%", float64(done.Load())*100/float64(total)), message)
			}
		}
	}()
	return func() {
		close(quit)
		<-finished
	}
}

// sparseCopy copies src to dst, leaving holes where src has zero blocks.
func sparseCopy(ctx context.Context, src, dst string, rate int64, report func(int64)) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	const block = 256 << 10
	buf := make([]byte, block)
	zero := make([]byte, block)
	var off int64
	start := time.Now()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, rerr := io.ReadFull(in, buf)
		if n > 0 {
			if !bytes.Equal(buf[:n], zero[:n]) {
				if _, err := out.WriteAt(buf[:n], off); err != nil {
					return err
				}
			}
			off += int64(n)
			report(int64(n))
			if rate > 0 {
				if ahead := time.Duration(float64(off)/float64(rate)*float64(time.Second)) - time.Since(start); ahead > 0 {
					time.Sleep(ahead)
				}
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	if err := out.Truncate(off); err != nil {
		return err
	}
	return out.Sync()
}

// setPhase writes a DataVolume's phase, progress and Running condition.
func (d *CDI) setPhase(ctx context.Context, dv *cdiv1.DataVolume, phase cdiv1.DataVolumePhase, progress, message string) error {
	api := d.c.cdi.CdiV1beta1().DataVolumes(dv.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := api.Get(ctx, dv.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != dv.UID || cur.Status.Phase == cdiv1.Succeeded || cur.Status.Phase == cdiv1.Failed {
			return nil
		}
		if cur.Status.Phase == phase && string(cur.Status.Progress) == progress {
			return nil
		}
		cur.Status.Phase = phase
		if progress != "" {
			cur.Status.Progress = cdiv1.DataVolumeProgress(progress)
		}
		cur.Status.ClaimName = dv.Name
		running, ready := corev1.ConditionFalse, corev1.ConditionFalse
		switch phase {
		case cdiv1.CloneInProgress:
			running = corev1.ConditionTrue
		case cdiv1.Succeeded:
			ready = corev1.ConditionTrue
		}
		now := metav1.Now()
		cur.Status.Conditions = []cdiv1.DataVolumeCondition{
			{Type: cdiv1.DataVolumeBound, Status: corev1.ConditionTrue, LastTransitionTime: now, LastHeartbeatTime: now},
			{Type: cdiv1.DataVolumeRunning, Status: running, Message: message, LastTransitionTime: now, LastHeartbeatTime: now},
			{Type: cdiv1.DataVolumeReady, Status: ready, LastTransitionTime: now, LastHeartbeatTime: now},
		}
		_, err = api.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
