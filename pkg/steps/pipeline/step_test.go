package pipeline

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/test/builders"
)

// creates counts the create actions on a resource.
func creates(actions []k8stesting.Action, resource string) int {
	n := 0
	for _, a := range actions {
		if a.GetVerb() == "create" && a.GetResource().Resource == resource {
			n++
		}
	}
	return n
}

// itemNames are the names of a list's items (what a failed count shows).
func itemNames[T any, PT interface {
	*T
	metav1.Object
}](items []T) []string {
	names := make([]string, 0, len(items))
	for i := range items {
		names = append(names, PT(&items[i]).GetName())
	}
	return names
}

func foreignMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: "apps", Labels: map[string]string{v1alpha1.LabelMigrationUID: "someone-else"}}
}

// TestCreateTwiceCreatesOnce runs every create step twice: the second run
// meets AlreadyExists of its own objects and succeeds without a change.
func TestCreateTwiceCreatesOnce(t *testing.T) {
	ctx := context.Background()
	m := windowsEFI()
	f := newFakeStep(t)
	for range 2 {
		require.NoError(t, f.step.CreateStagingClaims(ctx, m), "CreateStagingClaims")
		require.NoError(t, f.step.CreateTransferJob(ctx, m, 1), "CreateTransferJob")
		require.NoError(t, f.step.CreateConversionJob(ctx, m, 1), "CreateConversionJob")
		require.NoError(t, f.step.CreateDataVolumes(ctx, m), "CreateDataVolumes")
		require.NoError(t, f.step.CreateVM(ctx, m), "CreateVM")
	}
	pvcs, err := f.Kube.CoreV1().PersistentVolumeClaims("apps").List(ctx, metav1.ListOptions{})
	require.NoError(t, err, "listing the staging volumes")
	jobs, err := f.Kube.BatchV1().Jobs("apps").List(ctx, metav1.ListOptions{})
	require.NoError(t, err, "listing the jobs")
	cms, err := f.Kube.CoreV1().ConfigMaps("apps").List(ctx, metav1.ListOptions{})
	require.NoError(t, err, "listing the config maps")
	dvs, err := f.CDI.CdiV1beta1().DataVolumes("apps").List(ctx, metav1.ListOptions{})
	require.NoError(t, err, "listing the data volumes")
	vms, err := f.KV.KubevirtV1().VirtualMachines("apps").List(ctx, metav1.ListOptions{})
	require.NoError(t, err, "listing the virtual machines")
	assert.Len(t, itemNames(pvcs.Items), 3, "staging volumes: one per disk")
	assert.Len(t, itemNames(jobs.Items), 2, "jobs: the transfer and the conversion")
	assert.Len(t, itemNames(cms.Items), 2, "config maps: the transfer's spec and the conversion's domain")
	assert.Len(t, itemNames(dvs.Items), 3, "data volumes: one per disk")
	require.Len(t, itemNames(vms.Items), 1, "virtual machines")
	// Each object was asked for twice and exists once.
	assert.Equal(t, 6, creates(f.Kube.Actions(), "persistentvolumeclaims"), "staging volume creates: 3 created, 3 AlreadyExists")
	for _, pvc := range pvcs.Items {
		assert.Equal(t, v1alpha1.ComponentStaging, pvc.Labels[v1alpha1.LabelComponent], "staging volume %s: labelled as staging", pvc.Name)
		assert.True(t, ours(&pvc, m.UID), "staging volume %s labels %v: not labelled as the migration's", pvc.Name, pvc.Labels)
	}
	for _, dv := range dvs.Items {
		assert.Empty(t, dv.OwnerReferences, "data volume %s: the migration must not own it", dv.Name)
	}
	assert.Empty(t, vms.Items[0].OwnerReferences, "virtual machine: the migration must not own it")
}

