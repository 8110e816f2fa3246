package builders

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kubevirtv1 "kubevirt.io/api/core/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// KubeVirtVMWebhook starts the words of KubeVirt's VirtualMachine webhook
// refusing a create.
const KubeVirtVMWebhook = `admission webhook "virtualmachine-validator.kubevirt.io" denied the request: `

// AdmissionMigration is a migration in ns that reached CreatingVM (the
// shared builder's status): an EFI secure-boot VM with two disks and two
// NICs, one on the pod network and one on Multus; the admission tests
// render its VirtualMachine and DataVolumes.
func AdmissionMigration(ns string) *v1alpha1.VirtualMachineMigration {
	inv := v1alpha1.SourceInventory{
		Name: "web-01", MoRef: "vm-42", BIOSUUID: "421a2b3c-4d5e-6f70-8192-a3b4c5d6e7f8",
		CPU: v1alpha1.CPUTopology{Sockets: 2, CoresPerSocket: 2}, MemoryMiB: 4096,
		Firmware: v1alpha1.FirmwareEFI, SecureBoot: true, GuestID: "rhel9_64Guest", GuestFamily: "linuxGuest",
		Disks: []v1alpha1.SourceDisk{
			{Key: 2000, Label: "Hard disk 1", CapacityBytes: 8 << 20, Datastore: "ds1"},
			{Key: 2001, Label: "Hard disk 2", CapacityBytes: 6 << 20, Datastore: "ds1"},
		},
		NICs: []v1alpha1.SourceNIC{
			{Key: 4000, Label: "Network adapter 1", MAC: "00:50:56:aa:bb:01", Network: "VM Network"},
			{Key: 4001, Label: "Network adapter 2", MAC: "00:50:56:aa:bb:02", Network: "backend"},
		},
	}
	return Migration(Named("web-01"), InNamespace(ns), WithUID("5b6c7d8e-0000-4000-8000-000000000001"),
		DefaultStorage("standard"),
		Networks(PodNetwork("VM Network"), MultusNetwork("backend", "default/backend")),
		Reached(v1alpha1.PhaseCreatingVM, &inv))
}

// VMRefusal is one way to break AdmissionMigration's rendered
// VirtualMachine, typed (Mutate) or raw (Raw, on its unstructured form),
// and the words KubeVirt refuses it with (Want, a part of the error).
type VMRefusal struct {
	Name   string
	Mutate func(*kubevirtv1.VirtualMachine)
	Raw    func(obj map[string]any)
	Want   string
}

