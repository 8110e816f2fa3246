package preflight

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// Reasons of the findings, one per rule.
const (
	// ReasonInventoryMissing: there is no inventory (or spec) to check.
	ReasonInventoryMissing = "InventoryMissing"
	// ReasonRDMDisk: a disk is a raw device mapping.
	ReasonRDMDisk = "RDMDisk"
	// ReasonSharedDisk: a disk is shared between VMs (multi-writer).
	ReasonSharedDisk = "SharedDisk"
	// ReasonIndependentDisk: a disk is independent of snapshots.
	ReasonIndependentDisk = "IndependentDisk"
	// ReasonUnmappedNetwork: a NIC's network has no entry in spec.target.networks.
	ReasonUnmappedNetwork = "UnmappedNetwork"
	// ReasonMissingStorageMapping: a disk maps to no storage class and the
	// cluster has no default one.
	ReasonMissingStorageMapping = "MissingStorageMapping"
	// ReasonStorageClassMissing: a storage class the spec names does not exist.
	ReasonStorageClassMissing = "StorageClassMissing"
	// ReasonUnusedStorageMapping: a per-disk or per-datastore entry matches no disk.
	ReasonUnusedStorageMapping = "UnusedStorageMapping"
	// ReasonExistingSnapshots: the VM has snapshots (its disks are deltas).
	ReasonExistingSnapshots = "ExistingSnapshots"
	// ReasonEncryptedVM: the VM is encrypted.
	ReasonEncryptedVM = "EncryptedVM"
	// ReasonVTPM: the VM has a virtual TPM.
	ReasonVTPM = "VTPMPresent"
	// ReasonUnsupportedFirmware: the firmware settings cannot be reproduced
	// (secure boot without EFI).
	ReasonUnsupportedFirmware = "UnsupportedFirmware"
	// ReasonTargetNameTaken: a VirtualMachine with the target name exists.
	ReasonTargetNameTaken = "TargetNameTaken"
	// ReasonChildNameTaken: an object the migration would create (a
	// staging claim, a DataVolume or its claim) exists and is not its own.
	ReasonChildNameTaken = "ChildNameTaken"
	// ReasonSourceAlreadyMigrated: a VirtualMachine a migration made from
	// the same source VM exists in a watched namespace; a second copy
	// would run with the same MAC addresses (blocking unless
	// spec.target.secondCopy).
	ReasonSourceAlreadyMigrated = "SourceAlreadyMigrated"
	// ReasonSecondCopy: spec.target.secondCopy asks for a second copy; its
	// NICs get new MAC addresses (a warning).
	ReasonSecondCopy = "SecondCopy"
	// ReasonConversionImageNotAllowed: spec.conversion.image is neither
	// the controller's default image nor on its allow-list.
	ReasonConversionImageNotAllowed = "ConversionImageNotAllowed"
	// ReasonMultiplePodNICs: more than one NIC would land on the pod
	// network, which KubeVirt allows only once.
	ReasonMultiplePodNICs = "MultiplePodNICs"
	// ReasonNoConversionImage: the guest is to be converted but no
	// virt-v2v image is known.
	ReasonNoConversionImage = "NoConversionImage"
	// ReasonDurationOutOfRange: a duration of the policy is not a positive
	// duration of at most v1alpha1.MaxDuration (stored under the schema of
	// an older release).
	ReasonDurationOutOfRange = "DurationOutOfRange"
	// ReasonSourceSuspended: the VM is suspended; powering it off would
	// discard its suspended memory state, which cannot be restored.
	ReasonSourceSuspended = "SourceSuspended"
)

