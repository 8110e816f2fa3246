package v1alpha1

import (
	"fmt"

	"platform.example/vm-migration/pkg/untrusted"
)

// Bounds, in bytes, of the strings status keeps of what the controller's
// sources said: vSphere (the source VM's inventory, its tasks), the guest
// (VMware Tools' report, virt-v2v's inspection, the guest agent through
// KubeVirt) and the cluster (CDI, KubeVirt, the kubelet, the API server,
// the Jobs' termination messages). Each is the maxLength of the fields
// it bounds in the schema (a test holds the two together), so that no
// source can push a status past what the API server stores. The schema
// counts characters, which are never more than bytes: a value Bound cut
// to its bytes passes.
const (
	// MaxSourceID bounds an identifier or an enumerated value vSphere
	// gives: a managed object reference, a UUID, a CBT change ID, a guest
	// OS id or family, a power or tools state, a disk or sharing mode, a
	// MAC address. vSphere's own are under 64 bytes.
	MaxSourceID = 128
	// MaxSourceName bounds a name vSphere gives: the VM's, its
	// datacenter's, host's, datastores', networks' and snapshots'.
	// vSphere takes names of up to 80 characters, and writes '%', '/'
	// and '\' in them as %25, %2f and %5c: at most 320 bytes of UTF-8
	// (a host's DNS name, at most 253).
	MaxSourceName = 512
	// MaxDeviceLabel bounds a device label vSphere gives ("Hard disk 12",
	// "Network adapter 10").
	MaxDeviceLabel = 128
	// MaxInventoryPath bounds the VM's inventory path: its datacenter and
	// folders, each a name (two dozen levels of 80 ASCII characters).
	MaxInventoryPath = 2048
	// MaxDatastorePath bounds a disk's backing file, "[datastore]
	// dir/vm.vmdk": a datastore's name (at most 42 characters) and the
	// folder and file vSphere names after the VM (at most 80 characters
	// each, and a suffix), with room for folders of one's own.
	MaxDatastorePath = 1024
	// MaxDatastoreURL bounds a datastore's URL
	// ("ds:///vmfs/volumes/<uuid>/", "ds:///vmfs/volumes/vsan:<uuid>/":
	// under 80 bytes).
	MaxDatastoreURL = 256
	// MaxGuestOSName bounds a guest OS's full name: the one the VM is
	// configured with, the one VMware Tools report from the running guest
	// ("Microsoft Windows Server 2022 (64-bit)"), the product virt-v2v
	// inspected ("rhel 9.4"). Both of the last come from inside the guest.
	MaxGuestOSName = 256
	// MaxWord bounds a word another component reports: a reason
	// (ErrImagePull), a phase (ImportInProgress, Running), a progress
	// ("45.20%").
	MaxWord = 128
	// MaxMessage bounds a message for a person that quotes what the
	// sources said: status.lastError.message, a preflight finding's, a
	// checkpoint's evidence, why a restore was abandoned. vSphere's faults
	// have no bound; the kubelet bounds a termination message at 4096
	// bytes and the controller quotes at most 1024 of it.
	MaxMessage = 4096
	// MaxShortMessage bounds a short message: why a disk was copied whole,
	// why a NIC was not pinned, a guest network value refused.
	MaxShortMessage = 256
	// MaxGuestReported bounds what the guest agent reports of one of the
	// target VM's interfaces, through KubeVirt: its name in the guest, its
	// MAC address, an address as reported, where the data came from.
	MaxGuestReported = 256
	// MaxConversionWarning bounds one of virt-v2v's warnings.
	MaxConversionWarning = 512
	// MaxPodMessage bounds why a pod has not started, in the kubelet's,
	// the scheduler's or the admission's words.
	MaxPodMessage = 1024
	// MaxClusterMessage bounds the API server's answer to a dry run, and
	// why an image's proof pod failed.
	MaxClusterMessage = 2048
	// MaxProofOutput bounds what an image's self-check printed.
	MaxProofOutput = 4096
	// MaxSHA256 bounds a checksum a Job reported: a SHA-256 in hex.
	MaxSHA256 = 64
	// MaxConditionMessage is metav1.Condition's own bound of its message.
	MaxConditionMessage = 32768
	// MaxObjectName bounds the name or namespace of an object the
	// cluster holds (a DNS-1123 subdomain at most).
	MaxObjectName = 253
)

