package pipeline

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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
		if err := f.step.CreateStagingClaims(ctx, m); err != nil {
			t.Fatalf("CreateStagingClaims: %v", err)
		}
		if err := f.step.CreateTransferJob(ctx, m, 1); err != nil {
			t.Fatalf("CreateTransferJob: %v", err)
		}
		if err := f.step.CreateConversionJob(ctx, m, 1); err != nil {
			t.Fatalf("CreateConversionJob: %v", err)
		}
		if err := f.step.CreateDataVolumes(ctx, m); err != nil {
			t.Fatalf("CreateDataVolumes: %v", err)
		}
		if err := f.step.CreateVM(ctx, m); err != nil {
			t.Fatalf("CreateVM: %v", err)
		}
	}
	pvcs, _ := f.Kube.CoreV1().PersistentVolumeClaims("apps").List(ctx, metav1.ListOptions{})
	jobs, _ := f.Kube.BatchV1().Jobs("apps").List(ctx, metav1.ListOptions{})
	cms, _ := f.Kube.CoreV1().ConfigMaps("apps").List(ctx, metav1.ListOptions{})
	dvs, _ := f.CDI.CdiV1beta1().DataVolumes("apps").List(ctx, metav1.ListOptions{})
	vms, _ := f.KV.KubevirtV1().VirtualMachines("apps").List(ctx, metav1.ListOptions{})
	for what, got := range map[string][2]int{
		"staging volumes": {len(pvcs.Items), 3}, "jobs": {len(jobs.Items), 2}, "config maps": {len(cms.Items), 2},
		"data volumes": {len(dvs.Items), 3}, "virtual machines": {len(vms.Items), 1},
	} {
		if got[0] != got[1] {
			t.Errorf("%s: %d exist, want %d", what, got[0], got[1])
		}
	}
	// Each object was asked for twice and exists once.
	if n := creates(f.Kube.Actions(), "persistentvolumeclaims"); n != 6 {
		t.Errorf("staging volume creates: %d, want 6 (3 created, 3 AlreadyExists)", n)
	}
	for _, pvc := range pvcs.Items {
		if pvc.Labels[v1alpha1.LabelComponent] != v1alpha1.ComponentStaging || !ours(&pvc, m.UID) {
			t.Errorf("staging volume %s labels: %v", pvc.Name, pvc.Labels)
		}
	}
	for _, dv := range dvs.Items {
		if len(dv.OwnerReferences) != 0 {
			t.Errorf("data volume %s has owners %v: the migration must not own it", dv.Name, dv.OwnerReferences)
		}
	}
	if len(vms.Items[0].OwnerReferences) != 0 {
		t.Errorf("virtual machine has owners %v: the migration must not own it", vms.Items[0].OwnerReferences)
	}
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
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
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
	noImageStep := &Step{Kube: f.Kube, KubeVirt: f.KV, CDI: f.CDI}
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
			err := tc.run()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestAdoptDataVolumes(t *testing.T) {
	ctx := context.Background()
	m := windowsEFI()
	f := newFakeStep(t)
	if err := f.step.CreateDataVolumes(ctx, m); err != nil {
		t.Fatal(err)
	}
	vm, err := RenderVirtualMachine(m)
	if err != nil {
		t.Fatal(err)
	}
	vm.UID = "vm-uid-1"
	if _, err := f.KV.KubevirtV1().VirtualMachines("apps").Create(ctx, vm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// One DataVolume already carries an unrelated (non-controller) owner: it stays.
	other := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "keep-me", UID: "cm-uid"}
	dv, _ := f.CDI.CdiV1beta1().DataVolumes("apps").Get(ctx, "sql-02-prod-disk-1", metav1.GetOptions{})
	dv.OwnerReferences = []metav1.OwnerReference{other}
	if _, err := f.CDI.CdiV1beta1().DataVolumes("apps").Update(ctx, dv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		f.sync()
		if err := f.step.AdoptDataVolumes(ctx, m); err != nil {
			t.Fatalf("AdoptDataVolumes: %v", err)
		}
	}
	patches := 0
	for _, a := range f.CDI.Actions() {
		if a.GetVerb() == "patch" {
			patches++
		}
	}
	if patches != 3 {
		t.Errorf("%d patches, want 3 (the second run finds them adopted)", patches)
	}
	for _, name := range []string{"sql-02-prod-disk-0", "sql-02-prod-disk-1", "sql-02-prod-disk-2"} {
		dv, err := f.CDI.CdiV1beta1().DataVolumes("apps").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c := metav1.GetControllerOf(dv)
		if c == nil || c.Kind != "VirtualMachine" || c.Name != "sql-02-prod" || c.UID != "vm-uid-1" || c.BlockOwnerDeletion == nil || !*c.BlockOwnerDeletion {
			t.Errorf("%s: controller %+v, want the VM", name, c)
		}
		if name == "sql-02-prod-disk-1" && (len(dv.OwnerReferences) != 2 || dv.OwnerReferences[0].Name != "keep-me") {
			t.Errorf("%s: owners %+v, want the unrelated owner kept", name, dv.OwnerReferences)
		}
	}

	// A DataVolume another controller holds is not taken over.
	f2 := newFakeStep(t, vm)
	if err := f2.step.CreateDataVolumes(ctx, m); err != nil {
		t.Fatal(err)
	}
	dv, _ = f2.CDI.CdiV1beta1().DataVolumes("apps").Get(ctx, "sql-02-prod-disk-0", metav1.GetOptions{})
	yes := true
	dv.OwnerReferences = []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine", Name: "other", UID: "other-uid", Controller: &yes}}
	_, _ = f2.CDI.CdiV1beta1().DataVolumes("apps").Update(ctx, dv, metav1.UpdateOptions{})
	f2.sync()
	if err := f2.step.AdoptDataVolumes(ctx, m); err == nil || !strings.Contains(err.Error(), "already controlled by VirtualMachine other") {
		t.Fatalf("error %v, want already controlled", err)
	}

	// A VM that is not this migration's (not even in the cache, which
	// holds the migrations' objects only) adopts nothing.
	foreign := vm.DeepCopy()
	foreign.Labels = nil
	f3 := newFakeStep(t, foreign)
	if err := f3.step.AdoptDataVolumes(ctx, m); err == nil || !strings.Contains(err.Error(), `"sql-02-prod" not found`) {
		t.Fatalf("error %v, want not found", err)
	}
	theirs := vm.DeepCopy()
	theirs.Labels = map[string]string{v1alpha1.LabelMigrationUID: "someone-else"}
	f4 := newFakeStep(t, theirs)
	if err := f4.step.AdoptDataVolumes(ctx, m); err == nil || !strings.Contains(err.Error(), "does not belong") {
		t.Fatalf("error %v, want does not belong", err)
	}
}

