package standins

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	cdifake "platform.example/vm-migration/pkg/generated/cdi/clientset/versioned/fake"
	cdilisters "platform.example/vm-migration/pkg/generated/cdi/listers/core/v1beta1"
)

// The one-pass data path's DataVolume: blank, adopting the claim of its
// name that the controller wrote before it.
const adoptName = "web-01-disk-0"

// blankDV is a blank DataVolume with a size in spec.storage, as the
// controller renders it to adopt its claim; modifiers change it.
func blankDV(mods ...func(*cdiv1.DataVolume)) *cdiv1.DataVolume {
	dv := &cdiv1.DataVolume{
		TypeMeta: metav1.TypeMeta{APIVersion: cdiv1.SchemeGroupVersion.String(), Kind: "DataVolume"},
		ObjectMeta: metav1.ObjectMeta{
			Name: adoptName, Namespace: "apps", UID: "dv-uid",
			Annotations: map[string]string{AnnotationAllowClaimAdoption: "true"},
		},
		Spec: cdiv1.DataVolumeSpec{
			Source: &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}},
			Storage: &cdiv1.StorageSpec{
				StorageClassName: ptr.To("standard"),
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				VolumeMode:       ptr.To(corev1.PersistentVolumeFilesystem),
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("16Mi")}},
			},
		},
	}
	for _, m := range mods {
		m(dv)
	}
	return dv
}

// writtenClaim is the claim the controller made and wrote before the
// DataVolume, owned (not controlled) by its migration; modifiers change it.
func writtenClaim(mods ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: adoptName, Namespace: "apps", UID: "claim-uid",
			OwnerReferences: []metav1.OwnerReference{migrationRef(false)},
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("16Mi")}},
		},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
	}
	for _, m := range mods {
		m(pvc)
	}
	return pvc
}

// migrationRef is an owner reference to the migration, its controller or
// not.
func migrationRef(controller bool) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: "migration.platform.example/v1alpha1", Kind: "Migration", Name: "web-01", UID: "migration-uid",
		Controller: ptr.To(controller),
	}
}

func withAnnotation(key, value string) func(*cdiv1.DataVolume) {
	return func(dv *cdiv1.DataVolume) { dv.Annotations[key] = value }
}

func TestClaimMayExistBefore(t *testing.T) {
	tests := map[string]struct {
		dv    *cdiv1.DataVolume
		claim *corev1.PersistentVolumeClaim
		want  bool
	}{
		"adoption allowed": {blankDV(), writtenClaim(), true},
		"adoption allowed as strconv.ParseBool reads it": {blankDV(withAnnotation(AnnotationAllowClaimAdoption, "1")), writtenClaim(), true},
		"adoption refused":      {blankDV(withAnnotation(AnnotationAllowClaimAdoption, "false")), writtenClaim(), false},
		"adoption not readable": {blankDV(withAnnotation(AnnotationAllowClaimAdoption, "yes")), writtenClaim(), false},
		"no annotation":         {blankDV(func(dv *cdiv1.DataVolume) { dv.Annotations = nil }), writtenClaim(), false},
		"claim CDI created for this DataVolume": {blankDV(), writtenClaim(func(pvc *corev1.PersistentVolumeClaim) {
			pvc.Annotations = map[string]string{AnnotationCreatedForDataVolume: "dv-uid"}
		}), false},
		"claim CDI created for an earlier DataVolume of the name": {blankDV(), writtenClaim(func(pvc *corev1.PersistentVolumeClaim) {
			pvc.Annotations = map[string]string{AnnotationCreatedForDataVolume: "old-uid"}
		}), true},
		"claim populated for it, no annotation": {blankDV(func(dv *cdiv1.DataVolume) { dv.Annotations = nil }),
			writtenClaim(func(pvc *corev1.PersistentVolumeClaim) {
				pvc.Annotations = map[string]string{AnnotationPopulatedFor: adoptName}
			}), true},
		"no claim": {blankDV(), nil, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, claimMayExistBefore(tc.claim, tc.dv))
		})
	}
}

