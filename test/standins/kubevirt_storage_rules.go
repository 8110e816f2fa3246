package standins

import (
	"fmt"
	"regexp"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// The disk, volume, firmware and DataVolume-template rules of KubeVirt
// v1.9.0's webhook; see kubevirt_rules.go for where each file lives.

// disksPath is where the disks live.
func disksPath(path *field.Path) *field.Path {
	return path.Child("domain", "devices", "disks")
}

// bootOrder is validateBootOrder (vmi-create-admitter.go): every disk but
// an empty CD-ROM names a volume; boot orders are unique across disks and
// interfaces, and an interface's is above 0.
func bootOrder(path *field.Path, spec *kubevirtv1.VirtualMachineInstanceSpec) []metav1.StatusCause {
	volumes := map[string]bool{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = true
	}
	used := map[uint]bool{}
	var causes []metav1.StatusCause
	for i, d := range spec.Domain.Devices.Disks {
		p := disksPath(path).Index(i)
		switch {
		case volumes[d.Name]:
		case d.CDRom == nil:
			causes = append(causes, invalid(p.Child("name"), nameNotFound(p.Child("Name"), d.Name)))
		default:
			causes = append(causes, invalid(p.Child("name"), "DeclarativeHotplugVolumes feature gate not enabled, cannot define an empty CD-ROM disk"))
		}
		if d.BootOrder != nil {
			if used[*d.BootOrder] {
				causes = append(causes, invalid(p.Child("bootOrder"), fmt.Sprintf("Boot order for %s already set for a different device.", p.Child("bootOrder"))))
			}
			used[*d.BootOrder] = true
		}
	}
	for i, iface := range spec.Domain.Devices.Interfaces {
		if iface.BootOrder == nil {
			continue
		}
		p := interfacesPath(path).Index(i)
		switch {
		case *iface.BootOrder < 1:
			// KubeVirt names the interface by path.Index(i), not by its own path.
			causes = append(causes, invalid(p.Child("bootOrder"), fmt.Sprintf("%s must have a boot order > 0, if supplied", path.Index(i))))
		case used[*iface.BootOrder]:
			causes = append(causes, invalid(p.Child("bootOrder"), fmt.Sprintf("Boot order for %s already set for a different device.", p.Child("bootOrder"))))
		}
		used[*iface.BootOrder] = true
	}
	return causes
}

// diskSerialFormat and maxDiskSerial are what validateSerialNumValue and
// validateSerialNumLength (disks.go) accept.
var (
	diskSerialFormat = regexp.MustCompile(`^[A-Za-z0-9_.+-]+$`)
	maxDiskSerial    = 256
)

// domainDisks is ValidateDisks (disks.go), for names, device targets, boot
// order values, buses and serials.
func domainDisks(path *field.Path, spec *kubevirtv1.VirtualMachineInstanceSpec) []metav1.StatusCause {
	var causes []metav1.StatusCause
	disks := spec.Domain.Devices.Disks
	for i, d := range disks {
		p := disksPath(path).Index(i)
		for j := range i {
			if disks[j].Name == d.Name {
				causes = append(causes, invalid(p.Child("name"), fmt.Sprintf("%s and %s must not have the same Name.", p, disksPath(path).Index(j))))
			}
		}
		if targets(d) > 1 {
			causes = append(causes, invalid(p, fmt.Sprintf("%s can only have a single target type defined", p)))
		}
		if d.BootOrder != nil && *d.BootOrder < 1 {
			causes = append(causes, invalid(p.Child("bootOrder"), fmt.Sprintf("%s must have a boot order > 0, if supplied", p)))
		}
		causes = append(causes, diskBus(p, d)...)
		if d.Serial != "" && !diskSerialFormat.MatchString(d.Serial) {
			causes = append(causes, invalid(p.Child("serial"), fmt.Sprintf("%s must be made up of the following characters [A-Za-z0-9_.+-], if specified", p)))
		}
		if len([]rune(d.Serial)) > maxDiskSerial {
			causes = append(causes, invalid(p.Child("serial"), fmt.Sprintf("%s must be less than or equal to %d in length, if specified", p, maxDiskSerial)))
		}
	}
	return causes
}

// targets counts a disk's device targets (validateDeviceTarget).
func targets(d kubevirtv1.Disk) int {
	n := 0
	for _, set := range []bool{d.Disk != nil, d.LUN != nil, d.CDRom != nil} {
		if set {
			n++
		}
	}
	return n
}

// diskBus is validateBusSupport (disks.go): ide is gone; virtio, sata,
// scsi and usb are known; a CD-ROM is not on virtio; a SATA disk is not
// read-only.
func diskBus(p *field.Path, d kubevirtv1.Disk) []metav1.StatusCause {
	var bus kubevirtv1.DiskBus
	var kind string
	switch {
	case d.Disk != nil:
		bus, kind = d.Disk.Bus, "disk"
	case d.LUN != nil:
		bus, kind = d.LUN.Bus, "lun"
	case d.CDRom != nil:
		bus, kind = d.CDRom.Bus, "cdrom"
	}
	switch bus {
	case "", kubevirtv1.DiskBusSCSI, kubevirtv1.DiskBusUSB:
		return nil
	case "ide":
		return []metav1.StatusCause{invalid(p.Child(kind, "bus"), "IDE bus is not supported")}
	case kubevirtv1.DiskBusVirtio:
		if kind == "cdrom" {
			return []metav1.StatusCause{invalid(p.Child("cdrom", "bus"), fmt.Sprintf("Bus type %s is invalid for CD-ROM device", bus))}
		}
		return nil
	case kubevirtv1.DiskBusSATA:
		if d.Disk != nil && d.Disk.ReadOnly {
			return []metav1.StatusCause{invalid(p.Child("disk", "bus"), fmt.Sprintf("%s hard-disks do not support read-only.", bus))}
		}
		return nil
	}
	known := []kubevirtv1.DiskBus{kubevirtv1.DiskBusVirtio, kubevirtv1.DiskBusSCSI, kubevirtv1.DiskBusSATA, kubevirtv1.DiskBusUSB}
	return []metav1.StatusCause{invalid(p.Child(kind, "bus"), fmt.Sprintf("%s is set with an unrecognized bus %s, must be one of: %v", p, bus, known))}
}

// firmware is validateBootloader (vmi-create-admitter.go): BIOS or EFI,
// not both.
func firmware(path *field.Path, spec *kubevirtv1.VirtualMachineInstanceSpec) []metav1.StatusCause {
	fw := spec.Domain.Firmware
	if fw == nil || fw.Bootloader == nil || fw.Bootloader.EFI == nil || fw.Bootloader.BIOS == nil {
		return nil
	}
	p := path.Child("domain", "firmware", "bootloader")
	return []metav1.StatusCause{invalid(p, fmt.Sprintf("%s has both EFI and BIOS configured, but they are mutually exclusive.", p))}
}

// secureBootNeedsSMM is validateDomainSpec (vmi-create-admitter.go): EFI
// with secure boot, which is on unless secureBoot is false, needs the SMM
// feature on (TDX launch security is not played).
func secureBootNeedsSMM(path *field.Path, spec *kubevirtv1.VirtualMachineInstanceSpec) []metav1.StatusCause {
	fw := spec.Domain.Firmware
	if fw == nil || fw.Bootloader == nil || fw.Bootloader.EFI == nil {
		return nil
	}
	if sb := fw.Bootloader.EFI.SecureBoot; sb != nil && !*sb {
		return nil
	}
	if f := spec.Domain.Features; f != nil && f.SMM != nil && (f.SMM.Enabled == nil || *f.SMM.Enabled) {
		return nil
	}
	p := path.Child("domain")
	return []metav1.StatusCause{invalid(p, fmt.Sprintf("%s has EFI SecureBoot enabled. SecureBoot requires SMM, which is currently disabled.", p))}
}

// volumesHaveDisks is validateVirtualMachineInstanceSpecVolumeDisks
// (vmi-create-admitter.go, on VMI creation only): every volume but a memory
// dump has a disk or filesystem of its name.
func volumesHaveDisks(path *field.Path, spec *kubevirtv1.VirtualMachineInstanceSpec) []metav1.StatusCause {
	devices := map[string]bool{}
	for _, d := range spec.Domain.Devices.Disks {
		devices[d.Name] = true
	}
	for _, f := range spec.Domain.Devices.Filesystems {
		devices[f.Name] = true
	}
	var causes []metav1.StatusCause
	for i, v := range spec.Volumes {
		if v.MemoryDump == nil && !devices[v.Name] {
			// KubeVirt's path puts volumes under domain.
			p := path.Child("domain", "volumes").Index(i).Child("name")
			causes = append(causes, invalid(p, nameNotFound(p, v.Name)))
		}
	}
	return causes
}

// memoryRequested is ValidateVirtualMachineInstanceMandatoryFields
// (vmi-create-admitter.go): a memory request, a guest memory or hugepages.
func memoryRequested(path *field.Path, spec *kubevirtv1.VirtualMachineInstanceSpec) []metav1.StatusCause {
	if !spec.Domain.Resources.Requests.Memory().IsZero() {
		return nil
	}
	if m := spec.Domain.Memory; m != nil && (m.Guest != nil || m.Hugepages != nil) {
		return nil
	}
	return []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueRequired,
		Message: fmt.Sprintf("no memory requested, at least one of '%s', '%s' or '%s' must be set",
			path.Child("domain", "memory", "guest"), path.Child("domain", "memory", "hugepages", "pageSize"),
			path.Child("domain", "resources", "requests", "memory"))}}
}