// Broken is a copy of vm broken this way, unstructured for the dynamic
// client (vm is left as it is).
func (r VMRefusal) Broken(vm *kubevirtv1.VirtualMachine) (*unstructured.Unstructured, error) {
	bad := vm.DeepCopy()
	if r.Mutate != nil {
		r.Mutate(bad)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(bad)
	if err != nil {
		return nil, fmt.Errorf("converting the VM broken by %q: %w", r.Name, err)
	}
	if r.Raw != nil {
		r.Raw(m)
	}
	return &unstructured.Unstructured{Object: m}, nil
}

func ptrOf[T any](v T) *T { return &v }

// VMRefusals are the refusals both KubeVirt's API server schema and
// webhooks and their stand-in give: the stand-in's tests and the real
// KubeVirt's run the same table.
func VMRefusals() []VMRefusal {
	const webhook = KubeVirtVMWebhook
	domain := func(v *kubevirtv1.VirtualMachine) *kubevirtv1.DomainSpec { return &v.Spec.Template.Spec.Domain }
	return []VMRefusal{
		{Name: "unknown field", Raw: func(obj map[string]any) {
			_ = unstructured.SetNestedField(obj, int64(2), "spec", "template", "spec", "domain", "cpu", "socket")
		}, Want: `strict decoding error: unknown field "spec.template.spec.domain.cpu.socket"`},
		{Name: "misplaced field", Raw: func(obj map[string]any) {
			_ = unstructured.SetNestedField(obj, "q35", "spec", "template", "spec", "machine", "type")
		}, Want: `unknown field "spec.template.spec.machine"`},
		{Name: "secure boot without SMM", Mutate: func(v *kubevirtv1.VirtualMachine) { domain(v).Features.SMM = nil },
			Want: webhook + "spec.template.spec.domain has EFI SecureBoot enabled. SecureBoot requires SMM, which is currently disabled."},
		{Name: "secure boot by default, SMM off", Mutate: func(v *kubevirtv1.VirtualMachine) {
			domain(v).Firmware.Bootloader.EFI.SecureBoot = nil
			domain(v).Features.SMM.Enabled = ptrOf(false)
		}, Want: webhook + "spec.template.spec.domain has EFI SecureBoot enabled. SecureBoot requires SMM, which is currently disabled."},
		{Name: "two pod networks", Mutate: func(v *kubevirtv1.VirtualMachine) {
			v.Spec.Template.Spec.Networks[1].NetworkSource = kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}
			domain(v).Devices.Interfaces[1].InterfaceBindingMethod = kubevirtv1.InterfaceBindingMethod{Masquerade: &kubevirtv1.InterfaceMasquerade{}}
		}, Want: webhook + "more than one interface is connected to a pod network in spec.template.spec.interfaces"},
		{Name: "masquerade on Multus", Mutate: func(v *kubevirtv1.VirtualMachine) {
			domain(v).Devices.Interfaces[1].InterfaceBindingMethod = kubevirtv1.InterfaceBindingMethod{Masquerade: &kubevirtv1.InterfaceMasquerade{}}
		}, Want: webhook + "Masquerade interface only implemented with pod network"},
		{Name: "interface without network", Mutate: func(v *kubevirtv1.VirtualMachine) {
			v.Spec.Template.Spec.Networks = v.Spec.Template.Spec.Networks[:1]
		}, Want: webhook + "spec.template.spec.domain.devices.interfaces[1].name 'net-1' not found."},
		{Name: "malformed MAC", Mutate: func(v *kubevirtv1.VirtualMachine) { domain(v).Devices.Interfaces[0].MacAddress = "00:50:56:aa:bb" },
			Want: webhook + "interface spec.template.spec.domain.devices.interfaces[0].name has malformed MAC address (00:50:56:aa:bb)."},
		{Name: "disk without volume", Mutate: func(v *kubevirtv1.VirtualMachine) { v.Spec.Template.Spec.Volumes[1].Name = "other" },
			Want: webhook + "spec.template.spec.domain.devices.disks[1].Name 'disk-1' not found."},
		{Name: "ide bus", Mutate: func(v *kubevirtv1.VirtualMachine) { domain(v).Devices.Disks[1].Disk.Bus = "ide" },
			Want: webhook + "IDE bus is not supported"},
		{Name: "boot order twice", Mutate: func(v *kubevirtv1.VirtualMachine) { domain(v).Devices.Interfaces[0].BootOrder = ptrOf(uint(1)) },
			Want: webhook + "Boot order for spec.template.spec.domain.devices.interfaces[0].bootOrder already set for a different device."},
		{Name: "running and runStrategy", Mutate: func(v *kubevirtv1.VirtualMachine) { v.Spec.Running = ptrOf(false) },
			Want: webhook + "Running and RunStrategy are mutually exclusive. Note that Running is deprecated, please use RunStrategy instead"},
		{Name: "unknown run strategy", Mutate: func(v *kubevirtv1.VirtualMachine) {
			v.Spec.RunStrategy = ptrOf(kubevirtv1.VirtualMachineRunStrategy("Sometimes"))
		}, Want: webhook + "Invalid RunStrategy (Sometimes)"},
		{Name: "i440fx machine", Mutate: func(v *kubevirtv1.VirtualMachine) { domain(v).Machine = &kubevirtv1.Machine{Type: "pc"} },
			Want: webhook + "spec.template.spec.domain.machine.type is not supported: pc (allowed values: [q35* pc-q35*])"},
	}
}
