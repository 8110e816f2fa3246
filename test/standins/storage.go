package standins

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeinformers "k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"platform.example/vm-migration/test/framework"
)

// Storage is the storage stand-in, a provisioner: it backs every claim
// with a local directory through a pre-bound PersistentVolume, and deletes
// released volumes with their directory; a claim whose StorageClass names
// one of Config.RealProvisioners is left to it. With Config.LocalVolumeNode (a
// real node) the volume is `local` with node affinity to that node, so the
// kubelet mounts it into pods and applies their fsGroup, as for a CSI
// volume; without, it is hostPath (which ignores fsGroup), for suites
// without a node.
type Storage struct {
	cfg Config
	c   *clients

	claims  corelisters.PersistentVolumeClaimLister
	volumes corelisters.PersistentVolumeLister
	classes storagelisters.StorageClassLister
}

// NewStorage returns the storage stand-in alone (Run starts it with the others).
func NewStorage(cfg Config) (*Storage, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	c, err := newClients(cfg.RestConfig, false)
	if err != nil {
		return nil, err
	}
	return &Storage{cfg: cfg, c: c}, nil
}

// Run runs the storage stand-in alone until ctx ends.
func (s *Storage) Run(ctx context.Context) error { return s.run(ctx) }

// VolumeDir is the directory backing a volume.
func (s *Storage) volumeDir(pv string) string { return filepath.Join(s.cfg.Root, "volumes", pv) }

// volumeName is the PersistentVolume of a claim.
func volumeName(pvc *corev1.PersistentVolumeClaim) string { return "standin-" + string(pvc.UID) }

// EnsureStorageClass creates the default StorageClass when absent.
func (s *Storage) EnsureStorageClass(ctx context.Context) error {
	immediate := storagev1.VolumeBindingImmediate
	retain := corev1.PersistentVolumeReclaimRetain
	sc := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:        DefaultStorageClass,
			Labels:      map[string]string{LabelStandin: "true"},
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"},
		},
		Provisioner:       Provisioner,
		ReclaimPolicy:     &retain,
		VolumeBindingMode: &immediate,
	}
	_, err := s.c.kube.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("standins: creating storage class %s: %w", sc.Name, err)
	}
	return nil
}

func (s *Storage) run(ctx context.Context) error {
	nsFactory := kubeinformers.NewSharedInformerFactoryWithOptions(s.c.kube, time.Minute, kubeinformers.WithNamespace(s.cfg.Namespace))
	factory := kubeinformers.NewSharedInformerFactory(s.c.kube, time.Minute)
	claims := nsFactory.Core().V1().PersistentVolumeClaims()
	volumes := factory.Core().V1().PersistentVolumes()
	classes := factory.Storage().V1().StorageClasses()
	s.claims, s.volumes, s.classes = claims.Lister(), volumes.Lister(), classes.Lister()
	claimLoop := newLoop("standin-storage-claims", s.syncClaim)
	volumeLoop := newLoop("standin-storage-volumes", s.syncVolume)
	if _, err := claims.Informer().AddEventHandler(claimLoop.handler()); err != nil {
		return err
	}
	if _, err := volumes.Informer().AddEventHandler(volumeLoop.handler()); err != nil {
		return err
	}
	nsFactory.Start(ctx.Done())
	factory.Start(ctx.Done())
	defer nsFactory.Shutdown()
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), claims.Informer().HasSynced, volumes.Informer().HasSynced, classes.Informer().HasSynced) {
		return nil
	}
	done := make(chan struct{})
	go func() { volumeLoop.run(ctx, 1); close(done) }()
	claimLoop.run(ctx, 2)
	<-done
	return nil
}

// syncClaim gives an unbound claim its pre-bound volume and directory.
func (s *Storage) syncClaim(ctx context.Context, key string) (time.Duration, error) {
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	pvc, err := s.claims.PersistentVolumeClaims(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil || pvc.DeletionTimestamp != nil {
		return 0, err
	}
	if pvc.Spec.VolumeName != "" && !strings.HasPrefix(pvc.Spec.VolumeName, "standin-") || pvc.Status.Phase == corev1.ClaimBound || s.otherProvisioner(pvc) {
		return 0, nil
	}
	pvName := volumeName(pvc)
	if _, err := s.volumes.Get(pvName); err == nil {
		return 0, s.bind(ctx, pvc, pvName)
	}
	dir := s.volumeDir(pvName)
	// Pods run as whatever user the stand-in runs as; the directory is
	// open to all, like a fresh hostPath volume.
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return 0, fmt.Errorf("creating %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		return 0, err
	}
	capacity := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	modes := pvc.Spec.AccessModes
	if len(modes) == 0 {
		modes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	class := ""
	if pvc.Spec.StorageClassName != nil {
		class = *pvc.Spec.StorageClassName
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName, Labels: map[string]string{LabelStandin: "true"}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: capacity},
			AccessModes:                   modes,
			VolumeMode:                    pvc.Spec.VolumeMode,
			StorageClassName:              class,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        s.volumeSource(dir),
			NodeAffinity:                  s.nodeAffinity(),
			ClaimRef: &corev1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID,
			},
		},
	}
	if _, err := s.c.kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return 0, fmt.Errorf("creating volume %s: %w", pvName, err)
	}
	return 0, s.bind(ctx, pvc, pvName)
}

