package cli

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/preflight"
	"platform.example/vm-migration/pkg/statemachine"
)

// What clears a refusal. A migration refused before its source was
// touched validates again when its spec changes
// (statemachine.RefusedBeforeCutover); what only a change outside its spec
// clears (the source VM in vSphere, the guest, the cluster) needs the
// migration created again once it is fixed. Next follows the blocking
// findings (status.preflight), or the failure's reason when no finding
// refused it: it names, for each, the spec field to change or the object
// outside the spec, and says when no change of the spec helps.

// remedy is what clears one refusal: a change of the spec, naming the
// field, a change outside it, naming the object, or either.
type remedy struct {
	spec, outside string
}

// kubevirtReservedMAC is the MAC address KubeVirt keeps for the in-pod
// bridge of a masquerade interface, which its webhook refuses for a VM.
const kubevirtReservedMAC = "02:00:00:00:00:00"

// remedies say what clears a blocking finding, by reason.
var remedies = map[string]func(*v1alpha1.VirtualMachineMigration) remedy{
	preflight.ReasonRDMDisk:                outside("in vSphere, make the raw device mapping a virtual disk (Storage vMotion to a VMFS datastore) or detach it"),
	preflight.ReasonSharedDisk:             outside("in vSphere, detach the shared disk from the VM, or stop every VM that shares it and set its sharing to none"),
	preflight.ReasonExistingSnapshots:      outside("in vSphere, delete the VM's snapshots (Delete All consolidates its disks)"),
	preflight.ReasonEncryptedVM:            outside("in vSphere, decrypt the VM (a storage policy without encryption)"),
	preflight.ReasonSourceSuspended:        outside("in vSphere, resume the VM or power it off"),
	preflight.ReasonUnsupportedFirmware:    outside("in vSphere, fix the VM's boot options (EFI firmware, or secure boot off)"),
	preflight.ReasonGuestAddressRejected:   outside("correct what the guest reports of its network (its network configuration, its VMware Tools), which the controller refused (status.source.guestNetworkRejected)"),
	preflight.ReasonLauncherSeccompMissing: outside("give KubeVirt's launcher pods a seccomp profile (the KubeVirt resource's spec.configuration.seccompConfiguration), or migrate into a namespace that does not enforce PodSecurity restricted"),
	preflight.ReasonUnmappedNetwork:        inSpec("map the source network in spec.target.networks (type Pod, Multus or Ignore)"),
	preflight.ReasonMultiplePodNICs:        inSpec("map all but one of the networks on the pod network to Multus or Ignore in spec.target.networks"),
	preflight.ReasonDurationOutOfRange:     inSpec("set the duration of spec.policy the finding names to a positive one of at most " + v1alpha1.MaxDuration.String()),
	preflight.ReasonMissingStorageMapping: both("set spec.target.storage.default.storageClassName (or an entry of spec.target.storage for the datastore or the disk)",
		"mark a StorageClass the cluster's default"),
	preflight.ReasonStorageClassMissing: both("name an existing StorageClass in spec.target.storage", "create the StorageClass"),
	preflight.ReasonStorageProfileIncomplete: both("set the access modes and the volume mode in the disk's entry of spec.target.storage",
		"add them to the class's CDI StorageProfile (spec.claimPropertySets)"),
	preflight.ReasonStorageModeUnsupported: both("map the disk to a class that offers the volume mode and access modes it asks for, or ask for what the class lists, in spec.target.storage",
		"add the set to the class's CDI StorageProfile (spec.claimPropertySets)"),
	preflight.ReasonNetworkDefinitionMissing:  both("map the network to another one in spec.target.networks", "create the NetworkAttachmentDefinition it names"),
	preflight.ReasonTargetNameTaken:           both("set spec.target.name to a free name", "delete the VirtualMachine of that name"),
	preflight.ReasonChildNameTaken:            both("set spec.target.name to another name (it names the DataVolumes)", "delete the objects it names, which are not this migration's"),
	preflight.ReasonSourceAlreadyMigrated:     both("if a second copy is wanted, set spec.target.secondCopy: true and a free spec.target.name", "delete the copy already migrated"),
	preflight.ReasonConversionImageNotAllowed: both("leave spec.conversion.image empty (the controller's image)", "have the operator allow the image (--allowed-conversion-images)"),
	preflight.ReasonNoConversionImage:         both("set spec.conversion.image, or spec.conversion.skip: true if the guest has virtio drivers already", "start the controller with --conversion-image"),
	preflight.ReasonWindowsWithoutVirtioDrivers: both("set spec.conversion.image to an image with virtio-win drivers (within --allowed-conversion-images)",
		"give the controller's --conversion-image the drivers"),
	preflight.ReasonUnsupportedGuestOS:         both("set spec.conversion.skip: true, but only if the guest has virtio drivers already", "migrate the VM another way"),
	preflight.ReasonDryRunRefused:              dryRunRemedy,
	preflight.ReasonTransferImageNotRunnable:   proofRemedy(v1alpha1.ComponentTransfer),
	preflight.ReasonConversionImageNotRunnable: proofRemedy(v1alpha1.ComponentConversion),
	statemachine.ReasonTargetNameClaimed:       inSpec("set spec.target.name to another name"),
	statemachine.ReasonSourceVMClaimed:         outside("wait for the other migration of the source VM to end, or delete it"),
}

