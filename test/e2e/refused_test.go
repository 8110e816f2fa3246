//go:build e2e

package e2e

import (
	"context"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/find"
	vimtypes "github.com/vmware/govmomi/vim25/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/preflight"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/test/builders"
	"platform.example/vm-migration/test/standins"
	"platform.example/vm-migration/test/vcsimlocal"
)

// refusal is one thing the cluster says no to, asked before the stop.
type refusal struct {
	// extraArgs are the controller's flags for it.
	extraArgs []string
	// shape changes the sample VM before it is added to vcsim.
	shape func(spec *vcsimlocal.VMSpec)
	// prepare shapes the namespace and the VM before the migration.
	prepare func(s *stack, vm string)
	// migration changes the migration before it is created.
	migration func(m *v1alpha1.VirtualMachineMigration)
	// needsMultusAPI skips the case where the cluster serves no
	// NetworkAttachmentDefinitions (the stand-in KubeVirt's suite).
	needsMultusAPI bool
	// finding is the blocking preflight finding's reason.
	finding string
	// words are the cluster's own words, which the Failed condition quotes
	// (any one of each group).
	words [][]string
}

// TestRefusedBeforeStop: what the cluster refuses is found before any
// power operation. Each subtest migrates a VM (with a simulated guest, so
// that vcsim records every power operation it receives) into a namespace
// enforcing PodSecurity restricted, where the cluster refuses one thing;
// the migration ends Failed in Validating with a blocking finding that
// quotes the cluster, its image proofs' pods gone, and vcsim recorded no
// power operation: the source VM was never touched.
func TestRefusedBeforeStop(t *testing.T) {
	plugin, err := build("kubectl-vmm")
	require.NoError(t, err, "building kubectl-vmm")
	cases := map[string]refusal{
		// The transfer image was never imported into the node: its proof
		// pod cannot pull it (no registry is reachable from the node).
		"transfer-image-not-on-node": {
			extraArgs: []string{"--transfer-image=platform.example/vm-migration-controller:never-imported"},
			finding:   preflight.ReasonTransferImageNotRunnable,
			words:     [][]string{{"ErrImagePull", "ImagePullBackOff"}, {"platform.example/vm-migration-controller:never-imported"}},
		},
		"conversion-image-not-on-node": {
			extraArgs: []string{"--conversion-image=platform.example/vm-migration-conversion:never-imported"},
			finding:   preflight.ReasonConversionImageNotRunnable,
			words:     [][]string{{"ErrImagePull", "ImagePullBackOff"}, {"platform.example/vm-migration-conversion:never-imported"}},
		},
		// The controller's flag asks for conversion pods the restricted
		// profile refuses: PodSecurity refuses the proof's pod (the Job
		// controller's FailedCreate event); the dry run of the Job warned.
		"restricted-refuses-unconfined-conversion": {
			extraArgs: []string{"--conversion-seccomp-profile=Unconfined"},
			finding:   preflight.ReasonConversionImageNotRunnable,
			words:     [][]string{{"FailedCreate"}, {`violates PodSecurity "restricted:latest"`}, {"Unconfined"}},
		},
		"quota-refuses-staging-claims": {
			prepare: func(s *stack, _ string) {
				s.createQuota("no-claims", corev1.ResourceList{corev1.ResourcePersistentVolumeClaims: resource.MustParse("0")})
			},
			finding: preflight.ReasonDryRunRefused,
			words:   [][]string{{"exceeded quota: no-claims"}, {"PersistentVolumeClaim"}},
		},
		// A site's own admission webhook on VirtualMachines (as Kyverno
		// or Gatekeeper install): the dry run of the VM reaches it.
		"webhook-refuses-vm": {
			prepare: func(s *stack, vm string) { s.refuseVMs(vm) },
			finding: preflight.ReasonDryRunRefused,
			words:   [][]string{{`admission webhook "vm-policy.e2e.platform.example" denied the request`}, {"cost-center"}},
		},
		// A source NIC on the pod network with the MAC KubeVirt keeps for
		// the in-pod bridge: the dry run of the VirtualMachine reaches
		// KubeVirt's own validating webhook (virt-api, with make
		// test-e2e; the stand-in's copy of the rule otherwise).
		"kubevirt-refuses-reserved-mac": {
			shape:   func(spec *vcsimlocal.VMSpec) { spec.NICs[0].MAC = "02:00:00:00:00:00" },
			finding: preflight.ReasonDryRunRefused,
			words: [][]string{{builders.KubeVirtVMWebhook + "The requested MAC address is reserved for the in-pod bridge. Please choose another one."},
				{"VirtualMachine"}},
		},
		// The second NIC maps to a Multus network nobody defined:
		// KubeVirt's virt-controller would fail the VM's start (it reads
		// the definition to render the launcher pod) after the stop.
		"multus-network-undefined": {
			migration: func(m *v1alpha1.VirtualMachineMigration) {
				for i := range m.Spec.Target.Networks {
					if m.Spec.Target.Networks[i].Type == v1alpha1.NetworkTypeMultus {
						m.Spec.Target.Networks[i].MultusNetworkName = "default/frontend"
					}
				}
			},
			needsMultusAPI: true,
			finding:        preflight.ReasonNetworkDefinitionMissing,
			words:          [][]string{{"no NetworkAttachmentDefinition default/frontend exists"}, {"failed to locate network attachment definition default/frontend"}},
		},
		// A Windows guest, and the conversion image (the simulated one,
		// whose self-check answers as the project's image does) has no
		// virtio-win drivers.
		"windows-without-virtio-win": {
			prepare: func(s *stack, vm string) { s.setGuestID(vm, "windows2019srv_64Guest") },
			finding: preflight.ReasonWindowsWithoutVirtioDrivers,
			words:   [][]string{{"windows2019srv_64Guest"}, {"no virtio-win drivers"}, {"/usr/share/virtio-win"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.needsMultusAPI && !realKubeVirt() {
				t.Skip("the stand-in KubeVirt's suite serves no NetworkAttachmentDefinitions")
			}
			s := newStack(t, stackOptions{extraControllerArgs: tc.extraArgs})
			const vm = "refused-01"
			spec := vcsimlocal.SampleVM(vm, 131)
			if tc.shape != nil {
				tc.shape(&spec)
			}
			_, err := s.vc.AddVM(s.ctx, spec)
			require.NoError(t, err, "adding VM %s to vcsim", vm)
			if tc.prepare != nil {
				tc.prepare(s, vm)
			}
			require.NoError(t, s.vc.SimulateGuest(s.ctx, vm, vcsimlocal.GuestOptions{}))
			m := s.newMigration(vm, vm)
			if tc.migration != nil {
				tc.migration(m)
			}
			m = s.create(m)
			s.refusedBeforeStop(m, vm, tc.finding, tc.words)
			// kubectl vmm plan shows the API server's answer per object.
			out, err := exec.CommandContext(s.ctx, plugin, "plan", m.Name, "-n", s.ns, "--kubeconfig", s.env.KubeconfigPath()).CombinedOutput()
			require.NoError(t, err, "kubectl vmm plan: %s", out)
			assert.Contains(t, string(out), "The source VM was not touched.")
			t.Logf("kubectl vmm plan %s -n %s:\n%s", m.Name, s.ns, out)
		})
	}
}

// refusedBeforeStop waits for the migration to end Failed in Validating
// on the blocking finding, its condition quoting the cluster's words, and
// checks that the source was never touched and that the image proofs'
// objects are no migration's: the refusal deleted none of them (they serve
// the namespace's other migrations of their key until their TTL).
func (s *stack) refusedBeforeStop(m *v1alpha1.VirtualMachineMigration, vm, finding string, words [][]string) {
	t := s.t
	t.Helper()
	m = s.waitPhase(m.Name, v1alpha1.PhaseFailed, 3*time.Minute)
	e := m.Status.LastError
	require.NotNil(t, e, describe(m))
	assert.Equal(t, v1alpha1.PhaseValidating, e.Phase, "failed before the stop: %s", describe(m))
	assert.Equal(t, statemachine.ReasonPreflightFailed, e.Reason)
	c := condition(m, statemachine.ConditionFailed)
	require.NotNil(t, c, describe(m))
	assert.Equal(t, metav1.ConditionTrue, c.Status)
	assert.Contains(t, c.Message, finding)
	for _, group := range words {
		assert.True(t, containsAny(c.Message, group...), "the Failed condition quotes none of %q:\n%s", group, c.Message)
	}
	t.Logf("%s: Failed condition: %s", t.Name(), c.Message)
	assert.Empty(t, opNames(s.vc.PowerOps(vm)), "vcsim recorded power operations on the source")
	assert.Equal(t, "poweredOn", s.powerState(vm))
	assert.Nil(t, m.Status.SourceControl, "a power intent was recorded")
	s.proofObjectsShared(m)
}

// containsAny reports whether s holds one of the fragments.
func containsAny(s string, fragments ...string) bool {
	for _, f := range fragments {
		if strings.Contains(s, f) {
			return true
		}
	}
	return false
}

// proofObjectsShared checks that no proof object carries the migration's
// UID, and that the namespace's proof Jobs and ServiceAccounts are shared
// ones (an empty migration UID label, no owner but, for an account, its
// Job) that the refused migration did not delete.
func (s *stack) proofObjectsShared(m *v1alpha1.VirtualMachineMigration) {
	s.t.Helper()
	own := metav1.ListOptions{LabelSelector: v1alpha1.LabelMigrationUID + "=" + string(m.UID) + "," + v1alpha1.LabelComponent + "=" + v1alpha1.ComponentProof}
	jobs, err := s.kube.BatchV1().Jobs(s.ns).List(s.ctx, own)
	require.NoError(s.t, err)
	assert.Empty(s.t, jobs.Items, "proof Jobs of the migration's own")
	sas, err := s.kube.CoreV1().ServiceAccounts(s.ns).List(s.ctx, own)
	require.NoError(s.t, err)
	assert.Empty(s.t, sas.Items, "proof ServiceAccounts of the migration's own")

	shared := metav1.ListOptions{LabelSelector: v1alpha1.LabelComponent + "=" + v1alpha1.ComponentProof}
	jobs, err = s.kube.BatchV1().Jobs(s.ns).List(s.ctx, shared)
	require.NoError(s.t, err)
	for _, j := range jobs.Items {
		assert.Empty(s.t, j.Labels[v1alpha1.LabelMigrationUID], "proof job %s: no migration's", j.Name)
		assert.Empty(s.t, j.OwnerReferences, "proof job %s: owned by none", j.Name)
		assert.Nil(s.t, j.DeletionTimestamp, "proof job %s: deleted with the refusal; its TTL removes it", j.Name)
		assert.NotNil(s.t, j.Spec.TTLSecondsAfterFinished, "proof job %s: removed by its TTL", j.Name)
	}
	sas, err = s.kube.CoreV1().ServiceAccounts(s.ns).List(s.ctx, shared)
	require.NoError(s.t, err)
	for _, a := range sas.Items {
		for _, o := range a.OwnerReferences {
			assert.Equal(s.t, "Job", o.Kind, "proof service account %s: owned by its proof Job only", a.Name)
		}
	}
}

// setGuestID reconfigures a vcsim VM's guest OS (config.guestId; vcsim
// derives the guest family from it), as vSphere shows a Windows guest.
func (s *stack) setGuestID(vm, guestID string) {
	s.t.Helper()
	u, err := url.Parse(s.vc.URL)
	require.NoError(s.t, err)
	u.User = url.UserPassword(s.vc.Username, s.vc.Password)
	c, err := govmomi.NewClient(s.ctx, u, true)
	require.NoError(s.t, err, "logging in to vcsim")
	defer func() { _ = c.Logout(context.WithoutCancel(s.ctx)) }()
	f := find.NewFinder(c.Client)
	dc, err := f.Datacenter(s.ctx, vcsimlocal.Datacenter)
	require.NoError(s.t, err)
	f.SetDatacenter(dc)
	obj, err := f.VirtualMachine(s.ctx, vm)
	require.NoError(s.t, err)
	task, err := obj.Reconfigure(s.ctx, vimtypes.VirtualMachineConfigSpec{GuestId: guestID})
	require.NoError(s.t, err)
	require.NoError(s.t, task.Wait(s.ctx), "setting the guest id of %s to %s", vm, guestID)
}

// refuseVMs installs a site's own webhook that refuses every
// VirtualMachine created in the namespace, until the test ends.
func (s *stack) refuseVMs(vm string) {
	s.t.Helper()
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
		"metadata": map[string]any{"name": vm + "-probe", "namespace": s.ns},
		"spec": map[string]any{"runStrategy": "Halted", "template": map[string]any{"spec": map[string]any{
			"domain": map[string]any{"devices": map[string]any{}, "memory": map[string]any{"guest": "64Mi"}}}}},
	}}
	policy, err := standins.StartPolicyWebhook(s.ctx, standins.PolicyConfig{RestConfig: s.env.Config(), Namespace: s.ns,
		Resource: schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachines"},
		Name:     "vm-policy.e2e.platform.example", Message: "VirtualMachines in this namespace must carry the label cost-center (site policy)",
		Probe: probe})
	require.NoError(s.t, err, "installing the site's VM policy webhook")
	s.t.Cleanup(policy.Close)
}