// Bounds of the lists a source VM fills; the inventory refuses a VM
// with more disks or NICs (it must not migrate part of one), and keeps
// the first MaxSnapshots snapshot names.
const (
	// MaxDisks bounds a VM's disks: ESXi 8 takes 4 PVSCSI controllers of
	// 64 targets each, 256 disks. A VM with more (NVMe and SATA disks
	// beside all of those) is refused.
	MaxDisks = 256
	// MaxNICs bounds a VM's network adapters: ESXi takes 10 per VM.
	MaxNICs = 16
	// MaxSnapshots bounds the snapshot names kept: vSphere takes 32
	// snapshots in a chain, and a tree of them branches. Past it, the
	// last name kept says how many more there are.
	MaxSnapshots = 64
)

// Bound cuts every string of st that holds what a source said to its
// bound, marking the cut (untrusted.Cut): the inventory, the messages
// and the reasons, phases, checksums and guest reports of the disks,
// the conversion and the target. It changes nothing within its bounds,
// and a bound status again not at all.
func (st *VirtualMachineMigrationStatus) Bound() {
	st.Source.Bound()
	for i := range st.Conditions {
		cut(&st.Conditions[i].Message, MaxConditionMessage)
	}
	for i := range st.Preflight {
		cut(&st.Preflight[i].Message, MaxMessage)
	}
	st.SourceControl.bound()
	for i := range st.Disks {
		st.Disks[i].bound()
	}
	st.Conversion.bound()
	st.Target.bound()
	st.AlreadyMigrated.bound()
	for i := range st.Evidence {
		cut(&st.Evidence[i].Observed, MaxMessage)
	}
	if e := st.LastError; e != nil {
		cut(&e.Reason, MaxWord)
		cut(&e.Message, MaxMessage)
	}
	if w := st.PodWaiting; w != nil {
		cut(&w.Reason, MaxWord)
		cut(&w.Message, MaxPodMessage)
	}
	if d := st.DryRun; d != nil {
		for i := range d.Objects {
			cut(&d.Objects[i].Message, MaxClusterMessage)
		}
	}
	for i := range st.ImageProofs {
		p := &st.ImageProofs[i]
		cut(&p.Reason, MaxWord)
		cut(&p.Message, MaxClusterMessage)
		cut(&p.Output, MaxProofOutput)
	}
}

// Bound cuts every string of the inventory to its bound, marking the
// cut, and keeps the first MaxSnapshots snapshot names (the last of them
// replaced by how many more there are). It leaves the disks and NICs
// whole: see CheckCounts.
func (inv *SourceInventory) Bound() {
	if inv == nil {
		return
	}
	for _, f := range []struct {
		s   *string
		max int
	}{
		{&inv.Name, MaxSourceName}, {&inv.MoRef, MaxSourceID}, {&inv.InventoryPath, MaxInventoryPath},
		{&inv.BIOSUUID, MaxSourceID}, {&inv.InstanceUUID, MaxSourceID}, {&inv.Server, MaxSourceID},
		{&inv.Datacenter, MaxSourceName}, {&inv.Host, MaxSourceName}, {&inv.HostMoRef, MaxSourceID},
		{&inv.HostUUID, MaxSourceID}, {&inv.GuestID, MaxSourceID}, {&inv.GuestFamily, MaxSourceID},
		{&inv.GuestFullName, MaxGuestOSName}, {&inv.DetectedGuestID, MaxSourceID},
		{&inv.DetectedGuestFullName, MaxGuestOSName}, {&inv.ToolsRunningStatus, MaxSourceID},
		{&inv.PowerState, MaxSourceID},
	} {
		cut(f.s, f.max)
	}
	if n := len(inv.Snapshots); n > MaxSnapshots {
		inv.Snapshots = append(inv.Snapshots[:MaxSnapshots-1:MaxSnapshots-1],
			fmt.Sprintf("%s and %d more", untrusted.CutMarker, n-MaxSnapshots+1))
	}
	for i := range inv.Snapshots {
		cut(&inv.Snapshots[i], MaxSourceName)
	}
	for i := range inv.GuestNetworkRejected {
		cut(&inv.GuestNetworkRejected[i], MaxShortMessage)
	}
	for i := range inv.Disks {
		inv.Disks[i].bound()
	}
	for i := range inv.NICs {
		inv.NICs[i].bound()
	}
}