// TestForeignObjectIsAnError: an object of the same name that is not this
// migration's stops each create step with an error naming it.
func TestForeignObjectIsAnError(t *testing.T) {
	ctx := context.Background()
	m := linuxBIOS()
	tests := map[string]struct {
		kube, kv, cdi []runtime.Object
		run           func(*Step) error
		want          string
	}{
		"staging volume": {
			kube: []runtime.Object{&corev1.PersistentVolumeClaim{ObjectMeta: foreignMeta("web-01-migration-staging-2000")}},
			run:  func(s *Step) error { return s.CreateStagingClaims(ctx, m) },
			want: "staging volume apps/web-01-migration-staging-2000 exists and does not belong to migration web-01-migration",
		},
		"transfer config map": {
			kube: []runtime.Object{&corev1.ConfigMap{ObjectMeta: foreignMeta("web-01-migration-transfer-1-spec")}},
			run:  func(s *Step) error { return s.CreateTransferJob(ctx, m, 1) },
			want: "config map apps/web-01-migration-transfer-1-spec exists and does not belong",
		},
		"conversion job": {
			kube: []runtime.Object{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
				Name: "web-01-migration-convert-1-domain", Namespace: "apps", Labels: childLabels(m, v1alpha1.ComponentConversion)}}},
			run:  func(s *Step) error { return s.CreateConversionJob(ctx, m, 1) },
			want: "", // its own ConfigMap is fine
		},
		"data volume without labels": {
			cdi:  []runtime.Object{&cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Name: "web-01-disk-0", Namespace: "apps"}}},
			run:  func(s *Step) error { return s.CreateDataVolumes(ctx, m) },
			want: `data volume apps/web-01-disk-0 exists and does not belong to migration web-01-migration (label migration.platform.example/migration-uid="")`,
		},
		"virtual machine": {
			kv:   []runtime.Object{&kubevirtv1.VirtualMachine{ObjectMeta: foreignMeta("web-01")}},
			run:  func(s *Step) error { return s.CreateVM(ctx, m) },
			want: "virtual machine apps/web-01 exists and does not belong",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFakeStep(t, slices.Concat(tc.kube, tc.kv, tc.cdi)...)
			err := tc.run(f.step)
			if tc.want == "" {
				assert.NoError(t, err, "the migration's own object is no obstacle")
			} else {
				assert.ErrorContains(t, err, tc.want, "an object of the same name that is not the migration's stops the step")
			}
		})
	}
}

// TestRenderErrors: a migration without what a step needs fails with an
// error, never a panic.
func TestRenderErrors(t *testing.T) {
	ctx := context.Background()
	empty := builders.Migration(builders.Named("x"))
	noImage := linuxBIOS()
	twoPod := linuxBIOS()
	twoPod.Status.Source.NICs = append(twoPod.Status.Source.NICs, v1alpha1.SourceNIC{Key: 4001, Label: "Network adapter 2", Network: "VM Network"})
	badMAC := linuxBIOS()
	badMAC.Status.Source.NICs[0].MAC = "00:50:56"
	unmapped := linuxBIOS()
	unmapped.Status.AppliedSpec.Target.Networks = nil
	badFirmware := linuxBIOS()
	badFirmware.Status.Source.Firmware = "CSM"
	f := newFakeStep(t)
	noImageStep := &Step{Kube: f.Kube, KubeVirt: f.KV, CDI: f.CDI, Listers: f.step.Listers}
	tests := map[string]struct {
		run  func() error
		want string
	}{
		"staging without disks":    {func() error { return f.step.CreateStagingClaims(ctx, empty) }, "no disks recorded"},
		"transfer without source":  {func() error { return f.step.CreateTransferJob(ctx, empty, 1) }, "not inventoried"},
		"transfer attempt 0":       {func() error { return f.step.CreateTransferJob(ctx, linuxBIOS(), 0) }, "attempts count from 1"},
		"transfer without image":   {func() error { return noImageStep.CreateTransferJob(ctx, noImage, 1) }, "no transfer image"},
		"conversion without image": {func() error { return noImageStep.CreateConversionJob(ctx, noImage, 1) }, "no conversion image"},
		"data volumes w/o disks":   {func() error { return f.step.CreateDataVolumes(ctx, empty) }, "no disks recorded"},
		"vm without source":        {func() error { return f.step.CreateVM(ctx, empty) }, "not inventoried"},
		"two pod NICs":             {func() error { return f.step.CreateVM(ctx, twoPod) }, "both map to the pod network"},
		"bad MAC":                  {func() error { return f.step.CreateVM(ctx, badMAC) }, "not a 48-bit MAC"},
		"unmapped network":         {func() error { return f.step.CreateVM(ctx, unmapped) }, `source network "VM Network" has no entry`},
		"unknown firmware":         {func() error { return f.step.CreateVM(ctx, badFirmware) }, `unsupported firmware "CSM"`},
		"unknown run strategy":     {func() error { return f.step.SetRunStrategy(ctx, linuxBIOS(), "Sometimes") }, "unknown run strategy"},
		"adopt without VM":         {func() error { return f.step.AdoptDataVolumes(ctx, linuxBIOS()) }, "reading virtual machine apps/web-01"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assert.ErrorContains(t, tc.run(), tc.want, "the step fails with an error naming what is missing")
		})
	}
}