// dataVolumeTemplates is ValidateDataVolumeTemplate (data-volume-template.go):
// each template is named, has a target and one source, and is used by a
// volume of the VM.
func dataVolumeTemplates(path *field.Path, spec *kubevirtv1.VirtualMachineSpec) []metav1.StatusCause {
	var causes []metav1.StatusCause
	for i, t := range spec.DataVolumeTemplates {
		p := path.Child("dataVolumeTemplate").Index(i)
		if c := dataVolumeTemplate(p, t); c != nil {
			causes = append(causes, *c)
			continue
		}
		used := false
		for _, v := range spec.Template.Spec.Volumes {
			used = used || v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == t.Name ||
				v.DataVolume != nil && v.DataVolume.Name == t.Name
		}
		if !used {
			causes = append(causes, requiredCause(p, fmt.Sprintf("DataVolumeTemplate entry %s must be referenced in the VMI template's 'volumes' list", p)))
		}
	}
	return causes
}

// dataVolumeTemplate is validateDataVolume (data-volume-template.go).
func dataVolumeTemplate(p *field.Path, t kubevirtv1.DataVolumeTemplateSpec) *metav1.StatusCause {
	var c metav1.StatusCause
	external := t.Spec.PVC != nil && (t.Spec.PVC.DataSource != nil || t.Spec.PVC.DataSourceRef != nil) ||
		t.Spec.Storage != nil && (t.Spec.Storage.DataSource != nil || t.Spec.Storage.DataSourceRef != nil)
	sourced := t.Spec.Source != nil || t.Spec.SourceRef != nil
	switch {
	case t.Name == "":
		c = requiredCause(p.Child("name"), fmt.Sprintf("'name' field must not be empty for DataVolumeTemplate entry %s.", p.Child("name")))
	case t.Spec.PVC == nil && t.Spec.Storage == nil:
		c = invalid(p.Child("PVC", "Storage"), "Missing Data volume PVC or Storage")
	case t.Spec.PVC != nil && t.Spec.Storage != nil:
		c = invalid(p.Child("PVC", "Storage"), "Duplicate storage definition, both target storage and target pvc defined")
	case external && sourced:
		c = invalid(p.Child("source"), "External population is incompatible with Source and SourceRef")
	case !external && !sourced:
		c = invalid(p.Child("source", "sourceRef"), "Data volume should have either Source, SourceRef, or be externally populated")
	case t.Spec.Source != nil:
		return templateSources(p, t.Spec.Source)
	default:
		return nil
	}
	return &c
}

