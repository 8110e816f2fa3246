//go:build integration

package integration

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	kvclient "platform.example/vm-migration/pkg/generated/kubevirt/clientset/versioned"
	"platform.example/vm-migration/pkg/preflight"
	"platform.example/vm-migration/pkg/steps/pipeline"
	"platform.example/vm-migration/test/framework"
	"platform.example/vm-migration/test/standins"
)

// TestDryRunAsksTheAPIServer sends the objects of a migration, as the
// controller's ServiceAccount and with its clients, to the real API
// server with dryRun=All, in a namespace that enforces PodSecurity
// restricted, whose ResourceQuota allows no claim, with KubeVirt's and
// CDI's webhooks (the stand-ins) and a site's own webhook refusing
// VirtualMachines. Each refusal comes back in the API server's words:
// the quota's for the staging claims, the site webhook's for the VM;
// PodSecurity's warning for the conversion Job whose pods would run
// Unconfined; the transfer Job's restricted pod passes; nothing persists.
func TestDryRunAsksTheAPIServer(t *testing.T) {
	env := framework.Env(t)
	ns := env.Namespace(t)
	ctx := testContext(t)
	admin := env.Kubernetes(t)
	saConfig, _ := controllerIdentity(t, env)
	restrictNamespace(t, admin, ns)
	noClaimsQuota(t, admin, ns)
	startAdmission(t, env, ns)
	m := renderedMigration(ns)
	inv := m.Status.Source
	for i := range inv.Disks {
		inv.Disks[i].FileName = fmt.Sprintf("[ds1] web-01/web-01_%d.vmdk", i)
	}
	m.Status = v1alpha1.VirtualMachineMigrationStatus{Phase: v1alpha1.PhaseValidating}
	cfg := pipeline.Config{
		TransferImage: "registry.example/vm-migration-controller:v1", ConversionImage: "registry.example/virt-v2v:2.2",
		TransferProgress: true, DryRun: true, ConversionSeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined},
	}
	mp := m.DeepCopy()
	mp.Status.Source = inv
	objs, err := pipeline.RenderPlan(mp, cfg)
	require.NoError(t, err)
	vm := toUnstructured(t, objs[len(objs)-1])
	require.Equal(t, "VirtualMachine", vm.GetKind(), "the plan ends with the VM")
	policy, err := standins.StartPolicyWebhook(ctx, standins.PolicyConfig{RestConfig: env.Config(), Namespace: ns, Resource: vmGVR,
		Name: "vm-policy.e2e.platform.example", Message: "VirtualMachines in this namespace must carry the label cost-center (site policy)", Probe: vm})
	require.NoError(t, err)
	t.Cleanup(policy.Close)
	step := controllerStep(t, saConfig, cfg)
	got := step.DryRun(ctx, m, inv)
	require.Nil(t, got.Error, "the dry run could not be made: %+v", got.Error)
	byObject := map[string]v1alpha1.DryRunObject{}
	for _, o := range got.Status.Objects {
		byObject[o.Kind+"/"+o.Name] = o
		t.Logf("%s %s: %s %s", o.Kind, o.Name, o.Outcome, o.Message)
	}
	outcome := func(kind, name string, want v1alpha1.DryRunOutcome, words ...string) {
		t.Helper()
		o, ok := byObject[kind+"/"+name]
		require.True(t, ok, "no answer for %s %s", kind, name)
		assert.Equal(t, want, o.Outcome, "%s %s: %s", kind, name, o.Message)
		for _, w := range words {
			assert.Contains(t, o.Message, w, "%s %s", kind, name)
		}
	}
	outcome("PersistentVolumeClaim", "web-01-disk-0", v1alpha1.DryRunRefused, "exceeded quota: no-claims")
	outcome("Job", "web-01-convert-1", v1alpha1.DryRunWarned, `would violate PodSecurity "restricted:latest"`, "Unconfined")
	outcome("Job", "web-01-transfer-1", v1alpha1.DryRunAccepted)
	outcome("RoleBinding", "web-01-transfer-1", v1alpha1.DryRunUnchecked, "Role")
	outcome("Role", "web-01-transfer-1", v1alpha1.DryRunAccepted)
	outcome("VirtualMachine", "web-01", v1alpha1.DryRunRefused, `admission webhook "vm-policy.e2e.platform.example" denied the request`, "cost-center")
	outcome("DataVolume", "web-01-disk-0", v1alpha1.DryRunAccepted)
	assert.Equal(t, int32(3), got.Status.Refused, "two claims and the VM")

	sel := metav1.ListOptions{LabelSelector: v1alpha1.LabelMigrationUID + "=" + string(m.UID)}
	claims, err := admin.CoreV1().PersistentVolumeClaims(ns).List(ctx, sel)
	require.NoError(t, err)
	jobs, err := admin.BatchV1().Jobs(ns).List(ctx, sel)
	require.NoError(t, err)
	cms, err := admin.CoreV1().ConfigMaps(ns).List(ctx, sel)
	require.NoError(t, err)
	assert.Empty(t, claims.Items, "a dry run persisted a claim")
	assert.Empty(t, jobs.Items, "a dry run persisted a Job")
	assert.Empty(t, cms.Items, "a dry run persisted a ConfigMap")
}

