package pipeline

import (
	"cmp"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// NIC model of every interface: the guest has virtio drivers once converted.
const nicModel = "virtio"

// networkName is the name of the interface and network of the source NIC
// at index i (source order, ignored NICs included, so a name always
// points back at the same source NIC).
func networkName(i int) string { return "net-" + strconv.Itoa(i) }

// canonicalUUID normalizes a UUID to lower-case 8-4-4-4-12 form; ok is
// false for anything that is not 32 hex digits, or is all zeros.
func canonicalUUID(s string) (string, bool) {
	h := strings.ToLower(strings.ReplaceAll(strings.TrimSpace(s), "-", ""))
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != 16 || strings.Trim(h, "0") == "" {
		return "", false
	}
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32], true
}

// vmwareSerial is the SMBIOS system serial number of a VMware VM with this
// BIOS UUID ("VMware-42 1a ... 6f 70-81 92 ... f8") in the characters
// KubeVirt accepts for a firmware serial ([A-Za-z0-9_.+-]: its webhook
// refuses VMware's spaces): "VMware-421a...6f70-8192...f8", so the migrated
// guest sees a serial that names its source.
func vmwareSerial(uuid string) string {
	h := strings.ReplaceAll(uuid, "-", "")
	return "VMware-" + h[:16] + "-" + h[16:]
}

// isWindows reports whether the inventory describes a Windows guest.
func isWindows(inv *v1alpha1.SourceInventory) bool {
	return inv.GuestFamily == "windowsGuest" || strings.HasPrefix(strings.ToLower(inv.GuestID), "win")
}

// networkMapping finds the mapping of a source network.
func networkMapping(spec *v1alpha1.VirtualMachineMigrationSpec, network string) (v1alpha1.NetworkMapping, bool) {
	for _, n := range spec.Target.Networks {
		if n.Source == network {
			return n, true
		}
	}
	return v1alpha1.NetworkMapping{}, false
}

// RenderVirtualMachine renders the target VirtualMachine, halted: CPU
// topology and memory from the inventory; BIOS, or EFI with secureBoot set
// explicitly (and SMM on with it); the machine type left to KubeVirt's
// default (q35); the disks in source order on virtio, the first one booting
// first, each on its DataVolume; one virtio interface per mapped NIC in
// source order (pod network with masquerade, Multus with bridge, Ignore left
// out) with the source MAC unless preserveMACAddresses is false or the VM
// is a second copy (secondCopy); the source
// BIOS UUID as firmware UUID and its VMware serial when the UUID is valid;
// Hyper-V enlightenments for Windows guests. Labels tie the VM and its
// instances to the migration, annotations to the source; no owner
// reference: the VM outlives the migration.
func RenderVirtualMachine(m *v1alpha1.VirtualMachineMigration) (*kubevirtv1.VirtualMachine, error) {
	inv := m.Status.Source
	if inv == nil {
		return nil, errors.New("the source VM is not inventoried yet (status.source)")
	}
	name, err := targetName(m)
	if err != nil {
		return nil, err
	}
	disks, err := recordedDisks(m, true)
	if err != nil {
		return nil, err
	}
	domain, err := renderDomain(inv)
	if err != nil {
		return nil, err
	}
	volumes := renderDisks(&domain, disks)
	networks, err := renderInterfaces(&domain, inv, m.SpecInForce())
	if err != nil {
		return nil, err
	}
	meta, err := vmMeta(m, name, inv)
	if err != nil {
		return nil, err
	}
	halted := kubevirtv1.RunStrategyHalted
	return &kubevirtv1.VirtualMachine{
		TypeMeta:   metav1.TypeMeta{APIVersion: kubevirtv1.SchemeGroupVersion.String(), Kind: "VirtualMachine"},
		ObjectMeta: meta,
		Spec: kubevirtv1.VirtualMachineSpec{
			RunStrategy: &halted,
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: childLabels(m, v1alpha1.ComponentVM)},
				Spec:       kubevirtv1.VirtualMachineInstanceSpec{Domain: domain, Networks: networks, Volumes: volumes},
			},
		},
	}, nil
}

// vmMeta is the VM's metadata: a child of m that m does not own (it
// outlives the migration), annotated with its source: its name, as
// vSphere gives it (without control characters), its BIOS UUID, its
// instance UUID (by which a later migration of the same source finds
// it) and its server's UUID (identifiers, written whole).
func vmMeta(m *v1alpha1.VirtualMachineMigration, name string, inv *v1alpha1.SourceInventory) (metav1.ObjectMeta, error) {
	meta := childMeta(m, name, v1alpha1.ComponentVM, false)
	if err := cmp.Or(sourceText("status.source.name", inv.Name, maxSourceName),
		sourceField("status.source.biosUUID", inv.BIOSUUID), sourceField("status.source.instanceUUID", inv.InstanceUUID),
		sourceField("status.source.server", inv.Server)); err != nil {
		return meta, err
	}
	meta.Annotations = map[string]string{}
	for k, v := range map[string]string{
		v1alpha1.AnnotationSourceVM:           inv.Name,
		v1alpha1.AnnotationSourceUUID:         inv.BIOSUUID,
		v1alpha1.AnnotationSourceInstanceUUID: inv.InstanceUUID,
		v1alpha1.AnnotationSourceServer:       inv.Server,
	} {
		if v != "" {
			meta.Annotations[k] = v
		}
	}
	return meta, nil
}