// otherProvisioner reports whether the claim's StorageClass names one of
// the real provisioners of Config.RealProvisioners.
func (s *Storage) otherProvisioner(pvc *corev1.PersistentVolumeClaim) bool {
	if len(s.cfg.RealProvisioners) == 0 || pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName == "" {
		return false
	}
	sc, err := s.classes.Get(*pvc.Spec.StorageClassName)
	return err == nil && slices.Contains(s.cfg.RealProvisioners, sc.Provisioner)
}

// volumeSource is a local volume on a real node, else a hostPath one.
func (s *Storage) volumeSource(dir string) corev1.PersistentVolumeSource {
	if s.cfg.LocalVolumeNode != "" {
		return corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dir}}
	}
	hostDir := corev1.HostPathDirectory
	return corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &hostDir}}
}

// nodeAffinity pins a local volume to the real node (a local volume must
// name its node).
func (s *Storage) nodeAffinity() *corev1.VolumeNodeAffinity {
	if s.cfg.LocalVolumeNode == "" {
		return nil
	}
	return framework.NodeAffinity(s.cfg.LocalVolumeNode)
}

// bind completes the binding of a claim to its pre-bound volume as the
// PersistentVolume controller does (which would otherwise only notice on
// its periodic resync): the claim's volumeName and annotations, then both
// statuses.
func (s *Storage) bind(ctx context.Context, pvc *corev1.PersistentVolumeClaim, pvName string) error {
	claims := s.c.kube.CoreV1().PersistentVolumeClaims(pvc.Namespace)
	volumes := s.c.kube.CoreV1().PersistentVolumes()
	var pv *corev1.PersistentVolume
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		if pv, err = volumes.Get(ctx, pvName, metav1.GetOptions{}); err != nil {
			return err
		}
		if pv.Status.Phase == corev1.VolumeBound {
			return nil
		}
		pv.Status.Phase = corev1.VolumeBound
		pv, err = volumes.UpdateStatus(ctx, pv, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("marking volume %s bound: %w", pvName, err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := claims.Get(ctx, pvc.Name, metav1.GetOptions{})
		if err != nil || cur.UID != pvc.UID {
			return err
		}
		if cur.Spec.VolumeName == "" {
			cur.Spec.VolumeName = pvName
			if cur.Annotations == nil {
				cur.Annotations = map[string]string{}
			}
			cur.Annotations["pv.kubernetes.io/bind-completed"] = "yes"
			cur.Annotations["pv.kubernetes.io/bound-by-controller"] = "yes"
			if cur, err = claims.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
		if cur.Spec.VolumeName != pvName || cur.Status.Phase == corev1.ClaimBound {
			return nil
		}
		cur.Status.Phase = corev1.ClaimBound
		cur.Status.AccessModes = pv.Spec.AccessModes
		cur.Status.Capacity = pv.Spec.Capacity
		_, err = claims.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("binding claim %s/%s: %w", pvc.Namespace, pvc.Name, err)
	}
	return nil
}

// syncVolume deletes a volume whose claim is gone, with its directory.
func (s *Storage) syncVolume(ctx context.Context, key string) (time.Duration, error) {
	pv, err := s.volumes.Get(key)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil || pv.Labels[LabelStandin] != "true" || pv.Spec.ClaimRef == nil {
		return 0, err
	}
	ref := pv.Spec.ClaimRef
	pvc, err := s.claims.PersistentVolumeClaims(ref.Namespace).Get(ref.Name)
	gone := apierrors.IsNotFound(err) || (err == nil && pvc.UID != ref.UID)
	if !gone {
		return 0, nil
	}
	// The informer may lag: ask the API server before deleting data.
	live, err := s.c.kube.CoreV1().PersistentVolumeClaims(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err == nil && live.UID == ref.UID {
		return time.Second, nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return 0, err
	}
	if err := os.RemoveAll(s.volumeDir(pv.Name)); err != nil {
		return 0, fmt.Errorf("removing the directory of %s: %w", pv.Name, err)
	}
	uid := pv.UID
	err = s.c.kube.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) {
		return 0, fmt.Errorf("deleting volume %s: %w", pv.Name, err)
	}
	return 0, nil
}

// claimDir is the local directory of a bound claim; ok is false while it
// is not bound to one of the stand-in's volumes.
func claimDir(ctx context.Context, c *clients, root, namespace, name string) (string, bool, error) {
	pvc, err := c.kube.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", false, err
	}
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" {
		return "", false, nil
	}
	pv, err := c.kube.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return "", false, err
	}
	path := ""
	switch {
	case pv.Spec.HostPath != nil:
		path = pv.Spec.HostPath.Path
	case pv.Spec.Local != nil:
		path = pv.Spec.Local.Path
	}
	if !strings.HasPrefix(path, root+string(filepath.Separator)) {
		return "", false, fmt.Errorf("claim %s/%s is bound to %s, which is not a stand-in volume", namespace, name, pv.Name)
	}
	return path, true, nil
}

// ClaimDir is the local directory of a bound claim, for tests that look at
// the bytes in a volume.
func ClaimDir(ctx context.Context, cfg Config, namespace, name string) (string, error) {
	if err := cfg.defaults(); err != nil {
		return "", err
	}
	c, err := newClients(cfg.RestConfig, false)
	if err != nil {
		return "", err
	}
	dir, ok, err := claimDir(ctx, c, cfg.Root, namespace, name)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("claim %s/%s is not bound", namespace, name)
	}
	return dir, nil
}