// CountError says a VM has more disks or NICs than status keeps.
// +k8s:deepcopy-gen=false
type CountError struct {
	// What is counted: "disks" or "NICs".
	What string
	// Count is how many the VM has.
	Count int
	// Max is how many status keeps.
	Max int
}

// Error says how many the VM has, and how many a migration takes.
func (e *CountError) Error() string {
	return fmt.Sprintf("the VM has %d %s, more than the %d a migration takes", e.Count, e.What, e.Max)
}

// CheckCounts refuses an inventory with more disks than MaxDisks or more
// NICs than MaxNICs (a *CountError): status cannot keep them, and a
// migration of part of a VM's disks or NICs is not one.
func (inv *SourceInventory) CheckCounts() error {
	switch {
	case len(inv.Disks) > MaxDisks:
		return &CountError{What: "disks", Count: len(inv.Disks), Max: MaxDisks}
	case len(inv.NICs) > MaxNICs:
		return &CountError{What: "NICs", Count: len(inv.NICs), Max: MaxNICs}
	}
	return nil
}

func (d *SourceDisk) bound() {
	cut(&d.Label, MaxDeviceLabel)
	cut(&d.FileName, MaxDatastorePath)
	cut(&d.Datastore, MaxSourceName)
	cut(&d.DatastoreURL, MaxDatastoreURL)
	for _, s := range []*string{&d.Provisioning, &d.ControllerType, &d.ControllerModel, &d.DiskMode, &d.Sharing, &d.ChangeID} {
		cut(s, MaxSourceID)
	}
}

func (n *SourceNIC) bound() {
	cut(&n.Label, MaxDeviceLabel)
	cut(&n.MAC, MaxSourceID)
	cut(&n.Network, MaxSourceName)
	cut(&n.AdapterType, MaxSourceID)
}

func (sc *SourceControlStatus) bound() {
	if sc == nil {
		return
	}
	cut(&sc.OriginalPowerState, MaxSourceID)
	cut(&sc.PowerOffTask, MaxSourceID)
	cut(&sc.RestoreAbandonedReason, MaxMessage)
	for i := range sc.Snapshots {
		cut(&sc.Snapshots[i].MoRef, MaxSourceID)
	}
}

func (d *DiskStatus) bound() {
	cut(&d.SHA256, MaxSHA256)
	cut(&d.FullCopyReason, MaxShortMessage)
	cut(&d.ImportPhase, MaxWord)
	cut(&d.ImportProgress, MaxWord)
	if c := d.Checksums; c != nil {
		cut(&c.Converted, MaxSHA256)
		cut(&c.Target, MaxSHA256)
	}
}

func (c *ConversionStatus) bound() {
	if c == nil {
		return
	}
	cut(&c.OperatingSystem, MaxGuestOSName)
	for i := range c.Warnings {
		cut(&c.Warnings[i], MaxConversionWarning)
	}
	for i := range c.Interfaces {
		cut(&c.Interfaces[i].Source, MaxWord)
		cut(&c.Interfaces[i].Message, MaxShortMessage)
	}
}

func (t *TargetStatus) bound() {
	if t == nil {
		return
	}
	cut(&t.VMIPhase, MaxWord)
	for i := range t.Interfaces {
		in := &t.Interfaces[i]
		for _, s := range []*string{&in.Name, &in.MAC, &in.InterfaceName, &in.InfoSource} {
			cut(s, MaxGuestReported)
		}
		for j := range in.IPAddresses {
			cut(&in.IPAddresses[j], MaxGuestReported)
		}
	}
}

// cut cuts *s to max bytes, marking the cut.
func cut(s *string, max int) { *s = untrusted.Cut(*s, max) }

// bound cuts what a found VirtualMachine's metadata said of it.
func (c *MigratedCopy) bound() {
	if c == nil {
		return
	}
	cut(&c.Namespace, MaxObjectName)
	cut(&c.Name, MaxObjectName)
	cut(&c.MigratedBy, MaxShortMessage)
	cut(&c.Outcome, MaxWord)
	cut(&c.Identity, MaxShortMessage)
}