func outside(what string) func(*v1alpha1.VirtualMachineMigration) remedy {
	return func(*v1alpha1.VirtualMachineMigration) remedy { return remedy{outside: what} }
}

func inSpec(what string) func(*v1alpha1.VirtualMachineMigration) remedy {
	return func(*v1alpha1.VirtualMachineMigration) remedy { return remedy{spec: what} }
}

func both(spec, outside string) func(*v1alpha1.VirtualMachineMigration) remedy {
	return func(*v1alpha1.VirtualMachineMigration) remedy { return remedy{spec: spec, outside: outside} }
}

// quotaRefusal finds the ResourceQuota a refusal names.
var quotaRefusal = regexp.MustCompile(`exceeded quota: ([a-z0-9]([-a-z0-9.]*[a-z0-9])?)`)

// dryRunRemedy says what clears the API server's refusal of the dry run
// of the migration's objects: a MAC address KubeVirt refuses, a quota,
// or what the answer names.
func dryRunRemedy(m *v1alpha1.VirtualMachineMigration) remedy {
	var refused []v1alpha1.DryRunObject
	if dr := m.Status.DryRun; dr != nil {
		for _, o := range dr.Objects {
			if o.Outcome == v1alpha1.DryRunRefused {
				refused = append(refused, o)
			}
		}
	}
	answer := fmt.Sprintf("kubectl vmm plan %s -n %s shows the API server's answer for each object", m.Name, m.Namespace)
	if len(refused) == 0 {
		return remedy{outside: "change what the API server refuses (" + answer + ")"}
	}
	o := refused[0]
	switch {
	case o.Kind == "VirtualMachine" && strings.Contains(strings.ToLower(o.Message), "mac address") && m.SpecInForce().Target.PreserveMACs():
		return macRemedy(m)
	case quotaRefusal.MatchString(o.Message):
		quota := quotaRefusal.FindStringSubmatch(o.Message)[1]
		return remedy{outside: fmt.Sprintf("raise ResourceQuota %s of namespace %s, which refuses %s %s, or free what it counts", quota, m.Namespace, o.Kind, o.Name)}
	}
	return remedy{outside: fmt.Sprintf("change what the API server refuses of %s %s in namespace %s (its admission, a policy, a webhook: %s)", o.Kind, o.Name, m.Namespace, answer)}
}

// macRemedy clears KubeVirt's refusal of the VM's MAC addresses, the
// source NICs' (spec.target.preserveMACAddresses keeps them): the NICs
// with the MAC KubeVirt keeps for itself, else every NIC.
func macRemedy(m *v1alpha1.VirtualMachineMigration) remedy {
	var nics, all []string
	if src := m.Status.Source; src != nil {
		for _, n := range src.NICs {
			label := n.Label
			if label == "" {
				label = fmt.Sprintf("NIC %d", n.Key)
			}
			nic := fmt.Sprintf("MAC %s of source NIC %s", clean(n.MAC), clean(label))
			all = append(all, nic)
			if strings.EqualFold(n.MAC, kubevirtReservedMAC) {
				nics = append(nics, nic)
			}
		}
	}
	if len(nics) == 0 {
		nics = all
	}
	which := "the source NICs' MAC addresses"
	if len(nics) > 0 {
		which = strings.Join(nics, ", ")
	}
	return remedy{
		spec:    fmt.Sprintf("KubeVirt refuses %s, which the VM keeps: set spec.target.preserveMACAddresses to false (KubeVirt then gives each NIC a MAC of its own)", which),
		outside: "give the NIC another MAC address in vSphere",
	}
}

