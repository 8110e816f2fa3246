package pipeline

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/preflight"
)

// TestRenderTargetClaims: a disk written in place gets the claim that
// becomes the VM's disk, named as its DataVolume, in the class, volume
// mode and access modes its mapping names (sql-02: disk 2000 Block RWX on
// fast-block, the ds-bulk disk Filesystem on bulk-hdd, the rest on
// standard); the migration owns it without controlling it (CDI's
// DataVolume becomes its controller) and labels it as the target's.
func TestRenderTargetClaims(t *testing.T) {
	m := onePass(windowsEFI())
	claims, err := RenderStagingClaims(m, ClaimDefaults{})
	require.NoError(t, err)
	require.Len(t, claims, len(m.Status.Disks))
	for i, c := range claims {
		d := m.Status.Disks[i]
		assert.Equal(t, d.DataVolume, c.Name, "disk %d: named as its DataVolume", d.Key)
		assert.Equal(t, v1alpha1.ComponentDisk, c.Labels[v1alpha1.LabelComponent], "disk %d", d.Key)
		assert.Equal(t, string(m.UID), c.Labels[v1alpha1.LabelMigrationUID], "disk %d", d.Key)
		// No owner at all (issue 46): a claim that outlives its
		// DataVolume (one deleted with --cascade=orphan to keep the disk)
		// must not go with the migration's deletion or its TTL. The
		// migration's own deletes of a rollback find it by its labels.
		assert.Empty(t, c.OwnerReferences, "disk %d: the VM's disk, owned by no migration", d.Key)
		assert.Nil(t, metav1.GetControllerOf(c), "disk %d: no controller, for CDI to adopt it", d.Key)
		st := diskStorageTarget(m, d)
		if assert.NotNil(t, c.Spec.StorageClassName, "disk %d", d.Key) {
			assert.Equal(t, st.StorageClassName, *c.Spec.StorageClassName, "disk %d: the mapped class", d.Key)
		}
	}
	byKey := map[int32]*corev1.PersistentVolumeClaim{}
	capacity := map[int32]int64{}
	for i, c := range claims {
		byKey[m.Status.Disks[i].Key] = c
		capacity[m.Status.Disks[i].Key] = m.Status.Disks[i].CapacityBytes
	}
	block := byKey[2000]
	assert.Equal(t, corev1.PersistentVolumeBlock, *block.Spec.VolumeMode, "disk 2000: Block, as mapped")
	assert.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, block.Spec.AccessModes, "disk 2000: as mapped")
	want, err := StagingSize(capacity[2000], 0)
	require.NoError(t, err)
	assert.Equal(t, want, block.Spec.Resources.Requests.Storage().Value(), "a Block claim is the disk, rounded up to a MiB")
	assert.Empty(t, block.Annotations[AnnotationContentType], "a Block claim holds no image file")
	for key, c := range byKey {
		if key == 2000 {
			continue
		}
		assert.Equal(t, corev1.PersistentVolumeFilesystem, *c.Spec.VolumeMode, "disk %d: Filesystem", key)
		assert.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, c.Spec.AccessModes, "disk %d: no modes named, no profile", key)
		assert.Equal(t, ContentTypeKubeVirt, c.Annotations[AnnotationContentType], "disk %d", key)
	}
}

// TestTargetClaimTakesTheStorageProfile: a mapping that names no modes
// gets those of the class's StorageProfile (its first claim property
// set), the default class's when it names no class either.
func TestTargetClaimTakesTheStorageProfile(t *testing.T) {
	block := corev1.PersistentVolumeBlock
	profiles := map[string]preflight.StorageProfileFact{
		"ceph-rbd": {ClaimPropertySets: 2, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, VolumeMode: &block},
		"local":    {ClaimPropertySets: 1, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}},
	}
	m := onePass(linuxBIOS()) // default storage: ceph-rbd, no modes
	claims, err := RenderStagingClaims(m, ClaimDefaults{Profiles: profiles})
	require.NoError(t, err)
	assert.Equal(t, corev1.PersistentVolumeBlock, *claims[0].Spec.VolumeMode)
	assert.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, claims[0].Spec.AccessModes)

	fs := corev1.PersistentVolumeFilesystem
	m.Status.AppliedSpec.Target.Storage.Default.VolumeMode = &fs
	claims, err = RenderStagingClaims(m, ClaimDefaults{Profiles: profiles})
	require.NoError(t, err)
	assert.Equal(t, corev1.PersistentVolumeFilesystem, *claims[0].Spec.VolumeMode, "the mapping's mode wins")
	assert.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, claims[0].Spec.AccessModes,
		"the profile's access modes are for Block: not taken for a Filesystem claim")

	m.Status.AppliedSpec.Target.Storage.Default = nil
	claims, err = RenderStagingClaims(m, ClaimDefaults{Profiles: profiles, DefaultClass: "local"})
	require.NoError(t, err)
	assert.Nil(t, claims[0].Spec.StorageClassName, "no class named: the cluster's default applies")
	assert.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}, claims[0].Spec.AccessModes, "the default class's profile")
}