func TestSetRunStrategy(t *testing.T) {
	ctx := context.Background()
	m := linuxBIOS()
	vm, err := RenderVirtualMachine(m)
	if err != nil {
		t.Fatal(err)
	}
	f := newFakeStep(t, vm)
	for range 2 {
		f.sync()
		if err := f.step.SetRunStrategy(ctx, m, "Always"); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := f.KV.KubevirtV1().VirtualMachines("apps").Get(ctx, "web-01", metav1.GetOptions{})
	if got.Spec.RunStrategy == nil || *got.Spec.RunStrategy != kubevirtv1.RunStrategyAlways || got.Spec.Running != nil {
		t.Fatalf("runStrategy %v running %v, want Always and no running", got.Spec.RunStrategy, got.Spec.Running)
	}
	patches := 0
	for _, a := range f.KV.Actions() {
		if a.GetVerb() == "patch" {
			patches++
		}
	}
	if patches != 1 {
		t.Errorf("%d patches, want 1 (the second call finds it set)", patches)
	}
	f.sync()
	if err := f.step.SetRunStrategy(ctx, m, "Halted"); err != nil {
		t.Fatal(err)
	}
	got, _ = f.KV.KubevirtV1().VirtualMachines("apps").Get(ctx, "web-01", metav1.GetOptions{})
	if *got.Spec.RunStrategy != kubevirtv1.RunStrategyHalted {
		t.Fatalf("runStrategy %v, want Halted", *got.Spec.RunStrategy)
	}

	foreign := vm.DeepCopy()
	foreign.Labels = map[string]string{v1alpha1.LabelMigrationUID: "other"}
	f2 := newFakeStep(t, foreign)
	if err := f2.step.SetRunStrategy(ctx, m, "Always"); err == nil || !strings.Contains(err.Error(), "does not belong") {
		t.Fatalf("error %v, want does not belong", err)
	}
}

// TestTransferWithProgress: with a progress channel the attempt also gets
// its progress ConfigMap and narrow RBAC, each created once, and the pod
// runs as that ServiceAccount.
func TestTransferWithProgress(t *testing.T) {
	ctx := context.Background()
	m := linuxBIOS()
	f := newFakeStep(t)
	f.step.Config.TransferProgress = true
	for range 2 {
		if err := f.step.CreateTransferJob(ctx, m, 2); err != nil {
			t.Fatal(err)
		}
	}
	for resource, want := range map[string]int{"configmaps": 4, "serviceaccounts": 2, "roles": 2, "rolebindings": 2, "jobs": 2} {
		if n := creates(f.Kube.Actions(), resource); n != want {
			t.Errorf("%s: %d creates, want %d (half of them AlreadyExists)", resource, n, want)
		}
	}
	cms, _ := f.Kube.CoreV1().ConfigMaps("apps").List(ctx, metav1.ListOptions{})
	if len(cms.Items) != 2 {
		t.Errorf("%d config maps, want the job spec and the progress one", len(cms.Items))
	}
	job, err := f.Kube.BatchV1().Jobs("apps").Get(ctx, "web-01-migration-transfer-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sa := job.Spec.Template.Spec.ServiceAccountName; sa != "web-01-migration-transfer-2" {
		t.Errorf("service account %q", sa)
	}
	if _, err := f.Kube.RbacV1().Roles("apps").Get(ctx, "web-01-migration-transfer-2", metav1.GetOptions{}); err != nil {
		t.Errorf("role: %v", err)
	}
}
