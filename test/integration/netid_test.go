//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	vimtypes "github.com/vmware/govmomi/vim25/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/steps/pipeline"
	"platform.example/vm-migration/test/builders"
)

// reportGuestNetwork makes the simulator's source VM report, as VMware
// Tools in its running guest would, a static address on its first NIC
// and the default route through it; it returns that NIC's MAC.
func (w *walkEnv) reportGuestNetwork() string {
	w.t.Helper()
	sim, card := w.firstNIC(walkSourceVM)
	net := []vimtypes.GuestNicInfo{{MacAddress: card.MacAddress, DeviceConfigId: card.Key, Connected: true,
		IpAddress: []string{"192.168.10.21"}, IpConfig: &vimtypes.NetIpConfigInfo{IpAddress: []vimtypes.NetIpConfigInfoIpAddress{
			{IpAddress: "192.168.10.21", PrefixLength: 24}}}}}
	stack := []vimtypes.GuestStackInfo{{IpRouteConfig: &vimtypes.NetIpRouteConfigInfo{IpRoute: []vimtypes.NetIpRouteConfigInfoIpRoute{
		{Network: "0.0.0.0", Gateway: vimtypes.NetIpRouteConfigInfoGateway{IpAddress: "192.168.10.1", Device: "0"}}}}}}
	w.updateGuest(sim, []vimtypes.PropertyChange{{Name: "guest.net", Val: net}, {Name: "guest.ipStack", Val: stack}})
	return card.MacAddress
}

// firstNIC is the simulator's VM vmName and its first NIC.
func (w *walkEnv) firstNIC(vmName string) (*simulator.VirtualMachine, *vimtypes.VirtualEthernetCard) {
	w.t.Helper()
	var sim *simulator.VirtualMachine
	for _, o := range w.model.Map().All("VirtualMachine") {
		if vm := o.(*simulator.VirtualMachine); vm.Name == vmName {
			sim = vm
		}
	}
	require.NotNil(w.t, sim, "the simulator's VM %s", vmName)
	cards := object.VirtualDeviceList(sim.Config.Hardware.Device).SelectByType((*vimtypes.VirtualEthernetCard)(nil))
	require.NotEmpty(w.t, cards, "the VM has a NIC")
	return sim, cards[0].(vimtypes.BaseVirtualEthernetCard).GetVirtualEthernetCard()
}

// updateGuest changes what the simulator's VM reports of its guest.
func (w *walkEnv) updateGuest(sim *simulator.VirtualMachine, changes []vimtypes.PropertyChange) {
	ctx := &simulator.Context{Context: context.Background(), Map: w.model.Map()}
	ctx.WithLock(sim, func() { ctx.Update(sim, changes) })
}