// templateSources is validateNumberOfSources (data-volume-template.go).
func templateSources(p *field.Path, src *cdiv1.DataVolumeSource) *metav1.StatusCause {
	c := numberOfSources(field.NewPath("x"), &cdiv1.DataVolumeSpec{Source: src})
	if c == nil {
		return nil
	}
	msg := "Missing dataVolume valid source"
	if c.Message == "Multiple Data volume sources" {
		msg = "Multiple dataVolume sources"
	}
	cause := invalid(p.Child("source"), msg)
	return &cause
}

// dataVolumeTemplateNamespaces is validateVirtualMachineDataVolumeTemplateNamespace
// (data-volume-template.go, through vm-storage-admitter.go Admit): a
// template names no namespace but the VM's.
func dataVolumeTemplateNamespaces(vm *kubevirtv1.VirtualMachine, requestNamespace string) []metav1.StatusCause {
	ns := orDefault(vm.Namespace, requestNamespace)
	var causes []metav1.StatusCause
	for i, t := range vm.Spec.DataVolumeTemplates {
		if t.Namespace != "" && t.Namespace != ns {
			causes = append(causes, invalid(field.NewPath("spec", "dataVolumeTemplates").Index(i),
				fmt.Sprintf("Embedded DataVolume namespace %s differs from VM namespace %s", t.Namespace, ns)))
		}
	}
	return causes
}