// renderDomain is the domain's CPU topology, memory, firmware and, for
// Windows guests, Hyper-V enlightenments.
func renderDomain(inv *v1alpha1.SourceInventory) (kubevirtv1.DomainSpec, error) {
	sockets, cores, err := topology(inv)
	if err != nil {
		return kubevirtv1.DomainSpec{}, err
	}
	if inv.MemoryMiB <= 0 {
		return kubevirtv1.DomainSpec{}, fmt.Errorf("the inventory has no memory size (%d MiB)", inv.MemoryMiB)
	}
	domain := kubevirtv1.DomainSpec{
		CPU:    &kubevirtv1.CPU{Sockets: uint32(sockets), Cores: uint32(cores), Threads: 1},
		Memory: &kubevirtv1.Memory{Guest: resource.NewQuantity(inv.MemoryMiB*mib, resource.BinarySI)},
	}
	if err := setFirmware(&domain, inv); err != nil {
		return domain, err
	}
	if isWindows(inv) {
		if domain.Features == nil {
			domain.Features = &kubevirtv1.Features{}
		}
		domain.Features.Hyperv = &kubevirtv1.FeatureHyperv{
			Relaxed:   enabled(),
			VAPIC:     enabled(),
			Spinlocks: &kubevirtv1.FeatureSpinlocks{FeatureState: *enabled(), Retries: ptr.To[uint32](8191)},
		}
	}
	return domain, nil
}

// renderDisks adds the disks in source order on virtio, the first booting
// first, and returns their volumes, each on its DataVolume.
func renderDisks(domain *kubevirtv1.DomainSpec, disks []v1alpha1.DiskStatus) []kubevirtv1.Volume {
	var volumes []kubevirtv1.Volume
	for i, d := range disks {
		disk := kubevirtv1.Disk{
			Name:       diskNameAt(d, i),
			DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}},
		}
		if i == 0 {
			disk.BootOrder = ptr.To[uint](1)
		}
		domain.Devices.Disks = append(domain.Devices.Disks, disk)
		volumes = append(volumes, kubevirtv1.Volume{
			Name:         disk.Name,
			VolumeSource: kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: d.DataVolume}},
		})
	}
	return volumes
}

// enabled is a feature turned on.
func enabled() *kubevirtv1.FeatureState { return &kubevirtv1.FeatureState{Enabled: ptr.To(true)} }

// setFirmware sets the bootloader, SMM with secure boot, and the source identity.
func setFirmware(domain *kubevirtv1.DomainSpec, inv *v1alpha1.SourceInventory) error {
	fw := &kubevirtv1.Firmware{}
	switch inv.Firmware {
	case v1alpha1.FirmwareBIOS:
		fw.Bootloader = &kubevirtv1.Bootloader{BIOS: &kubevirtv1.BIOS{}}
	case v1alpha1.FirmwareEFI:
		// KubeVirt turns secure boot on unless told: always say.
		fw.Bootloader = &kubevirtv1.Bootloader{EFI: &kubevirtv1.EFI{SecureBoot: ptr.To(inv.SecureBoot)}}
		if inv.SecureBoot {
			domain.Features = &kubevirtv1.Features{SMM: enabled()}
		}
	default:
		return fmt.Errorf("unsupported firmware %q: want %s or %s", inv.Firmware, v1alpha1.FirmwareBIOS, v1alpha1.FirmwareEFI)
	}
	if u, ok := canonicalUUID(inv.BIOSUUID); ok {
		fw.UUID = types.UID(u)
		fw.Serial = vmwareSerial(u)
	}
	domain.Firmware = fw
	return nil
}

// renderInterfaces adds one interface per mapped source NIC and returns
// the networks they attach to.
func renderInterfaces(domain *kubevirtv1.DomainSpec, inv *v1alpha1.SourceInventory, spec *v1alpha1.VirtualMachineMigrationSpec) ([]kubevirtv1.Network, error) {
	var networks []kubevirtv1.Network
	podNIC := ""
	for i, nic := range inv.NICs {
		what := nic.Label
		if what == "" {
			what = fmt.Sprintf("NIC %d", nic.Key)
		}
		mapping, ok := networkMapping(spec, nic.Network)
		if !ok {
			return nil, fmt.Errorf("%s: source network %q has no entry in spec.target.networks", what, nic.Network)
		}
		iface := kubevirtv1.Interface{Name: networkName(i), Model: nicModel}
		network := kubevirtv1.Network{Name: networkName(i)}
		switch mapping.Type {
		case v1alpha1.NetworkTypeIgnore:
			continue
		case v1alpha1.NetworkTypePod:
			if podNIC != "" {
				return nil, fmt.Errorf("%s and %s both map to the pod network: a VM has at most one pod network interface; map one to Multus or Ignore", podNIC, what)
			}
			podNIC = what
			iface.Masquerade = &kubevirtv1.InterfaceMasquerade{}
			network.Pod = &kubevirtv1.PodNetwork{}
		case v1alpha1.NetworkTypeMultus:
			if mapping.MultusNetworkName == "" {
				return nil, fmt.Errorf("%s: the Multus mapping of network %q has no multusNetworkName", what, nic.Network)
			}
			iface.Bridge = &kubevirtv1.InterfaceBridge{}
			network.Multus = &kubevirtv1.MultusNetwork{NetworkName: mapping.MultusNetworkName}
		default:
			return nil, fmt.Errorf("%s: unknown network type %q for network %q", what, mapping.Type, nic.Network)
		}
		if spec.Target.PreserveMACs() && nic.MAC != "" {
			hw, err := net.ParseMAC(nic.MAC)
			if err != nil || len(hw) != 6 {
				return nil, fmt.Errorf("%s: source MAC address %q is not a 48-bit MAC address", what, nic.MAC)
			}
			iface.MacAddress = hw.String()
		}
		domain.Devices.Interfaces = append(domain.Devices.Interfaces, iface)
		networks = append(networks, network)
	}
	if len(networks) == 0 {
		// Without interfaces KubeVirt would add one on the pod network.
		domain.Devices.AutoattachPodInterface = ptr.To(false)
	}
	return networks, nil
}