// TestAdmitDataVolumeClaimAdoption: CDI's webhook admits a DataVolume
// whose claim exists only when it may adopt it, and a blank source with a
// size.
func TestAdmitDataVolumeClaimAdoption(t *testing.T) {
	const refused = " Destination PVC apps/" + adoptName + " already exists"
	tests := map[string]struct {
		dv    *cdiv1.DataVolume
		claim *corev1.PersistentVolumeClaim
		want  string // the refusal; empty: admitted
	}{
		"blank with a size, no claim": {dv: blankDV()},
		"adoption of a written claim": {dv: blankDV(), claim: writtenClaim()},
		"adoption of a claim another controller holds (the webhook looks at no owner)": {dv: blankDV(),
			claim: writtenClaim(func(pvc *corev1.PersistentVolumeClaim) {
				pvc.OwnerReferences = []metav1.OwnerReference{migrationRef(true)}
			})},
		"existing claim without the annotation": {dv: blankDV(func(dv *cdiv1.DataVolume) { dv.Annotations = nil }),
			claim: writtenClaim(), want: refused},
		"existing claim, adoption refused": {dv: blankDV(withAnnotation(AnnotationAllowClaimAdoption, "false")),
			claim: writtenClaim(), want: refused},
		"existing claim a DataVolume controls": {dv: blankDV(func(dv *cdiv1.DataVolume) { dv.Annotations = nil }),
			claim: writtenClaim(func(pvc *corev1.PersistentVolumeClaim) {
				pvc.OwnerReferences = []metav1.OwnerReference{dataVolumeControllerRef(blankDV())}
			})},
		"clone into an existing claim without the annotation": {dv: blankDV(func(dv *cdiv1.DataVolume) {
			dv.Annotations = nil
			dv.Spec.Source = &cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: "apps", Name: "staging"}}
		}), claim: writtenClaim(), want: refused},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var objs []runtime.Object
			if tc.claim != nil {
				objs = append(objs, tc.claim)
			}
			a := &Admission{c: &clients{kube: kubefake.NewSimpleClientset(objs...)}}
			resp := a.admitDataVolume(context.Background(), request(t, dataVolumeResource, tc.dv))
			if tc.want == "" {
				assert.True(t, resp.Allowed, "refused: %v", resp.Result)
				return
			}
			require.False(t, resp.Allowed, "admitted")
			assert.Equal(t, tc.want, resp.Result.Message, "CDI's refusal")
			assert.Equal(t, int32(http.StatusUnprocessableEntity), resp.Result.Code)
			require.Len(t, resp.Result.Details.Causes, 1)
			assert.Equal(t, "DataVolume.Name", resp.Result.Details.Causes[0].Field)
			assert.Equal(t, metav1.CauseTypeFieldValueDuplicate, resp.Result.Details.Causes[0].Type)
		})
	}

	t.Run("the mutating webhook lets a blank DataVolume through without a token", func(t *testing.T) {
		a := &Admission{c: &clients{kube: kubefake.NewSimpleClientset()}}
		resp := a.mutateDataVolume(context.Background(), request(t, dataVolumeResource, blankDV()))
		assert.True(t, resp.Allowed, "refused: %v", resp.Result)
		assert.Empty(t, resp.Patch, "a blank DataVolume needs no clone token")
	})
}

// cdiFixture is a CDI stand-in on fake clientsets, its DataVolume lister
// preloaded.
type cdiFixture struct {
	d       *CDI
	kube    *kubefake.Clientset
	cdi     *cdifake.Clientset
	dvs     cache.Indexer
	events  *record.FakeRecorder
	dvKey   string
	dvInAPI func() *cdiv1.DataVolume
}

func newCDIFixture(t *testing.T, dv *cdiv1.DataVolume, kubeObjs ...runtime.Object) *cdiFixture {
	t.Helper()
	f := &cdiFixture{
		kube:   kubefake.NewSimpleClientset(kubeObjs...),
		cdi:    cdifake.NewSimpleClientset(dv),
		dvs:    cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		events: record.NewFakeRecorder(10),
		dvKey:  dv.Namespace + "/" + dv.Name,
	}
	require.NoError(t, f.dvs.Add(dv))
	f.d = &CDI{
		cfg: Config{Root: t.TempDir()},
		c:   &clients{kube: f.kube, cdi: f.cdi, events: f.events},
		dvs: cdilisters.NewDataVolumeLister(f.dvs), copying: map[string]*cloneRun{},
	}
	f.dvInAPI = func() *cdiv1.DataVolume {
		got, err := f.cdi.CdiV1beta1().DataVolumes(dv.Namespace).Get(context.Background(), dv.Name, metav1.GetOptions{})
		require.NoError(t, err)
		return got
	}
	return f
}

// sync syncs the DataVolume, its informer's copy made the API server's
// first.
func (f *cdiFixture) sync(t *testing.T) (time.Duration, error) {
	t.Helper()
	require.NoError(t, f.dvs.Update(f.dvInAPI()))
	return f.d.sync(context.Background(), f.dvKey)
}

func (f *cdiFixture) claim(t *testing.T) *corev1.PersistentVolumeClaim {
	t.Helper()
	c, err := f.kube.CoreV1().PersistentVolumeClaims("apps").Get(context.Background(), adoptName, metav1.GetOptions{})
	require.NoError(t, err)
	return c
}

// writes are the kube client's mutating actions.
func (f *cdiFixture) writes() []string {
	var out []string
	for _, a := range f.kube.Actions() {
		if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
		}
	}
	return out
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