func TestAdoptDataVolumes(t *testing.T) {
	ctx := context.Background()
	m := windowsEFI()
	f := newFakeStep(t)
	require.NoError(t, f.step.CreateDataVolumes(ctx, m), "CreateDataVolumes")
	vm, err := RenderVirtualMachine(m)
	require.NoError(t, err, "rendering the VirtualMachine")
	vm.UID = "vm-uid-1"
	_, err = f.KV.KubevirtV1().VirtualMachines("apps").Create(ctx, vm, metav1.CreateOptions{})
	require.NoError(t, err, "creating the VirtualMachine")
	// One DataVolume already carries an unrelated (non-controller) owner: it stays.
	other := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "keep-me", UID: "cm-uid"}
	dv, err := f.CDI.CdiV1beta1().DataVolumes("apps").Get(ctx, "sql-02-prod-disk-1", metav1.GetOptions{})
	require.NoError(t, err, "reading DataVolume sql-02-prod-disk-1")
	dv.OwnerReferences = []metav1.OwnerReference{other}
	_, err = f.CDI.CdiV1beta1().DataVolumes("apps").Update(ctx, dv, metav1.UpdateOptions{})
	require.NoError(t, err, "giving DataVolume sql-02-prod-disk-1 an unrelated owner")
	for i := range 2 {
		f.sync()
		require.NoError(t, f.step.AdoptDataVolumes(ctx, m), "AdoptDataVolumes, run %d", i+1)
	}
	patches := 0
	for _, a := range f.CDI.Actions() {
		if a.GetVerb() == "patch" {
			patches++
		}
	}
	assert.Equal(t, 3, patches, "patches: one per DataVolume, the second run finds them adopted")
	for _, name := range []string{"sql-02-prod-disk-0", "sql-02-prod-disk-1", "sql-02-prod-disk-2"} {
		dv, err := f.CDI.CdiV1beta1().DataVolumes("apps").Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err, "reading DataVolume %s", name)
		c := metav1.GetControllerOf(dv)
		if assert.NotNil(t, c, "%s: controlled by the VM", name) {
			assert.Equal(t, "VirtualMachine", c.Kind, "%s: controlled by the VM", name)
			assert.Equal(t, "sql-02-prod", c.Name, "%s: controlled by the VM", name)
			assert.Equal(t, types.UID("vm-uid-1"), c.UID, "%s: controlled by the VM", name)
			assert.Equal(t, ptrTo(true), c.BlockOwnerDeletion, "%s: blocks the VM's deletion until deleted", name)
		}
		if name == "sql-02-prod-disk-1" && assert.Len(t, dv.OwnerReferences, 2, "%s: the unrelated owner and the VM", name) {
			assert.Equal(t, "keep-me", dv.OwnerReferences[0].Name, "%s: the unrelated owner is kept", name)
		}
	}

	// A DataVolume another controller holds is not taken over.
	f2 := newFakeStep(t, vm)
	require.NoError(t, f2.step.CreateDataVolumes(ctx, m), "CreateDataVolumes")
	dv, err = f2.CDI.CdiV1beta1().DataVolumes("apps").Get(ctx, "sql-02-prod-disk-0", metav1.GetOptions{})
	require.NoError(t, err, "reading DataVolume sql-02-prod-disk-0")
	yes := true
	dv.OwnerReferences = []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine", Name: "other", UID: "other-uid", Controller: &yes}}
	_, err = f2.CDI.CdiV1beta1().DataVolumes("apps").Update(ctx, dv, metav1.UpdateOptions{})
	require.NoError(t, err, "giving DataVolume sql-02-prod-disk-0 another controller")
	f2.sync()
	assert.ErrorContains(t, f2.step.AdoptDataVolumes(ctx, m), "already controlled by VirtualMachine other",
		"a DataVolume another controller holds is not taken over")

	// A VM that is not this migration's (not even in the cache, which
	// holds the migrations' objects only) adopts nothing.
	foreign := vm.DeepCopy()
	foreign.Labels = nil
	f3 := newFakeStep(t, foreign)
	assert.ErrorContains(t, f3.step.AdoptDataVolumes(ctx, m), `"sql-02-prod" not found`, "a VM without the migration's label is not found")
	theirs := vm.DeepCopy()
	theirs.Labels = map[string]string{v1alpha1.LabelMigrationUID: "someone-else"}
	f4 := newFakeStep(t, theirs)
	assert.ErrorContains(t, f4.step.AdoptDataVolumes(ctx, m), "does not belong", "another migration's VM adopts nothing")
}

