//go:build integration

package kubevirt

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/steps/pipeline"
	"platform.example/vm-migration/test/builders"
	"platform.example/vm-migration/test/framework"
)

// reservedMAC is the MAC KubeVirt keeps for the in-pod bridge of a
// masquerade interface.
const reservedMAC = "02:00:00:00:00:00"

// TestDryRunQuotesKubeVirt: the controller's Validating dry run (the
// pipeline step, with the controller's clients) asks the real virt-api.
// A source whose NIC on the pod network carries the MAC KubeVirt keeps
// for its in-pod bridge renders a VirtualMachine the webhook refuses:
// the dry run's answer for it is Refused in KubeVirt's own words, which
// the state machine turns into a failure before the source is stopped;
// the rest of the plan is accepted, and the same source with its own
// MAC passes whole.
func TestDryRunQuotesKubeVirt(t *testing.T) {
	env := kubevirtEnv(t)
	ns := env.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	step := dryRunStep(t, env.Config())

	ask := func(mac string) map[string]v1alpha1.DryRunObject {
		t.Helper()
		m := builders.AdmissionMigration(ns)
		inv := m.Status.Source.DeepCopy()
		for i := range inv.Disks {
			inv.Disks[i].FileName = fmt.Sprintf("[ds1] web-01/web-01_%d.vmdk", i)
		}
		inv.NICs[0].MAC = mac
		m.Status = v1alpha1.VirtualMachineMigrationStatus{Phase: v1alpha1.PhaseValidating}
		got := step.DryRun(ctx, m, inv)
		require.Nil(t, got.Error, "the dry run could not be made: %+v", got.Error)
		out := map[string]v1alpha1.DryRunObject{}
		for _, o := range got.Status.Objects {
			out[o.Kind+"/"+o.Name] = o
			t.Logf("MAC %s: %s %s: %s %s", mac, o.Kind, o.Name, o.Outcome, o.Message)
		}
		return out
	}

	refused := ask(reservedMAC)
	vm, ok := refused["VirtualMachine/web-01"]
	require.True(t, ok, "the dry run did not ask about the VirtualMachine")
	assert.Equal(t, v1alpha1.DryRunRefused, vm.Outcome)
	assert.Contains(t, vm.Message, builders.KubeVirtVMWebhook+"The requested MAC address is reserved for the in-pod bridge. Please choose another one.")
	for key, o := range refused {
		if key != "VirtualMachine/web-01" {
			assert.NotEqual(t, v1alpha1.DryRunRefused, o.Outcome, "%s refused: %s", key, o.Message)
		}
	}

	accepted := ask("00:50:56:aa:bb:01")
	assert.Equal(t, v1alpha1.DryRunAccepted, accepted["VirtualMachine/web-01"].Outcome, "the VM with its source's MAC: %s", accepted["VirtualMachine/web-01"].Message)
}

// dryRunStep is the pipeline step with the controller's clients on cfg,
// set for a dry run.
func dryRunStep(t *testing.T, cfg *rest.Config) *pipeline.Step {
	t.Helper()
	step, err := framework.PipelineStep(cfg, pipeline.Config{
		TransferImage: "registry.example/vm-migration-controller:v1", ConversionImage: "registry.example/virt-v2v:2.2",
		TransferProgress: true, DryRun: true,
	})
	require.NoError(t, err)
	return step
}