// TestNetworkIdentityAgainstAPIServer: the controller, against the real
// API server, records the guest's addresses VMware Tools reports and what
// the conversion found and pinned, reads the running VMI's
// status.interfaces (through its trimmed cache) as KubeVirt writes them
// from the guest agent, and sets NetworkIdentityPreserved True; every new
// status field passes the CRD's schema.
func TestNetworkIdentityAgainstAPIServer(t *testing.T) {
	w := newWalkEnv(t)
	ctx := testContext(t)
	mac := w.reportGuestNetwork()
	m := w.newWalkMigration()
	// The first NIC on a Multus network (bridge): a static address can
	// be kept there, not behind the pod network's masquerade.
	nets := m.Spec.Target.Networks
	nets[0] = builders.MultusNetwork(nets[0].Source, "default/vlan10")
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"target": map[string]any{"networks": nets},
		"policy": map[string]any{"approved": true}}})
	require.NoError(t, err)
	_, err = w.mig.MigrationV1alpha1().VirtualMachineMigrations(w.ns).Patch(ctx, walkMigration, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err, "mapping the first network to Multus and approving")

	m = w.waitPhase(v1alpha1.PhaseTransferringDisks, progressing("transferring disks"))
	nic := m.Status.Source.NICs[0]
	require.NotNil(t, nic.Guest, "the inventory keeps what VMware Tools reported: %+v", nic)
	assert.Equal(t, []v1alpha1.GuestIPAddress{{IP: "192.168.10.21", PrefixLength: 24}}, nic.Guest.IPAddresses)
	assert.Equal(t, "192.168.10.1", nic.Guest.Gateway)

	w.finishJob(naming.TransferJob(walkMigration, 1), pipeline.TransferContainer, transferDone(t, m))
	cjob := naming.ConversionJob(walkMigration, 1)
	m = w.waitPhase(v1alpha1.PhaseConverting, func(*v1alpha1.VirtualMachineMigration) bool {
		cm, err := w.kube.CoreV1().ConfigMaps(w.ns).Get(ctx, naming.ConversionConfigMap(walkMigration, 1), metav1.GetOptions{})
		return err == nil && cm.Data[pipeline.NetworkConfKey] != ""
	})
	cm, err := w.kube.CoreV1().ConfigMaps(w.ns).Get(ctx, naming.ConversionConfigMap(walkMigration, 1), metav1.GetOptions{})
	require.NoError(t, err)
	slot := "-" // vcsim gives its NICs a PCI slot (32): VMware's name for it is a candidate
	if nic.PCISlotNumber != nil {
		slot = fmt.Sprintf("ens%d", *nic.PCISlotNumber)
	}
	assert.Equal(t, fmt.Sprintf("mode pin\nnic %s 192.168.10.21 %s\n", mac, slot), cm.Data[pipeline.NetworkConfKey], "what the conversion looks up in the guest")
	assert.Contains(t, cm.Data[pipeline.DomainXMLKey], `<mac address="`+mac+`">`, "the domain XML names the NIC")
	w.finishJob(cjob, pipeline.ConversionContainer, builders.ConvertedChecksumLines(m)+fmt.Sprintf("nic %s ens192 address pinned 192.168.10.21\n", mac)+walkInspection)

	m = w.waitPhase(v1alpha1.PhaseImporting, progressing("importing disks: 0 of"))
	assert.Equal(t, []v1alpha1.InterfacePin{{MAC: mac, Name: "ens192", Source: v1alpha1.PinSourceAddress, Pinned: true, StaticAddresses: []string{"192.168.10.21"}}},
		m.Status.Conversion.Interfaces)
	var dvNames []string
	for _, d := range m.Status.Disks {
		dvNames = append(dvNames, d.DataVolume)
	}
	w.setDataVolumesSucceeded(dvNames)

	m = w.waitPhase(v1alpha1.PhaseStarting, progressing("waiting for VirtualMachine"))
	target := m.Status.Target.Name
	// KubeVirt runs the VM; its guest agent connects and reports ens192.
	w.runVMI(target, kubevirtv1.Running)
	m = w.waitPhase(v1alpha1.PhaseStarting, progressing("VirtualMachine "+target+" runs; waiting until"))
	w.reportInterfaces(target, kubevirtv1.VirtualMachineInstanceNetworkInterface{Name: "net-0", MAC: mac, InterfaceName: "ens192",
		IP: "192.168.10.21", IPs: []string{"192.168.10.21", "fe80::250:56ff:fe00:1"}, InfoSource: "domain, guest-agent", QueueCount: 1, LinkState: "up"})

	m = w.waitPhase(v1alpha1.PhaseSucceeded, nil)
	c := meta.FindStatusCondition(m.Status.Conditions, statemachine.ConditionNetworkIdentityPreserved)
	require.NotNil(t, c, "no %s condition: %s", statemachine.ConditionNetworkIdentityPreserved, describeStatus(m))
	assert.Equal(t, metav1.ConditionTrue, c.Status, "condition %+v", c)
	assert.Equal(t, statemachine.ReasonAddressesKept, c.Reason)
	assert.Contains(t, c.Message, "192.168.10.21 (ens192 on VMware, MAC "+mac+") on ens192")
	assert.Equal(t, []v1alpha1.TargetInterface{{Name: "net-0", MAC: mac, InterfaceName: "ens192",
		IPAddresses: []string{"192.168.10.21", "fe80::250:56ff:fe00:1"}, InfoSource: "domain, guest-agent"}}, m.Status.Target.Interfaces)
	assert.Contains(t, walkEvidence(m, v1alpha1.PhaseStarting), "network identity True (AddressesKept)")
}

// reportInterfaces plays virt-handler: the VMI's guest agent connected
// and its interfaces reported.
func (w *walkEnv) reportInterfaces(name string, ifaces ...kubevirtv1.VirtualMachineInstanceNetworkInterface) {
	w.t.Helper()
	ctx := testContext(w.t)
	vmi, err := w.kv.KubevirtV1().VirtualMachineInstances(w.ns).Get(ctx, name, metav1.GetOptions{})
	require.NoError(w.t, err, "getting VirtualMachineInstance %s", name)
	vmi.Status.Interfaces = ifaces
	vmi.Status.Conditions = append(vmi.Status.Conditions, kubevirtv1.VirtualMachineInstanceCondition{
		Type: kubevirtv1.VirtualMachineInstanceAgentConnected, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()})
	_, err = w.kv.KubevirtV1().VirtualMachineInstances(w.ns).Update(ctx, vmi, metav1.UpdateOptions{})
	require.NoError(w.t, err, "reporting the interfaces of VirtualMachineInstance %s", name)
}