func TestSetRunStrategy(t *testing.T) {
	ctx := context.Background()
	m := linuxBIOS()
	vm, err := RenderVirtualMachine(m)
	require.NoError(t, err, "rendering the VirtualMachine")
	f := newFakeStep(t, vm)
	for i := range 2 {
		f.sync()
		require.NoError(t, f.step.SetRunStrategy(ctx, m, "Always"), "SetRunStrategy Always, call %d", i+1)
	}
	got, err := f.KV.KubevirtV1().VirtualMachines("apps").Get(ctx, "web-01", metav1.GetOptions{})
	require.NoError(t, err, "reading the VirtualMachine")
	assert.Equal(t, ptrTo(kubevirtv1.RunStrategyAlways), got.Spec.RunStrategy, "the VM's run strategy")
	assert.Nil(t, got.Spec.Running, "spec.running must be unset beside a run strategy")
	patches := 0
	for _, a := range f.KV.Actions() {
		if a.GetVerb() == "patch" {
			patches++
		}
	}
	assert.Equal(t, 1, patches, "patches: the second call finds the run strategy set")
	f.sync()
	require.NoError(t, f.step.SetRunStrategy(ctx, m, "Halted"), "SetRunStrategy Halted")
	got, err = f.KV.KubevirtV1().VirtualMachines("apps").Get(ctx, "web-01", metav1.GetOptions{})
	require.NoError(t, err, "reading the VirtualMachine")
	assert.Equal(t, ptrTo(kubevirtv1.RunStrategyHalted), got.Spec.RunStrategy, "the VM's run strategy")

	// A VM that still has spec.running (the rendered one never has) gets
	// it cleared with the run strategy: the webhook rejects both set.
	legacy := vm.DeepCopy()
	legacy.Spec.RunStrategy, legacy.Spec.Running = nil, ptrTo(true)
	f3 := newFakeStep(t, legacy)
	require.NoError(t, f3.step.SetRunStrategy(ctx, m, "Always"), "SetRunStrategy Always on a VM with spec.running")
	got, err = f3.KV.KubevirtV1().VirtualMachines("apps").Get(ctx, "web-01", metav1.GetOptions{})
	require.NoError(t, err, "reading the VirtualMachine")
	assert.Equal(t, ptrTo(kubevirtv1.RunStrategyAlways), got.Spec.RunStrategy, "the VM's run strategy")
	assert.Nil(t, got.Spec.Running, "spec.running must be cleared beside a run strategy")

	foreign := vm.DeepCopy()
	foreign.Labels = map[string]string{v1alpha1.LabelMigrationUID: "other"}
	f2 := newFakeStep(t, foreign)
	assert.ErrorContains(t, f2.step.SetRunStrategy(ctx, m, "Always"), "does not belong", "another migration's VM is left alone")
}

// TestTransferWithProgress: with a progress channel the attempt also gets
// its progress ConfigMap and narrow RBAC, each created once, and the pod
// runs as that ServiceAccount.
func TestTransferWithProgress(t *testing.T) {
	ctx := context.Background()
	m := linuxBIOS()
	f := newFakeStep(t)
	f.step.Config.TransferProgress = true
	for i := range 2 {
		require.NoError(t, f.step.CreateTransferJob(ctx, m, 2), "CreateTransferJob, call %d", i+1)
	}
	for resource, want := range map[string]int{"configmaps": 4, "serviceaccounts": 2, "roles": 2, "rolebindings": 2, "jobs": 2} {
		assert.Equal(t, want, creates(f.Kube.Actions(), resource), "%s creates: half of them AlreadyExists", resource)
	}
	cms, err := f.Kube.CoreV1().ConfigMaps("apps").List(ctx, metav1.ListOptions{})
	require.NoError(t, err, "listing the config maps")
	assert.Len(t, itemNames(cms.Items), 2, "config maps: the job spec and the progress one")
	job, err := f.Kube.BatchV1().Jobs("apps").Get(ctx, "web-01-migration-transfer-2", metav1.GetOptions{})
	require.NoError(t, err, "reading the transfer Job")
	assert.Equal(t, "web-01-migration-transfer-2", job.Spec.Template.Spec.ServiceAccountName, "the transfer pod runs as its attempt's service account")
	_, err = f.Kube.RbacV1().Roles("apps").Get(ctx, "web-01-migration-transfer-2", metav1.GetOptions{})
	assert.NoError(t, err, "the attempt's role exists")
}