// ClusterFacts is what the controller observed in the cluster for one
// migration. The gatherer fills it from listers; Check only reads it.
type ClusterFacts struct {
	// StorageClasses that exist, by name.
	StorageClasses map[string]bool
	// DefaultStorageClass is the name of the cluster's default storage
	// class, or empty when there is none.
	DefaultStorageClass string
	// TargetName is the name the target VirtualMachine will get (the spec's
	// or the default derived from the source name).
	TargetName string
	// TargetNameTaken says a VirtualMachine named TargetName already exists
	// in the namespace and does not belong to this migration.
	TargetNameTaken bool
	// TargetMadeBy names the migration (namespace/name) that made the
	// VirtualMachine holding the target name, when one did: it holds
	// migrated data.
	TargetMadeBy string
	// TakenNames lists, as "Kind/name", the other objects the migration
	// would create that already exist and are not its own.
	TakenNames []string
	// TakenMigrated says some of TakenNames were made by a migration
	// (another's, or one deleted since): they hold migrated data.
	TakenMigrated bool
	// SourceCopies are the VirtualMachines migrations made from the same
	// source VM, in the namespaces the controller watches.
	SourceCopies []v1alpha1.MigratedCopy
	// AllowedConversionImages are the patterns (path.Match, e.g.
	// "registry.example.com/v2v/*") a migration's own conversion image must
	// match; the default image is always allowed.
	AllowedConversionImages []string
	// DefaultConversionImage is the controller's default virt-v2v image
	// (its --conversion-image flag); empty when it has none.
	DefaultConversionImage string
	// ControllerSnapshots are snapshots this migration made itself (from
	// status); they do not count as existing snapshots.
	ControllerSnapshots []string
	// DryRun is the API server's answer to the dry run of the objects the
	// migration creates; nil when none was made.
	DryRun *v1alpha1.DryRunStatus
	// Proofs are the image proofs' results known so far.
	Proofs []v1alpha1.ImageProof
	// ConversionVirtioWin is what the conversion image's self-check said
	// of virtio-win drivers; nil while unknown.
	ConversionVirtioWin *VirtioWin
	// Launcher is what the cluster says of KubeVirt's launcher pods in
	// the namespace.
	Launcher LauncherFacts
	// NetworkDefinitions are what the cluster said of the Multus networks
	// the mappings name, by multusNetworkName as written; a network
	// missing here was not asked about.
	NetworkDefinitions map[string]NetworkDefinitionFact
	// StorageProfiles are CDI's StorageProfiles, by storage class; nil
	// when they were not read (no CDI, no permission).
	StorageProfiles map[string]StorageProfileFact
}

// Check runs every rule and returns the findings, Blocking and Warning, in
// a stable order: by rule, then by disk or NIC in source order. It never
// panics: a nil spec or inventory yields one Blocking finding.
func Check(spec *v1alpha1.VirtualMachineMigrationSpec, inv *v1alpha1.SourceInventory, cluster ClusterFacts) []v1alpha1.PreflightFinding {
	if spec == nil || inv == nil {
		return []v1alpha1.PreflightFinding{blocking(ReasonInventoryMissing,
			"the source VM has not been inventoried yet: preflight checks run once it has been found and read")}
	}
	c := &checker{spec: spec, inv: inv, cluster: cluster}
	for _, rule := range []func(){
		c.durations,
		c.rdmDisks,
		c.sharedDisks,
		c.independentDisks,
		c.snapshots,
		c.encryption,
		c.vtpm,
		c.suspended,
		c.conversionImage,
		c.firmware,
		c.networks,
		c.podNICs,
		c.networkDefinitions,
		c.guestNetwork,
		c.storageMapping,
		c.storageClasses,
		c.storageProfiles,
		c.storageModes,
		c.unusedStorageMappings,
		c.targetName,
		c.childNames,
		c.sourceCopies,
		c.guest,
		c.launcherSeccomp,
		c.dryRun,
		c.imageProofs,
	} {
		rule()
	}
	return c.findings
}

// HasBlocking says whether any finding blocks the migration.
func HasBlocking(findings []v1alpha1.PreflightFinding) bool {
	for _, f := range findings {
		if f.Severity == v1alpha1.SeverityBlocking {
			return true
		}
	}
	return false
}

type checker struct {
	spec     *v1alpha1.VirtualMachineMigrationSpec
	inv      *v1alpha1.SourceInventory
	cluster  ClusterFacts
	findings []v1alpha1.PreflightFinding
}

func blocking(reason, msg string) v1alpha1.PreflightFinding {
	return v1alpha1.PreflightFinding{Reason: reason, Severity: v1alpha1.SeverityBlocking, Message: msg}
}

func warning(reason, msg string) v1alpha1.PreflightFinding {
	return v1alpha1.PreflightFinding{Reason: reason, Severity: v1alpha1.SeverityWarning, Message: msg}
}

func (c *checker) add(f v1alpha1.PreflightFinding) { c.findings = append(c.findings, f) }

// diskName names a disk for a person: label, key and backing file.
func diskName(d v1alpha1.SourceDisk) string {
	label := d.Label
	if label == "" {
		label = "disk"
	}
	if d.FileName != "" {
		return fmt.Sprintf("%s (key %d, %s)", label, d.Key, d.FileName)
	}
	return fmt.Sprintf("%s (key %d)", label, d.Key)
}