// controllerStep is the pipeline step with the controller's clients, as
// its ServiceAccount, the API server's warnings collected per request.
func controllerStep(t *testing.T, saConfig *rest.Config, cfg pipeline.Config) *pipeline.Step {
	t.Helper()
	step, err := framework.PipelineStep(saConfig, cfg)
	require.NoError(t, err)
	return step
}

// restrictNamespace makes the namespace enforce PodSecurity restricted.
func restrictNamespace(t *testing.T, admin kubernetes.Interface, ns string) {
	t.Helper()
	patch := []byte(`{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"restricted","pod-security.kubernetes.io/enforce-version":"latest"}}}`)
	_, err := admin.CoreV1().Namespaces().Patch(testContext(t), ns, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err, "labelling namespace %s to enforce PodSecurity restricted", ns)
}

// noClaimsQuota creates a ResourceQuota allowing no claim, with the usage
// the quota controller (not running here) would count.
func noClaimsQuota(t *testing.T, admin kubernetes.Interface, ns string) {
	t.Helper()
	ctx := testContext(t)
	hard := corev1.ResourceList{corev1.ResourcePersistentVolumeClaims: resource.MustParse("0")}
	q, err := admin.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "no-claims"}, Spec: corev1.ResourceQuotaSpec{Hard: hard}}, metav1.CreateOptions{})
	require.NoError(t, err)
	q.Status = corev1.ResourceQuotaStatus{Hard: hard, Used: corev1.ResourceList{corev1.ResourcePersistentVolumeClaims: resource.MustParse("0")}}
	_, err = admin.CoreV1().ResourceQuotas(ns).UpdateStatus(ctx, q, metav1.UpdateOptions{})
	require.NoError(t, err, "counting the quota's usage")
}

// TestLauncherFactsAsTheController reads, as the controller's
// ServiceAccount with the RBAC of manifests/, what the namespace and
// KubeVirt's KubeVirt resource (test/crds) say of virt-launcher pods: a
// namespace enforcing restricted where KubeVirt gives them no seccomp
// profile is a blocking finding, named with its fix; with a profile, none.
func TestLauncherFactsAsTheController(t *testing.T) {
	env := framework.Env(t)
	ns := env.Namespace(t)
	kvNS := env.Namespace(t)
	ctx := testContext(t)
	admin := env.Kubernetes(t)
	saConfig, _ := controllerIdentity(t, env)
	restrictNamespace(t, admin, ns)
	kvAdmin, err := kvclient.NewForConfig(env.Config())
	require.NoError(t, err)
	kv, err := kvAdmin.KubevirtV1().KubeVirts(kvNS).Create(ctx, &kubevirtv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = kvAdmin.KubevirtV1().KubeVirts(kvNS).Delete(context.Background(), kv.Name, metav1.DeleteOptions{})
	})

	facts, err := controllerStep(t, saConfig, pipeline.Config{}).LauncherFacts(ctx, ns)
	require.NoError(t, err)
	assert.Equal(t, preflight.LauncherFacts{NamespaceEnforce: "restricted", KubeVirt: kvNS + "/kubevirt"}, facts)
	findings := preflight.Check(&v1alpha1.VirtualMachineMigrationSpec{}, &v1alpha1.SourceInventory{}, preflight.ClusterFacts{Launcher: facts})
	require.True(t, preflight.HasBlocking(findings))
	assert.Equal(t, preflight.ReasonLauncherSeccompMissing, findings[len(findings)-1].Reason)

	kv.Spec.Configuration.SeccompConfiguration = &kubevirtv1.SeccompConfiguration{VirtualMachineInstanceProfile: &kubevirtv1.VirtualMachineInstanceProfile{
		CustomProfile: &kubevirtv1.CustomProfile{RuntimeDefaultProfile: true}}}
	_, err = kvAdmin.KubevirtV1().KubeVirts(kvNS).Update(ctx, kv, metav1.UpdateOptions{})
	require.NoError(t, err)
	facts, err = controllerStep(t, saConfig, pipeline.Config{}).LauncherFacts(ctx, ns)
	require.NoError(t, err)
	assert.True(t, facts.LauncherSeccomp, "runtimeDefaultProfile gives virt-launcher RuntimeDefault")
}
