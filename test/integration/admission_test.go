//go:build integration

package integration

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/steps/pipeline"
	"platform.example/vm-migration/test/builders"
	"platform.example/vm-migration/test/framework"
	"platform.example/vm-migration/test/standins"
)

var (
	vmGVR = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachines"}
	dvGVR = schema.GroupVersionResource{Group: "cdi.kubevirt.io", Version: "v1beta1", Resource: "datavolumes"}
)

// startAdmission runs the stand-ins' webhooks for ns until t ends.
func startAdmission(t *testing.T, env *framework.Environment, ns string) {
	t.Helper()
	a, err := standins.StartAdmission(testContext(t), standins.Config{RestConfig: env.Config(), Namespace: ns})
	require.NoError(t, err, "starting the admission webhook stand-ins for %s", ns)
	t.Cleanup(a.Close)
}

// renderedMigration is the admission tests' migration in ns
// (builders.AdmissionMigration).
func renderedMigration(ns string) *v1alpha1.VirtualMachineMigration {
	return builders.AdmissionMigration(ns)
}

// toUnstructured converts a typed object for the dynamic client.
func toUnstructured(t *testing.T, obj runtime.Object) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	require.NoError(t, err, "converting %T to unstructured", obj)
	return &unstructured.Unstructured{Object: m}
}

// TestAdmissionRejectsWhatKubeVirtRejects creates the VirtualMachine the
// controller renders, as it does (strict field validation), then breaks it
// one way at a time: the API server (by KubeVirt's real schema) or the
// KubeVirt webhook stand-in refuses each with KubeVirt's message.
func TestAdmissionRejectsWhatKubeVirtRejects(t *testing.T) {
	env := framework.Env(t)
	ns := env.Namespace(t)
	ctx := testContext(t)
	startAdmission(t, env, ns)
	vm, err := pipeline.RenderVirtualMachine(renderedMigration(ns))
	require.NoError(t, err, "rendering the VirtualMachine")
	api := env.Dynamic(t).Resource(vmGVR).Namespace(ns)
	strict := metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}
	_, err = api.Create(ctx, toUnstructured(t, vm), strict)
	require.NoError(t, err, "the rendered VM is refused")
	for _, tc := range builders.VMRefusals() {
		t.Run(tc.Name, func(t *testing.T) {
			obj, err := tc.Broken(vm)
			require.NoError(t, err)
			obj.SetName("bad")
			_, err = api.Create(ctx, obj, strict)
			require.ErrorContains(t, err, tc.Want, "creating the broken VM")
			t.Logf("refused: %v", err)
		})
	}
}

// TestAdmissionRejectsWhatCDIRejects creates the DataVolumes the
// controller renders, then breaks one at a time: the CDI webhook stand-in
// refuses each with CDI's message.
func TestAdmissionRejectsWhatCDIRejects(t *testing.T) {
	env := framework.Env(t)
	ns := env.Namespace(t)
	ctx := testContext(t)
	startAdmission(t, env, ns)
	dvs, err := pipeline.RenderDataVolumes(renderedMigration(ns), nil)
	require.NoError(t, err, "rendering the DataVolumes")
	api := env.Dynamic(t).Resource(dvGVR).Namespace(ns)
	strict := metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}
	created, err := api.Create(ctx, toUnstructured(t, dvs[0]), strict)
	require.NoError(t, err, "the rendered DataVolume is refused")
	assert.NotEmpty(t, created.GetAnnotations()[standins.AnnotationCloneToken],
		"the clone was admitted without a clone token: %v", created.GetAnnotations())
	const webhook = `admission webhook "datavolume-validate.cdi.kubevirt.io" denied the request: `
	size := func(q string) corev1.VolumeResourceRequirements {
		return corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(q)}}
	}
	cases := []struct {
		name   string
		mutate func(*cdiv1.DataVolume)
		want   string
	}{
		{"both pvc and storage", func(d *cdiv1.DataVolume) { d.Spec.PVC = &corev1.PersistentVolumeClaimSpec{} },
			webhook + " Duplicate storage definition, both target storage and target pvc defined"},
		{"no target", func(d *cdiv1.DataVolume) { d.Spec.Storage = nil }, webhook + " Missing Data volume PVC"},
		{"pvc target without size", func(d *cdiv1.DataVolume) {
			d.Spec.Storage = nil
			d.Spec.PVC = &corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}}
		}, webhook + " PVC size is missing"},
		{"size under 1MiB", func(d *cdiv1.DataVolume) { d.Spec.Storage.Resources = size("512Ki") }, webhook + " Storage size should be at least 1MiB"},
		{"two sources", func(d *cdiv1.DataVolume) { d.Spec.Source.Blank = &cdiv1.DataVolumeBlankImage{} }, webhook + " Multiple Data volume sources"},
		{"no source", func(d *cdiv1.DataVolume) { d.Spec.Source, d.Spec.Storage.Resources = nil, size("1Gi") },
			webhook + " Data volume should have either Source or SourceRef, or be externally populated"},
		{"source claim without namespace", func(d *cdiv1.DataVolume) { d.Spec.Source.PVC.Namespace = "" },
			webhook + " spec.source.PVC source PVC is not valid"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bad := dvs[1].DeepCopy()
			tc.mutate(bad)
			_, err := api.Create(ctx, toUnstructured(t, bad), strict)
			require.ErrorContains(t, err, tc.want, "creating the broken DataVolume")
		})
	}
	created.Object["spec"].(map[string]any)["contentType"] = "archive"
	_, err = api.Update(ctx, created, metav1.UpdateOptions{})
	assert.ErrorContains(t, err, "Cannot update DataVolume Spec", "changing a DataVolume's spec, want CDI's refusal")
}

// TestRenderedGoldensAdmitted creates every VirtualMachine and DataVolume
// of the pipeline's golden files (BIOS Linux, EFI secure-boot Windows with
// Hyper-V and three storage mappings, a VM with an ignored NIC and no
// network) with strict field validation, through KubeVirt's and CDI's
// schemas and the webhook stand-ins: what the controller renders is what
// a real cluster accepts.
func TestRenderedGoldensAdmitted(t *testing.T) {
	env := framework.Env(t)
	ns := env.Namespace(t)
	ctx := testContext(t)
	startAdmission(t, env, ns)
	files, err := globRepo("pkg/steps/pipeline/testdata/*-*.golden")
	require.NoError(t, err, "listing the pipeline's golden files")
	strict := metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}
	dyn := env.Dynamic(t)
	created := 0
	for _, f := range files {
		if !strings.HasSuffix(f, "-vm.golden") && !strings.HasSuffix(f, "-datavolumes.golden") {
			continue
		}
		objs, err := framework.ReadObjects(f)
		require.NoError(t, err, "reading %s", f)
		for _, o := range objs {
			o.SetNamespace(ns)
			gvr := vmGVR
			if o.GetKind() == "DataVolume" {
				gvr = dvGVR
				_ = unstructured.SetNestedField(o.Object, ns, "spec", "source", "pvc", "namespace")
			}
			_, err := dyn.Resource(gvr).Namespace(ns).Create(ctx, o, strict)
			if !assert.NoError(t, err, "%s: %s %s refused", f, o.GetKind(), o.GetName()) {
				continue
			}
			created++
		}
	}
	assert.GreaterOrEqual(t, created, 6, "objects created from the golden files")
}