// durations blocks a migration whose policy holds a duration out of range:
// the schema of older releases admitted values Go cannot even hold.
func (c *checker) durations() {
	for _, msg := range c.spec.Policy.DurationProblems() {
		c.add(blocking(ReasonDurationOutOfRange, msg+"; set a positive duration of at most "+v1alpha1.MaxDuration.String()))
	}
}

func (c *checker) rdmDisks() {
	for _, d := range c.inv.Disks {
		if d.RDM {
			c.add(blocking(ReasonRDMDisk, fmt.Sprintf(
				"%s is a raw device mapping: its data lives on a LUN, not in a virtual disk file the migration can copy. "+
					"Convert it to a virtual disk (Storage vMotion to a VMFS datastore) or detach it and move its data separately", diskName(d))))
		}
	}
}

func (c *checker) sharedDisks() {
	for _, d := range c.inv.Disks {
		if d.Sharing == "sharingMultiWriter" {
			c.add(blocking(ReasonSharedDisk, fmt.Sprintf(
				"%s is shared with other VMs (multi-writer): copying it while another VM writes to it would corrupt it, and KubeVirt cannot share it the same way. "+
					"Detach it from this VM, or stop every VM that shares it and set sharing to none", diskName(d))))
		}
	}
}

func (c *checker) independentDisks() {
	for _, d := range c.inv.Disks {
		if !strings.HasPrefix(d.DiskMode, "independent") {
			continue
		}
		msg := fmt.Sprintf("%s is %s: snapshots do not cover it, so it is copied only while the source VM is powered off", diskName(d), d.DiskMode)
		if d.DiskMode == "independent_nonpersistent" {
			msg += "; being nonpersistent, every change made since the VM powered on is discarded when it powers off, and is not migrated"
		}
		c.add(warning(ReasonIndependentDisk, msg))
	}
}