// proofRemedy clears the refusal of a component's image by its proof,
// by the proof's reason: a pull, a node, the image's self-check.
func proofRemedy(component string) func(*v1alpha1.VirtualMachineMigration) remedy {
	return func(m *v1alpha1.VirtualMachineMigration) remedy {
		p := v1alpha1.ImageProof{Component: component}
		for _, q := range m.Status.ImageProofs {
			if q.Component == component {
				p = q
			}
		}
		image, flag := clean(p.Image), "--"+component+"-image"
		if image == "" {
			image = "the " + component + " image"
		}
		specImage := component == v1alpha1.ComponentConversion
		switch p.Reason {
		case "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName":
			r := remedy{spec: fmt.Sprintf("name a Secret that may pull %s in spec.imagePullSecrets", image), outside: fmt.Sprintf("make %s pullable from namespace %s", image, m.Namespace)}
			if specImage {
				r.spec += ", or another image in spec.conversion.image"
			}
			return r
		case "Unschedulable":
			return remedy{outside: fmt.Sprintf("make room on a node for its pod (no spec field places it: kubectl describe job %s -n %s)", clean(p.JobName), m.Namespace)}
		case "FailedCreate":
			return remedy{outside: fmt.Sprintf("have namespace %s admit its pod (PodSecurity, a quota, a webhook: kubectl describe job %s -n %s)", m.Namespace, clean(p.JobName), m.Namespace)}
		}
		if specImage {
			return remedy{spec: "set spec.conversion.image to an image whose self-check passes", outside: "fix the controller's " + flag}
		}
		return remedy{outside: fmt.Sprintf("fix %s (the controller's %s) so that its pod runs and its self-check passes here", image, flag)}
	}
}

// refusalReasons are the reasons a refused migration was refused for:
// its blocking findings', each once; else its failure's: for a preflight
// failure, the first finding's its message begins with ("RDMDisk: ...").
func refusalReasons(m *v1alpha1.VirtualMachineMigration) []string {
	var reasons []string
	for _, f := range m.Status.Preflight {
		if f.Severity == v1alpha1.SeverityBlocking && !slices.Contains(reasons, f.Reason) {
			reasons = append(reasons, f.Reason)
		}
	}
	e := m.Status.LastError
	switch {
	case len(reasons) > 0 || e == nil:
	case e.Reason == statemachine.ReasonPreflightFailed && findingPrefix.MatchString(e.Message):
		reasons = append(reasons, findingPrefix.FindStringSubmatch(e.Message)[1])
	default:
		reasons = append(reasons, e.Reason)
	}
	return reasons
}

// findingPrefix is the reason a preflight failure's message begins with.
var findingPrefix = regexp.MustCompile(`^([A-Z][A-Za-z0-9]+): `)

// refusedStep is Next of a migration refused before its source was
// touched: what clears each reason, and how the migration goes on: a
// change of its spec validates it again (inventory and all, so a fix
// outside the spec made first counts); with nothing to change in the
// spec, it is created again. A reason this version does not know refers
// to its finding, which says what to change.
func refusedStep(m *v1alpha1.VirtualMachineMigration) string {
	var parts []string
	inSpec, outsideOnly, orOutside := 0, 0, 0
	for _, reason := range refusalReasons(m) {
		clause, ok := remedies[reason]
		if !ok {
			parts = append(parts, fmt.Sprintf("%s: its finding says what to change (kubectl vmm describe %s -n %s)", clean(reason), m.Name, m.Namespace))
			inSpec, orOutside = inSpec+1, orOutside+1
			continue
		}
		switch r := clause(m); {
		case r.spec != "" && r.outside != "":
			parts = append(parts, fmt.Sprintf("%s: %s, or %s", clean(reason), r.spec, r.outside))
			inSpec, orOutside = inSpec+1, orOutside+1
		case r.spec != "":
			parts = append(parts, fmt.Sprintf("%s: %s", clean(reason), r.spec))
			inSpec++
		default:
			parts = append(parts, fmt.Sprintf("%s: no change of the spec helps: %s", clean(reason), r.outside))
			outsideOnly++
		}
	}
	edit := fmt.Sprintf("kubectl edit vmm %s -n %s", m.Name, m.Namespace)
	again := fmt.Sprintf("create the migration again (kubectl vmm cancel %s -n %s deletes this one)", m.Name, m.Namespace)
	switch {
	case inSpec > 0 && outsideOnly > 0:
		parts = append(parts, fmt.Sprintf("make the fixes outside the spec first: a change of the spec (%s) then validates it again", edit))
	case inSpec > 0:
		parts = append(parts, fmt.Sprintf("a change of the spec (%s) validates it again", edit))
		if orOutside > 0 {
			parts = append(parts, "after a fix outside the spec alone, "+again)
		}
	default:
		parts = append(parts, "after the fix, "+again)
	}
	return fmt.Sprintf("Refused before its source VM was touched: %s.", strings.Join(parts, "; "))
}
