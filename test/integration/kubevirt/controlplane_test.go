//go:build integration

package kubevirt

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"platform.example/vm-migration/pkg/steps/pipeline"
	"platform.example/vm-migration/test/builders"
	"platform.example/vm-migration/test/framework"
	"platform.example/vm-migration/test/framework/kubevirt"
)

var vmGVR = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachines"}

var (
	installOnce sync.Once
	installErr  error
)

// kubevirtEnv skips t without the build, else returns the suite's
// environment with KubeVirt's control plane installed on its node (once
// per suite: its images imported, then kubevirt.Install; with
// $KUBEVIRT_NODE_DIR, virt-handler and virt-launcher too).
func kubevirtEnv(t *testing.T) *framework.Environment {
	t.Helper()
	dir := kubevirtDir(t)
	env := framework.Env(t)
	installOnce.Do(func() {
		ctx := context.Background()
		b, err := kubevirt.LoadBuild(dir)
		if err != nil {
			installErr = err
			return
		}
		tarballs := b.Tarballs
		var node *kubevirt.NodeBuild
		if nodeDir := os.Getenv(kubevirt.EnvNodeDir); nodeDir != "" {
			if node, installErr = kubevirt.LoadNodeBuild(nodeDir); installErr != nil {
				return
			}
			tarballs = append(tarballs, node.Tarballs...)
		}
		for _, tb := range tarballs {
			t0 := time.Now()
			if installErr = env.ImportImage(ctx, tb); installErr != nil {
				return
			}
			fi, _ := os.Stat(tb)
			t.Logf("imported %s (%d MiB) in %s", filepath.Base(tb), fi.Size()>>20, time.Since(t0).Round(time.Millisecond))
		}
		installErr = kubevirt.Install(ctx, env.Config(), kubevirt.Options{Build: b, Node: node, Logf: t.Logf, Timeout: 6 * time.Minute})
	})
	require.NoError(t, installErr, "installing KubeVirt's control plane on the node")
	return env
}

// TestControlPlaneRunsOnTheNode: virt-api and virt-controller run as the
// Deployments of KubeVirt's generators, from images built here, on the
// node; virt-controller leads (its Lease names its pod).
func TestControlPlaneRunsOnTheNode(t *testing.T) {
	env := kubevirtEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs := env.Kubernetes(t)
	for _, app := range []string{kubevirt.APIName, kubevirt.ControllerName} {
		pods, err := cs.CoreV1().Pods(kubevirt.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "kubevirt.io=" + app})
		require.NoError(t, err)
		require.Len(t, pods.Items, 1, "%s pods", app)
		p := pods.Items[0]
		assert.Equal(t, env.NodeName(), p.Spec.NodeName, "%s runs on the node", app)
		assert.True(t, strings.HasPrefix(p.Spec.Containers[0].Image, "localhost/kubevirt/"+app+":"), "%s image %s", app, p.Spec.Containers[0].Image)
		t.Logf("%s: pod %s on %s, image %s", app, p.Name, p.Spec.NodeName, p.Spec.Containers[0].Image)
	}
	var holder string
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		lease, err := cs.CoordinationV1().Leases(kubevirt.Namespace).Get(ctx, "virt-controller", metav1.GetOptions{})
		if err != nil || lease.Spec.HolderIdentity == nil {
			return false, nil
		}
		holder = *lease.Spec.HolderIdentity
		return strings.HasPrefix(holder, kubevirt.ControllerName+"-"), nil
	})
	require.NoError(t, err, "virt-controller's lease holder %q", holder)
	t.Logf("virt-controller leads as %s", holder)
}

// toUnstructured converts a typed object for the dynamic client.
func toUnstructured(t *testing.T, obj runtime.Object) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	require.NoError(t, err, "converting %T to unstructured", obj)
	return &unstructured.Unstructured{Object: m}
}

// TestRealWebhooksJudgeTheRenderedVM: the VirtualMachine the controller
// renders passes KubeVirt's own webhooks (a server-side dry run, as the
// controller's Validating phase sends it), and each broken copy of the
// stand-in's table is refused with the words the stand-in gives. (The
// firmware serial the controller renders, VMware's without its spaces,
// passes; v1.8.2 has no firmware-serial rule: KubeVirt v1.9's
// validateFirmwareSerial, which refuses the spaces, is not in it.)
func TestRealWebhooksJudgeTheRenderedVM(t *testing.T) {
	env := kubevirtEnv(t)
	ns := env.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	vm, err := pipeline.RenderVirtualMachine(builders.AdmissionMigration(ns))
	require.NoError(t, err, "rendering the VirtualMachine")
	api := env.Dynamic(t).Resource(vmGVR).Namespace(ns)
	dry := metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict, DryRun: []string{metav1.DryRunAll}}
	_, err = api.Create(ctx, toUnstructured(t, vm), dry)
	require.NoError(t, err, "KubeVirt refuses the rendered VM")
	fw := vm.Spec.Template.Spec.Domain.Firmware
	require.NotNil(t, fw, "the rendered VM carries its source's firmware identity")
	t.Logf("the rendered VM (firmware serial %q) passed virt-api's webhooks", fw.Serial)

	for _, tc := range builders.VMRefusals() {
		t.Run(tc.Name, func(t *testing.T) {
			obj, err := tc.Broken(vm)
			require.NoError(t, err)
			_, err = api.Create(ctx, obj, dry)
			require.ErrorContains(t, err, tc.Want, "KubeVirt's answer to the broken VM")
		})
	}
}