func condition(dv *cdiv1.DataVolume, typ cdiv1.DataVolumeConditionType) corev1.ConditionStatus {
	for _, c := range dv.Status.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

// TestCDIAdoptsClaim: the stand-in's controller adopts a claim as CDI's
// does: the DataVolume becomes the claim's controller beside its other
// owners and is Succeeded, with no pod and no claim made; a claim another
// controller holds keeps it.
func TestCDIAdoptsClaim(t *testing.T) {
	dvRef := dataVolumeControllerRef(blankDV())
	tests := map[string]struct {
		dv         *cdiv1.DataVolume
		claim      *corev1.PersistentVolumeClaim
		wantErr    string
		wantOwners []metav1.OwnerReference
		wantWrites []string
		wantPhase  cdiv1.DataVolumePhase
		wantEvents []string
	}{
		"a written claim": {
			dv: blankDV(), claim: writtenClaim(),
			wantOwners: []metav1.OwnerReference{migrationRef(false), dvRef},
			wantWrites: []string{"update persistentvolumeclaims"},
			wantPhase:  cdiv1.Succeeded,
		},
		"a claim it already controls (the status write was lost)": {
			dv: blankDV(), claim: writtenClaim(func(pvc *corev1.PersistentVolumeClaim) {
				pvc.OwnerReferences = append(pvc.OwnerReferences, dvRef)
			}),
			wantOwners: []metav1.OwnerReference{migrationRef(false), dvRef},
			wantPhase:  cdiv1.Succeeded,
		},
		"a claim controlled by an earlier DataVolume of the name": {
			dv: blankDV(), claim: writtenClaim(func(pvc *corev1.PersistentVolumeClaim) {
				old := dataVolumeControllerRef(blankDV())
				old.UID = "old-uid"
				pvc.OwnerReferences = []metav1.OwnerReference{old}
			}),
			wantOwners: []metav1.OwnerReference{dvRef},
			wantWrites: []string{"update persistentvolumeclaims"},
			wantPhase:  cdiv1.Succeeded,
		},
		"a claim another controller holds": {
			dv: blankDV(), claim: writtenClaim(func(pvc *corev1.PersistentVolumeClaim) {
				pvc.OwnerReferences = []metav1.OwnerReference{migrationRef(true)}
			}),
			wantErr:    "Object apps/" + adoptName + " is already owned by another Migration controller web-01",
			wantOwners: []metav1.OwnerReference{migrationRef(true)},
			// CDI's status update marks it Succeeded all the same.
			wantPhase:  cdiv1.Succeeded,
			wantEvents: []string{"Warning " + reasonClaimNotAdopted + " Object apps/" + adoptName + " is already owned by another Migration controller web-01"},
		},
		"a claim being deleted": {
			dv: blankDV(), claim: writtenClaim(func(pvc *corev1.PersistentVolumeClaim) {
				pvc.DeletionTimestamp = ptr.To(metav1.Now())
				pvc.Finalizers = []string{"kubernetes.io/pvc-protection"}
			}),
			wantErr:    `Resource "` + adoptName + `" marked for deletion`,
			wantOwners: []metav1.OwnerReference{migrationRef(false)},
			wantEvents: []string{"Warning " + reasonResourceMarkedForDeletion + ` Resource "` + adoptName + `" marked for deletion`},
		},
		"a clone whose claim exists, with the annotation": {
			dv: blankDV(func(dv *cdiv1.DataVolume) {
				dv.Spec.Source = &cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: "apps", Name: "staging"}}
			}),
			claim:      writtenClaim(),
			wantOwners: []metav1.OwnerReference{migrationRef(false), dvRef},
			wantWrites: []string{"update persistentvolumeclaims"},
			wantPhase:  cdiv1.Succeeded,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newCDIFixture(t, tc.dv, tc.claim)
			_, err := f.sync(t)
			if tc.wantErr != "" {
				assert.EqualError(t, err, tc.wantErr)
			} else {
				assert.NoError(t, err)
			}
			claim := f.claim(t)
			assert.Equal(t, tc.wantOwners, claim.OwnerReferences, "the claim's owners")
			assert.Equal(t, tc.wantWrites, f.writes(), "no pod, no claim: at most the claim's owners change")
			got := f.dvInAPI()
			assert.Equal(t, tc.wantPhase, got.Status.Phase)
			if tc.wantPhase == cdiv1.Succeeded {
				assert.Equal(t, cdiv1.DataVolumeProgress(adoptedProgress), got.Status.Progress, "no pod reported progress")
				assert.Equal(t, adoptName, got.Status.ClaimName)
				assert.Equal(t, corev1.ConditionTrue, condition(got, cdiv1.DataVolumeReady))
			}
			assert.Equal(t, tc.wantEvents, drainEvents(f.events))

			// Synced again, the DataVolume stays as it is and no new event
			// fires; a refusal is still an error, to be retried.
			_, err = f.sync(t)
			if tc.wantErr != "" {
				assert.EqualError(t, err, tc.wantErr, "the second sync")
			} else {
				assert.NoError(t, err, "the second sync")
			}
			assert.Equal(t, tc.wantPhase, f.dvInAPI().Status.Phase, "after the second sync")
			assert.Equal(t, tc.wantOwners, f.claim(t).OwnerReferences, "after the second sync")
			if tc.claim.DeletionTimestamp == nil {
				assert.Empty(t, drainEvents(f.events), "the second sync fired an event")
			}
		})
	}
}

