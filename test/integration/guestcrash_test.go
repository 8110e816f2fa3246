//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	vimtypes "github.com/vmware/govmomi/vim25/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/controller"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/steps/pipeline"
	"platform.example/vm-migration/pkg/untrusted"
	"platform.example/vm-migration/test/builders"
)

// Strings a guest controls whose quoted form is longer than the value
// (untrusted.Quote once indexed past their end and crashed the whole
// controller on every reconcile of the migration that met them).
var (
	accented = strings.Repeat("é", 12)
	cjk      = strings.Repeat("漢", 11)
)

// reportGuestAddressOf makes the simulator's VM vmName report, as VMware
// Tools in its guest would, the address addr on its first NIC.
func (w *walkEnv) reportGuestAddressOf(vmName, addr string) {
	w.t.Helper()
	sim, card := w.firstNIC(vmName)
	net := []vimtypes.GuestNicInfo{{MacAddress: card.MacAddress, DeviceConfigId: card.Key, Connected: true, IpAddress: []string{addr},
		IpConfig: &vimtypes.NetIpConfigInfo{IpAddress: []vimtypes.NetIpConfigInfoIpAddress{{IpAddress: addr, PrefixLength: 24}}}}}
	w.updateGuest(sim, []vimtypes.PropertyChange{{Name: "guest.net", Val: net}})
}

// getNamed reads the migration name of the test's namespace.
func (w *walkEnv) getNamed(name string) *v1alpha1.VirtualMachineMigration {
	w.t.Helper()
	m, err := w.mig.MigrationV1alpha1().VirtualMachineMigrations(w.ns).Get(testContext(w.t), name, metav1.GetOptions{})
	require.NoError(w.t, err, "reading migration %s", name)
	return m
}

// TestGuestStringsCrashNothing (issue 46): against the real API server, a
// guest whose VMware Tools report an address of accented letters has its
// migration refused before anything is touched, with the value quoted
// in printable ASCII; the guest network script's nic line of another
// migration naming an interface in CJK characters is kept as a guest that
// could not be read, quoted too; and the controller, which once crashed
// on both strings, serves both migrations through (the second one to
// Succeeded) without a single panic.
func TestGuestStringsCrashNothing(t *testing.T) {
	w := newWalkEnv(t)
	ctx := testContext(t)
	const refusedVM, refused = "DC0_H0_VM1", "guest-strings-01"
	w.reportGuestAddressOf(refusedVM, accented)
	w.newMigrationOf(refused, refusedVM)
	m := w.newWalkMigration()
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"policy": map[string]any{"approved": true}}})
	require.NoError(t, err)
	_, err = w.mig.MigrationV1alpha1().VirtualMachineMigrations(w.ns).Patch(ctx, walkMigration, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err, "approving %s", walkMigration)

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		r := w.getNamed(refused)
		assert.Equal(c, v1alpha1.PhaseFailed, r.Status.Phase, "status: %s", describeStatus(r))
	}, 30*time.Second, 100*time.Millisecond)
	r := w.getNamed(refused)
	require.NotNil(t, r.Status.LastError)
	t.Logf("refused: %s: %s", r.Status.LastError.Reason, r.Status.LastError.Message)
	assert.Equal(t, v1alpha1.PhaseValidating, r.Status.LastError.Phase, "refused before the source was touched")
	assert.Contains(t, r.Status.LastError.Message, untrusted.Quote(accented), "the guest's value, quoted in printable ASCII")
	assert.Contains(t, r.Status.LastError.Message, `\u00e9`)
	assert.True(t, statemachine.SourceUntouched(&r.Status), "nothing touched")

	m = w.waitPhase(v1alpha1.PhaseTransferringDisks, progressing("transferring disks"))
	w.finishJob(naming.TransferJob(walkMigration, 1), pipeline.TransferContainer, transferDone(t, m))
	m = w.waitPhase(v1alpha1.PhaseConverting, nil)
	mac := m.Status.Source.NICs[0].MAC
	w.finishJob(naming.ConversionJob(walkMigration, 1), pipeline.ConversionContainer,
		builders.ConvertedChecksumLines(m)+fmt.Sprintf("nic %s %s address pinned -\n", mac, cjk)+walkInspection)
	m = w.waitPhase(v1alpha1.PhaseImporting, progressing("importing disks: 0 of"))
	require.Len(t, m.Status.Conversion.Interfaces, 1, "the nic line is kept, as a guest that could not be read")
	pin := m.Status.Conversion.Interfaces[0]
	t.Logf("pin: %+v", pin)
	assert.True(t, pin.GuestUnreadable)
	assert.Contains(t, pin.Message, untrusted.Quote(cjk), "the guest's interface name, quoted")
	m = w.importAll(m)
	w.runVMI(m.Status.Target.Name, kubevirtv1.Running)
	w.waitPhase(v1alpha1.PhaseSucceeded, nil)

	events, err := w.kube.CoreV1().Events(w.ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, e := range events.Items {
		assert.NotEqual(t, controller.ReasonReconcilePanic, e.Reason, "%s: %s", e.InvolvedObject.Name, e.Message)
	}
}