func (c *checker) snapshots() {
	own := map[string]bool{}
	for _, n := range c.cluster.ControllerSnapshots {
		own[n] = true
	}
	var foreign []string
	for _, n := range c.inv.Snapshots {
		if !own[n] {
			foreign = append(foreign, n)
		}
	}
	var deltas []string
	for _, d := range c.inv.Disks {
		if d.SnapshotDelta {
			deltas = append(deltas, diskName(d))
		}
	}
	if len(foreign) == 0 && len(deltas) == 0 {
		return
	}
	msg := "the source VM has snapshots"
	if len(foreign) > 0 {
		msg += fmt.Sprintf(" (%s)", strings.Join(quoteAll(foreign), ", "))
	}
	if len(deltas) > 0 {
		msg += fmt.Sprintf("; these disks run on snapshot deltas: %s", strings.Join(deltas, ", "))
	}
	msg += ". A cold migration copies base disks only, so data written since a snapshot would be lost. " +
		"Delete or consolidate the snapshots in vSphere (Snapshots > Delete All, then Consolidate), then retry"
	c.add(blocking(ReasonExistingSnapshots, msg))
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

func (c *checker) encryption() {
	if c.inv.Encrypted {
		c.add(blocking(ReasonEncryptedVM,
			"the source VM is encrypted (VM encryption): its disk files cannot be read through the datastore. "+
				"Decrypt it in vSphere (VM Policies > Edit VM Storage Policies, choose a policy without encryption) and retry"))
	}
}

func (c *checker) podNICs() {
	pod := map[string]bool{}
	for _, m := range c.spec.Target.Networks {
		if m.Type == v1alpha1.NetworkTypePod {
			pod[m.Source] = true
		}
	}
	var nics []string
	for _, n := range c.inv.NICs {
		if pod[n.Network] {
			nics = append(nics, fmt.Sprintf("%s on %q", nicLabel(n), n.Network))
		}
	}
	if len(nics) > 1 {
		c.add(blocking(ReasonMultiplePodNICs, fmt.Sprintf(
			"%d NICs would be on the pod network (%s), and a KubeVirt VM may have only one: map the others to Multus networks or Ignore",
			len(nics), strings.Join(nics, ", "))))
	}
}

func nicLabel(n v1alpha1.SourceNIC) string {
	label := n.Label
	if label == "" {
		label = fmt.Sprintf("NIC %d", n.Key)
	}
	if n.MAC != "" {
		label += " (" + n.MAC + ")"
	}
	return label
}

func (c *checker) conversionImage() {
	conv := c.spec.Conversion
	switch {
	case conv.Skip:
	case conv.Image == "" && c.cluster.DefaultConversionImage == "":
		c.add(blocking(ReasonNoConversionImage,
			"the guest is to be converted but no virt-v2v image is known: set spec.conversion.image, start the controller with --conversion-image, "+
				"or set spec.conversion.skip: true when the guest already has virtio drivers"))
	case conv.Image != "" && !c.imageAllowed(conv.Image):
		c.add(blocking(ReasonConversionImageNotAllowed, fmt.Sprintf(
			"spec.conversion.image %q is not allowed: the conversion runs with access to the staged disks, so only the controller's default image and the images its operator allows (--allowed-conversion-images: %s) may run; leave spec.conversion.image empty or ask the operator",
			conv.Image, orNone(c.cluster.AllowedConversionImages))))
	}
}

// imageAllowed reports whether image is the default conversion image or
// matches a pattern of the allow-list.
func (c *checker) imageAllowed(image string) bool {
	if image == c.cluster.DefaultConversionImage {
		return true
	}
	for _, p := range c.cluster.AllowedConversionImages {
		if ok, err := path.Match(p, image); err == nil && ok {
			return true
		}
	}
	return false
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func (c *checker) suspended() {
	if c.inv.PowerState == "suspended" {
		c.add(blocking(ReasonSourceSuspended,
			"the source VM is suspended: stopping it would discard its memory state, which a failed or cancelled migration could not give back. "+
				"Resume it (it is then shut down gracefully) or power it off, then create the migration again"))
	}
}

func (c *checker) vtpm() {
	if c.inv.VTPM {
		c.add(warning(ReasonVTPM,
			"the source VM has a virtual TPM whose state (keys sealed by the guest, such as BitLocker or LUKS with TPM unlock) is not migrated. "+
				"Keep recovery keys at hand or suspend TPM-bound encryption in the guest before the cutover"))
	}
}

func (c *checker) firmware() {
	if c.inv.SecureBoot && c.inv.Firmware != v1alpha1.FirmwareEFI {
		c.add(blocking(ReasonUnsupportedFirmware, fmt.Sprintf(
			"the source VM has secure boot on with %s firmware: secure boot needs EFI. "+
				"Fix the VM's boot options in vSphere (firmware EFI, or secure boot off) and retry", firmwareName(c.inv.Firmware))))
	}
}

func firmwareName(f v1alpha1.Firmware) string {
	if f == "" {
		return "unknown"
	}
	return string(f)
}

func (c *checker) networks() {
	mapped := map[string]bool{}
	for _, m := range c.spec.Target.Networks {
		mapped[m.Source] = true
	}
	var order []string
	nicsByNet := map[string][]string{}
	for _, n := range c.inv.NICs {
		if mapped[n.Network] {
			continue
		}
		if _, seen := nicsByNet[n.Network]; !seen {
			order = append(order, n.Network)
		}
		nicsByNet[n.Network] = append(nicsByNet[n.Network], nicLabel(n))
	}
	for _, net := range order {
		name := net
		if name == "" {
			name = "(no network)"
		}
		c.add(blocking(ReasonUnmappedNetwork, fmt.Sprintf(
			"source network %q of %s has no entry in spec.target.networks: add {source: %q, type: Pod|Multus|Ignore}",
			name, strings.Join(nicsByNet[net], ", "), net)))
	}
}

// storageTarget resolves a disk's target: per disk, then per datastore,
// then default; ok is false when no entry applies.
func (c *checker) storageTarget(d v1alpha1.SourceDisk) (v1alpha1.StorageTarget, string, bool) {
	s := c.spec.Target.Storage
	for _, m := range s.Disks {
		if m.DiskKey == d.Key {
			return m.Target, fmt.Sprintf("spec.target.storage.disks[diskKey=%d]", d.Key), true
		}
	}
	for _, m := range s.Datastores {
		if m.Datastore == d.Datastore {
			return m.Target, fmt.Sprintf("spec.target.storage.datastores[datastore=%s]", d.Datastore), true
		}
	}
	if s.Default != nil {
		return *s.Default, "spec.target.storage.default", true
	}
	return v1alpha1.StorageTarget{}, "", false
}

func (c *checker) storageMapping() {
	if c.cluster.DefaultStorageClass != "" {
		return
	}
	for _, d := range c.inv.Disks {
		t, _, ok := c.storageTarget(d)
		if ok && t.StorageClassName != "" {
			continue
		}
		c.add(blocking(ReasonMissingStorageMapping, fmt.Sprintf(
			"%s on datastore %q maps to no storage class and the cluster has no default storage class: "+
				"set spec.target.storage.default.storageClassName, or add an entry for the datastore or disk key %d",
			diskName(d), d.Datastore, d.Key)))
	}
}

func (c *checker) storageClasses() {
	type use struct {
		where string
		keys  []string
	}
	missing := map[string][]*use{}
	var order []string
	need := func(class, where, key string) {
		if class == "" || c.cluster.StorageClasses[class] {
			return
		}
		if _, seen := missing[class]; !seen {
			order = append(order, class)
		}
		for _, u := range missing[class] {
			if u.where == where {
				if key != "" {
					u.keys = append(u.keys, key)
				}
				return
			}
		}
		u := &use{where: where}
		if key != "" {
			u.keys = append(u.keys, key)
		}
		missing[class] = append(missing[class], u)
	}
	for _, d := range c.inv.Disks {
		if t, where, ok := c.storageTarget(d); ok {
			need(t.StorageClassName, where, fmt.Sprint(d.Key))
		}
	}
	need(c.spec.Staging.StorageClassName, "spec.staging.storageClassName", "")
	for _, class := range order {
		var uses []string
		for _, u := range missing[class] {
			if len(u.keys) > 0 {
				uses = append(uses, fmt.Sprintf("%s for disk keys %s", u.where, strings.Join(u.keys, ", ")))
			} else {
				uses = append(uses, u.where)
			}
		}
		c.add(blocking(ReasonStorageClassMissing, fmt.Sprintf(
			"storage class %q does not exist in the cluster (used by %s): create it or name an existing one",
			class, strings.Join(uses, "; "))))
	}
}

func (c *checker) unusedStorageMappings() {
	keys := map[int32]bool{}
	datastores := map[string]bool{}
	for _, d := range c.inv.Disks {
		keys[d.Key] = true
		datastores[d.Datastore] = true
	}
	for _, m := range c.spec.Target.Storage.Disks {
		if !keys[m.DiskKey] {
			c.add(warning(ReasonUnusedStorageMapping, fmt.Sprintf(
				"spec.target.storage.disks has an entry for disk key %d, but the source VM has no such disk (keys: %s)",
				m.DiskKey, diskKeys(c.inv.Disks))))
		}
	}
	for _, m := range c.spec.Target.Storage.Datastores {
		if !datastores[m.Datastore] {
			c.add(warning(ReasonUnusedStorageMapping, fmt.Sprintf(
				"spec.target.storage.datastores has an entry for datastore %q, but no disk of the source VM is on it", m.Datastore)))
		}
	}
}

func diskKeys(disks []v1alpha1.SourceDisk) string {
	ks := make([]int, 0, len(disks))
	for _, d := range disks {
		ks = append(ks, int(d.Key))
	}
	sort.Ints(ks)
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = fmt.Sprint(k)
	}
	return orNone(s)
}

// childNames blocks when an object the migration would create is taken.
// Deleting them is advised only when no migration made them: what a
// migration made (a migrated VM's DataVolumes and their claims) holds
// migrated data.
func (c *checker) childNames() {
	if len(c.cluster.TakenNames) == 0 {
		return
	}
	others := "migrate under other names (the migration's name for staging claims, spec.target.name for the DataVolumes)"
	advice := "delete them, or " + others
	if c.cluster.TakenMigrated {
		advice = "some were made by a migration and may hold migrated data: " + others
	}
	c.add(blocking(ReasonChildNameTaken, fmt.Sprintf(
		"%s already exist in this namespace and do not belong to this migration, which would create them: %s",
		strings.Join(c.cluster.TakenNames, ", "), advice)))
}

// targetName blocks when the target VM's name is taken. It never advises
// deleting the VM there: it may hold migrated data (a migration made it)
// or be someone's own.
func (c *checker) targetName() {
	if !c.cluster.TargetNameTaken {
		return
	}
	vm := fmt.Sprintf("a VirtualMachine named %q already exists in this namespace and does not belong to this migration", c.cluster.TargetName)
	if by := c.cluster.TargetMadeBy; by != "" {
		vm = fmt.Sprintf("a VirtualMachine named %q already exists in this namespace, made by migration %s: it holds migrated data", c.cluster.TargetName, by)
	}
	c.add(blocking(ReasonTargetNameTaken, vm+": set spec.target.name to a free name"))
}