// TestCDIBlankDataVolume: a blank DataVolume whose claim does not exist
// gets one of its own, with a sparse disk.img once bound, and is never
// adopting it; a claim of its name it did not make and may not adopt is
// refused as CDI refuses it.
func TestCDIBlankDataVolume(t *testing.T) {
	ctx := context.Background()
	f := newCDIFixture(t, blankDV())
	after, err := f.sync(t)
	require.NoError(t, err)
	assert.Equal(t, time.Second, after, "waiting for the claim to bind")
	claim := f.claim(t)
	assert.Equal(t, []metav1.OwnerReference{dataVolumeControllerRef(blankDV())}, claim.OwnerReferences)
	assert.Equal(t, "dv-uid", claim.Annotations[AnnotationCreatedForDataVolume], "the claim is marked as made for the DataVolume")
	assert.Equal(t, "16Mi", ptr.To(claim.Spec.Resources.Requests[corev1.ResourceStorage]).String())
	assert.Equal(t, ptr.To("standard"), claim.Spec.StorageClassName)
	assert.Equal(t, cdiv1.ImportScheduled, f.dvInAPI().Status.Phase)

	// The storage stand-in binds it.
	dir := filepath.Join(f.d.cfg.Root, "pv-1")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	_, err = f.kube.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-1"},
		Spec:       corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dir}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	claim.Spec.VolumeName, claim.Status.Phase = "pv-1", corev1.ClaimBound
	_, err = f.kube.CoreV1().PersistentVolumeClaims("apps").Update(ctx, claim, metav1.UpdateOptions{})
	require.NoError(t, err)

	after, err = f.sync(t)
	require.NoError(t, err)
	assert.Zero(t, after)
	info, err := os.Stat(filepath.Join(dir, "disk.img"))
	require.NoError(t, err, "the blank image")
	assert.Equal(t, int64(16<<20), info.Size())
	got := f.dvInAPI()
	assert.Equal(t, cdiv1.Succeeded, got.Status.Phase)
	assert.Equal(t, cdiv1.DataVolumeProgress("100.0%"), got.Status.Progress)
	assert.Empty(t, drainEvents(f.events))

	t.Run("a claim it may not adopt", func(t *testing.T) {
		f := newCDIFixture(t, blankDV(func(dv *cdiv1.DataVolume) { dv.Annotations = nil }), writtenClaim())
		_, err := f.sync(t)
		msg := `Resource "` + adoptName + `" already exists and is not managed by DataVolume`
		assert.EqualError(t, err, msg)
		assert.Equal(t, []string{"Warning " + reasonResourceExists + " " + msg}, drainEvents(f.events))
		assert.Empty(t, f.writes(), "the claim is left alone")
		assert.Equal(t, []metav1.OwnerReference{migrationRef(false)}, f.claim(t).OwnerReferences)
		assert.Empty(t, f.dvInAPI().Status.Phase)
	})
}

// TestCDICloneTargetNotAdopted: the claim the stand-in makes for a clone is
// marked as made for its DataVolume, so a clone that may adopt claims still
// copies into its own.
func TestCDICloneTargetNotAdopted(t *testing.T) {
	dv := blankDV(func(dv *cdiv1.DataVolume) {
		dv.Spec.Source = &cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: "apps", Name: "staging"}}
	})
	staging := writtenClaim(func(pvc *corev1.PersistentVolumeClaim) { pvc.Name, pvc.OwnerReferences = "staging", nil })
	f := newCDIFixture(t, dv, staging)
	// The source is not bound to a stand-in volume: the clone waits, but
	// makes its target first only once the source is ready; make the
	// target as the clone would.
	spec := storageClaimSpec(dv.Spec.Storage)
	require.NoError(t, f.d.createClaim(context.Background(), dv, spec))
	f.kube.ClearActions()
	_, _ = f.sync(t)
	assert.NotEqual(t, cdiv1.Succeeded, f.dvInAPI().Status.Phase, "the clone's own target was taken as adopted")
	for _, a := range f.kube.Actions() {
		assert.False(t, a.Matches("update", "persistentvolumeclaims"), "the clone's target changed: %v", a)
	}
}