// TestRenderAdoptingDataVolumes: the DataVolume of a disk written in place
// adopts its claim: CDI's adoption annotation, a blank source (nothing to
// import), and the claim's own class, modes and size; a claim missing
// from the cache is an error, never a DataVolume that would make an
// empty disk. A status of the clone path still renders clones.
func TestRenderAdoptingDataVolumes(t *testing.T) {
	m := onePass(windowsEFI())
	claims, err := RenderStagingClaims(m, ClaimDefaults{})
	require.NoError(t, err)
	dvs, err := RenderDataVolumes(m, claims)
	require.NoError(t, err)
	require.Len(t, dvs, len(claims))
	for i, dv := range dvs {
		c := claims[i]
		assert.Equal(t, c.Name, dv.Name)
		assert.Equal(t, "true", dv.Annotations[AnnotationAllowClaimAdoption], "%s", dv.Name)
		assert.Empty(t, dv.Annotations[AnnotationBindImmediate], "%s: nothing to bind", dv.Name)
		require.NotNil(t, dv.Spec.Source, "%s", dv.Name)
		assert.Equal(t, &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}}, dv.Spec.Source, "%s", dv.Name)
		assert.Equal(t, c.Spec.StorageClassName, dv.Spec.Storage.StorageClassName, "%s", dv.Name)
		assert.Equal(t, c.Spec.VolumeMode, dv.Spec.Storage.VolumeMode, "%s", dv.Name)
		assert.Equal(t, c.Spec.AccessModes, dv.Spec.Storage.AccessModes, "%s", dv.Name)
		assert.True(t, c.Spec.Resources.Requests.Storage().Equal(*dv.Spec.Storage.Resources.Requests.Storage()), "%s: the claim's size", dv.Name)
		assert.Empty(t, dv.OwnerReferences, "%s: owned by nothing until the VM adopts it", dv.Name)
	}
	_, err = RenderDataVolumes(m, claims[1:])
	assert.ErrorContains(t, err, "is not there to adopt")

	clone, err := RenderDataVolumes(windowsEFI(), nil)
	require.NoError(t, err)
	for _, dv := range clone {
		assert.NotNil(t, dv.Spec.Source.PVC, "%s: the clone path clones its staging claim", dv.Name)
		assert.Empty(t, dv.Annotations[AnnotationAllowClaimAdoption])
	}
}

// TestCreateDataVolumesAdoptsOnlyOwnClaims: the step renders the adopting
// DataVolumes from the claims its cache holds, and only the migration's
// own: a claim of the right name without the migration's UID label is
// not adopted (an error, no DataVolume).
func TestCreateDataVolumesAdoptsOnlyOwnClaims(t *testing.T) {
	m := onePass(linuxBIOS())
	claims, err := RenderStagingClaims(m, ClaimDefaults{})
	require.NoError(t, err)
	foreign := claims[0].DeepCopy()
	foreign.Labels = map[string]string{v1alpha1.LabelMigrationUID: "someone-else"}
	f := newFakeStep(t, foreign)
	err = f.step.CreateDataVolumes(context.Background(), m)
	assert.ErrorContains(t, err, "is not there to adopt")
	dvs, _ := f.CDI.CdiV1beta1().DataVolumes(m.Namespace).List(context.Background(), metav1.ListOptions{})
	assert.Empty(t, dvs.Items, "no DataVolume for a claim that is not the migration's")

	f = newFakeStep(t, claims[0])
	require.NoError(t, f.step.CreateDataVolumes(context.Background(), m))
	dv, err := f.CDI.CdiV1beta1().DataVolumes(m.Namespace).Get(context.Background(), claims[0].Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "true", dv.Annotations[AnnotationAllowClaimAdoption])
}

// TestCreateStagingClaimsReadsTheProfiles: the step gives a claim whose
// mapping leaves its modes open the modes of its class's StorageProfile.
func TestCreateStagingClaimsReadsTheProfiles(t *testing.T) {
	block := corev1.PersistentVolumeBlock
	profile := &cdiv1.StorageProfile{
		ObjectMeta: metav1.ObjectMeta{Name: "ceph-rbd"},
		Status: cdiv1.StorageProfileStatus{ClaimPropertySets: []cdiv1.ClaimPropertySet{
			{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, VolumeMode: &block},
		}},
	}
	m := onePass(linuxBIOS())
	f := newFakeStep(t, profile)
	require.NoError(t, f.step.CreateStagingClaims(context.Background(), m))
	c, err := f.Kube.CoreV1().PersistentVolumeClaims(m.Namespace).Get(context.Background(), m.Status.Disks[0].StagingClaim, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, ptr.To(corev1.PersistentVolumeBlock), c.Spec.VolumeMode)
	assert.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, c.Spec.AccessModes)
	assert.True(t, c.Spec.Resources.Requests.Storage().Cmp(*resource.NewQuantity(m.Status.Disks[0].CapacityBytes, resource.BinarySI)) >= 0)
}
