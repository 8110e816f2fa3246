package standins

import (
	"fmt"
	"net"
	"path/filepath"
	"regexp"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// The VirtualMachine rules of KubeVirt v1.9.0's admission webhook that the
// stand-in plays, with KubeVirt's messages and fields. Each function names
// the KubeVirt function that enforces the rule and its file:
//
//	vms-admitter.go, vmi-create-admitter.go  pkg/virt-api/webhooks/validating-webhook/admitters/
//	validator.go, netsource.go, netiface.go,
//	binding.go                               pkg/network/admitter/
//	disks.go, data-volume-template.go,
//	vm-storage-admitter.go                   pkg/storage/admitters/
//
// KubeVirt's defaults are those of a fresh install (no feature gates; bridge
// on the pod network permitted; machine types q35*, pc-q35*). Not played:
// instancetypes and preferences, feature gates, CPU pinning, NUMA,
// hugepages, probes, host devices, GPUs, DRA, ports and PCI addresses of
// interfaces, discontinued bindings (slirp, macvtap, passt), LUN and CD-ROM
// details beyond their bus, volume sources other than DataVolumes and
// claims, and every check that needs the cluster (KubeVirt CR settings,
// DataSources, snapshots, restores).

// requiredCause is a FieldValueRequired cause.
func requiredCause(path *field.Path, msg string) metav1.StatusCause {
	return metav1.StatusCause{Type: metav1.CauseTypeFieldValueRequired, Message: msg, Field: path.String()}
}

// nameNotFound is KubeVirt's nameOfTypeNotFoundMessagePattern.
func nameNotFound(path *field.Path, name string) string {
	return fmt.Sprintf("%s '%s' not found.", path.String(), name)
}

// validateVirtualMachineSpec is ValidateVirtualMachineSpec (vms-admitter.go):
// a template, its instance spec, the DataVolume templates and the run
// strategy.
func validateVirtualMachineSpec(path *field.Path, spec *kubevirtv1.VirtualMachineSpec) []metav1.StatusCause {
	if spec.Template == nil {
		return []metav1.StatusCause{requiredCause(path.Child("template"), "missing virtual machine template.")}
	}
	causes := validateInstanceSpec(path.Child("template", "spec"), &spec.Template.Spec)
	causes = append(causes, dataVolumeTemplates(path, spec)...)
	return append(causes, runStrategy(path, spec)...)
}

// instanceSpecRules are the rules of ValidateVirtualMachineInstanceSpec
// (vmi-create-admitter.go) that the stand-in plays, in KubeVirt's order.
var instanceSpecRules = []func(*field.Path, *kubevirtv1.VirtualMachineInstanceSpec) []metav1.StatusCause{
	guestMemoryWithinLimit, machineTypeSupported,
	singlePodNetwork, singleNetworkSource, multusNetworkNamed, interfaceBinding,
	networkNamesUnique, networksHaveInterfaces, interfaceNamesUnique, interfacesHaveNetworks, interfaceFields,
	bootOrder, domainDisks, firmware, secureBootNeedsSMM,
}

// validateInstanceSpec applies instanceSpecRules.
func validateInstanceSpec(path *field.Path, spec *kubevirtv1.VirtualMachineInstanceSpec) []metav1.StatusCause {
	var causes []metav1.StatusCause
	for _, rule := range instanceSpecRules {
		causes = append(causes, rule(path, spec)...)
	}
	return causes
}

// validRunStrategies are the run strategies KubeVirt accepts without a
// feature gate (vms-admitter.go, validRunStrategies).
var validRunStrategies = map[kubevirtv1.VirtualMachineRunStrategy]bool{
	kubevirtv1.RunStrategyHalted: true, kubevirtv1.RunStrategyManual: true, kubevirtv1.RunStrategyAlways: true,
	kubevirtv1.RunStrategyRerunOnFailure: true, kubevirtv1.RunStrategyOnce: true,
}

// runStrategy is validateRunStrategy (vms-admitter.go): exactly one of
// spec.running and spec.runStrategy, and a known strategy.
func runStrategy(path *field.Path, spec *kubevirtv1.VirtualMachineSpec) []metav1.StatusCause {
	var causes []metav1.StatusCause
	if spec.Running != nil && spec.RunStrategy != nil {
		causes = append(causes, invalid(path.Child("running"), "Running and RunStrategy are mutually exclusive. Note that Running is deprecated, please use RunStrategy instead"))
	}
	if spec.Running == nil && spec.RunStrategy == nil {
		causes = append(causes, invalid(path.Child("running"), "RunStrategy must be specified"))
	}
	switch s := spec.RunStrategy; {
	case s == nil || validRunStrategies[*s]:
	case *s == kubevirtv1.RunStrategyWaitAsReceiver:
		causes = append(causes, invalid(path.Child("runStrategy"),
			fmt.Sprintf("Invalid RunStrategy (%s), DecentralizedLiveMigration feature gate is not enabled in kubevirt resource", *s)))
	default:
		causes = append(causes, invalid(path.Child("runStrategy"), fmt.Sprintf("Invalid RunStrategy (%s)", *s)))
	}
	return causes
}

// guestMemoryWithinLimit is validateGuestMemoryLimit (vmi-create-admitter.go):
// the guest sees no more memory than the limit, when there is one.
func guestMemoryWithinLimit(path *field.Path, spec *kubevirtv1.VirtualMachineInstanceSpec) []metav1.StatusCause {
	mem := spec.Domain.Memory
	if mem == nil || mem.Guest == nil {
		return nil
	}
	limit := spec.Domain.Resources.Limits.Memory()
	if limit.IsZero() || limit.Cmp(*mem.Guest) >= 0 {
		return nil
	}
	guestPath := path.Child("domain", "memory", "guest")
	return []metav1.StatusCause{invalid(guestPath, fmt.Sprintf("%s '%s' must be equal to or less than the memory limit %s '%s'",
		guestPath, mem.Guest, path.Child("domain", "resources", "limits", "memory"), limit))}
}

// emulatedMachines are KubeVirt's default machine types on amd64
// (pkg/virt-config/virt-config.go, DefaultAMD64EmulatedMachines).
var emulatedMachines = []string{"q35*", "pc-q35*"}

// machineTypeSupported is validateEmulatedMachine (vmi-create-admitter.go):
// a machine type, when set, matches an allowed pattern (i440fx "pc" does not).
func machineTypeSupported(path *field.Path, spec *kubevirtv1.VirtualMachineInstanceSpec) []metav1.StatusCause {
	m := spec.Domain.Machine
	if m == nil || m.Type == "" {
		return nil
	}
	for _, pattern := range emulatedMachines {
		if ok, _ := filepath.Match(pattern, m.Type); ok {
			return nil
		}
	}
	p := path.Child("domain", "machine", "type")
	return []metav1.StatusCause{invalid(p, fmt.Sprintf("%s is not supported: %s (allowed values: %v)", p, m.Type, emulatedMachines))}
}

// singlePodNetwork is validateSinglePodNetwork (netsource.go): at most one
// pod network, at most one default Multus network, and not both.
func singlePodNetwork(path *field.Path, spec *kubevirtv1.VirtualMachineInstanceSpec) []metav1.StatusCause {
	pods, multusDefaults := 0, 0
	for _, n := range spec.Networks {
		if n.Pod != nil {
			pods++
		}
		if n.Multus != nil && n.Multus.Default {
			multusDefaults++
		}
	}
	var causes []metav1.StatusCause
	if pods > 1 {
		causes = append(causes, metav1.StatusCause{Type: metav1.CauseTypeFieldValueDuplicate,
			Message: fmt.Sprintf("more than one interface is connected to a pod network in %s", path.Child("interfaces")),
			Field:   path.Child("interfaces").String()})
	}
	if multusDefaults > 1 {
		causes = append(causes, invalid(path.Child("networks"), "Multus CNI should only have one default network"))
	}
	if pods > 0 && multusDefaults > 0 {
		causes = append(causes, invalid(path.Child("networks"), "Pod network cannot be defined when Multus default network is defined"))
	}
	return causes
}

// singleNetworkSource is validateSingleNetworkSource (netsource.go): each
// network is exactly one of pod and multus (DRA networks are not played).
func singleNetworkSource(path *field.Path, spec *kubevirtv1.VirtualMachineInstanceSpec) []metav1.StatusCause {
	var causes []metav1.StatusCause
	for i, n := range spec.Networks {
		kinds := 0
		if n.Pod != nil {
			kinds++
		}
		if n.Multus != nil {
			kinds++
		}
		switch {
		case kinds == 0:
			causes = append(causes, requiredCause(path.Child("networks").Index(i), "should have a network type"))
		case kinds > 1:
			causes = append(causes, requiredCause(path.Child("networks").Index(i), "should have only one network type"))
		}
	}
	return causes
}

// multusNetworkNamed is validateMultusNetworkSource (netsource.go): the
// first Multus network without a networkName is reported.
func multusNetworkNamed(path *field.Path, spec *kubevirtv1.VirtualMachineInstanceSpec) []metav1.StatusCause {
	for i, n := range spec.Networks {
		if n.Multus != nil && n.Multus.NetworkName == "" {
			return []metav1.StatusCause{requiredCause(path.Child("networks").Index(i), "CNI delegating plugin must have a networkName")}
		}
	}
	return nil
}

// networksByName indexes the networks by name.
func networksByName(spec *kubevirtv1.VirtualMachineInstanceSpec) map[string]kubevirtv1.Network {
	out := map[string]kubevirtv1.Network{}
	for _, n := range spec.Networks {
		out[n.Name] = n
	}
	return out
}

// interfacesPath is where the interfaces live.
func interfacesPath(path *field.Path) *field.Path {
	return path.Child("domain", "devices", "interfaces")
}

// interfaceBinding is validateInterfaceBinding (binding.go): exactly one
// binding per interface; masquerade only on the pod network, and never
// with the in-pod bridge's reserved MAC.
func interfaceBinding(path *field.Path, spec *kubevirtv1.VirtualMachineInstanceSpec) []metav1.StatusCause {
	var causes []metav1.StatusCause
	nets := networksByName(spec)
	for i, iface := range spec.Domain.Devices.Interfaces {
		m := iface.InterfaceBindingMethod
		bindings := 0
		for _, set := range []bool{m.Bridge != nil, m.Masquerade != nil, m.SRIOV != nil, m.PasstBinding != nil, iface.Binding != nil} {
			if set {
				bindings++
			}
		}
		p := interfacesPath(path).Index(i)
		if bindings != 1 {
			causes = append(causes, invalid(p, fmt.Sprintf("logical %s interface must have exactly one binding method or binding plugin", iface.Name)))
		}
		if m.Masquerade != nil && nets[iface.Name].Pod == nil {
			causes = append(causes, invalid(p.Child("name"), "Masquerade interface only implemented with pod network"))
		}
		if m.Masquerade != nil && iface.MacAddress == "02:00:00:00:00:00" {
			causes = append(causes, invalid(p.Child("macAddress"), "The requested MAC address is reserved for the in-pod bridge. Please choose another one."))
		}
	}
	return causes
}

// networkNamesUnique is validateNetworkNameUnique (netiface.go).
func networkNamesUnique(path *field.Path, spec *kubevirtv1.VirtualMachineInstanceSpec) []metav1.StatusCause {
	var causes []metav1.StatusCause
	seen := map[string]bool{}
	for i, n := range spec.Networks {
		if seen[n.Name] {
			causes = append(causes, metav1.StatusCause{Type: metav1.CauseTypeFieldValueDuplicate,
				Message: fmt.Sprintf("Network with name %q already exists, every network must have a unique name", n.Name),
				Field:   path.Child("networks").Index(i).Child("name").String()})
		}
		seen[n.Name] = true
	}
	return causes
}

// networksHaveInterfaces is validateNetworksAssignedToInterfaces
// (netiface.go): every network has an interface of its name.
func networksHaveInterfaces(path *field.Path, spec *kubevirtv1.VirtualMachineInstanceSpec) []metav1.StatusCause {
	ifaces := map[string]bool{}
	for _, iface := range spec.Domain.Devices.Interfaces {
		ifaces[iface.Name] = true
	}
	var causes []metav1.StatusCause
	for i, n := range spec.Networks {
		if !ifaces[n.Name] {
			p := path.Child("networks").Index(i).Child("name")
			causes = append(causes, requiredCause(p, nameNotFound(p, n.Name)))
		}
	}
	return causes
}

// interfaceNamesUnique is validateInterfaceNameUnique (netiface.go).
func interfaceNamesUnique(path *field.Path, spec *kubevirtv1.VirtualMachineInstanceSpec) []metav1.StatusCause {
	var causes []metav1.StatusCause
	seen := map[string]bool{}
	for i, iface := range spec.Domain.Devices.Interfaces {
		if seen[iface.Name] {
			causes = append(causes, metav1.StatusCause{Type: metav1.CauseTypeFieldValueDuplicate,
				Message: "Only one interface can be connected to one specific network",
				Field:   interfacesPath(path).Index(i).Child("name").String()})
		}
		seen[iface.Name] = true
	}
	return causes
}

// interfacesHaveNetworks is validateInterfacesAssignedToNetworks
// (netiface.go): every interface has a network of its name.
func interfacesHaveNetworks(path *field.Path, spec *kubevirtv1.VirtualMachineInstanceSpec) []metav1.StatusCause {
	nets := networksByName(spec)
	var causes []metav1.StatusCause
	for i, iface := range spec.Domain.Devices.Interfaces {
		if _, ok := nets[iface.Name]; !ok {
			p := interfacesPath(path).Index(i).Child("name")
			causes = append(causes, invalid(p, nameNotFound(p, iface.Name)))
		}
	}
	return causes
}

// interfaceNameFormat and interfaceModels are what validateInterfaceNameFormat
// and validateInterfaceModel (netiface.go) accept.
var (
	interfaceNameFormat = regexp.MustCompile(`^[A-Za-z0-9-_]+$`)
	interfaceModels     = map[string]bool{"e1000": true, "e1000e": true, "igb": true, "ne2k_pci": true, "pcnet": true, "rtl8139": true, kubevirtv1.VirtIO: true}
)

// interfaceFields is validateInterfacesFields (netiface.go), for the name
// format, the model and the MAC address (validateMacAddress, with
// pkg/network/link/mac.go ValidateMacAddress: net.ParseMAC, 6 bytes).
func interfaceFields(path *field.Path, spec *kubevirtv1.VirtualMachineInstanceSpec) []metav1.StatusCause {
	var causes []metav1.StatusCause
	for i, iface := range spec.Domain.Devices.Interfaces {
		p := interfacesPath(path).Index(i)
		if !interfaceNameFormat.MatchString(iface.Name) {
			causes = append(causes, invalid(p.Child("name"), "Network interface name can only contain alphabetical characters, numbers, dashes (-) or underscores (_)"))
		}
		if iface.Model != "" && !interfaceModels[iface.Model] {
			causes = append(causes, metav1.StatusCause{Type: metav1.CauseTypeFieldValueNotSupported,
				Message: fmt.Sprintf("interface %s uses model %s that is not supported.", p.Child("name"), iface.Model),
				Field:   p.Child("model").String()})
		}
		if iface.MacAddress == "" {
			continue
		}
		if mac, err := net.ParseMAC(iface.MacAddress); err != nil {
			causes = append(causes, invalid(p.Child("macAddress"), fmt.Sprintf("interface %s has malformed MAC address (%s).", p.Child("name"), iface.MacAddress)))
		} else if len(mac) > 6 {
			causes = append(causes, invalid(p.Child("macAddress"), fmt.Sprintf("interface %s has too long MAC address (%s).", p.Child("name"), iface.MacAddress)))
		}
	}
	return causes
}
