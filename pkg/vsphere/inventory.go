package vsphere

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// Provisioning values of v1alpha1.SourceDisk.
const (
	// ProvisioningThin is a thin-provisioned (or sparse) disk.
	ProvisioningThin = "Thin"
	// ProvisioningThick is a lazy-zeroed thick disk.
	ProvisioningThick = "Thick"
	// ProvisioningEagerZeroedThick is an eager-zeroed thick disk.
	ProvisioningEagerZeroedThick = "EagerZeroedThick"
)

// Controller types of v1alpha1.SourceDisk, in the order disks are sorted.
const (
	// ControllerIDE is an IDE controller.
	ControllerIDE = "ide"
	// ControllerSCSI is a SCSI controller (pvscsi, lsilogic, ...).
	ControllerSCSI = "scsi"
	// ControllerSATA is a SATA (AHCI) controller.
	ControllerSATA = "sata"
	// ControllerNVMe is an NVMe controller.
	ControllerNVMe = "nvme"
)

var controllerRank = map[string]int{ControllerIDE: 0, ControllerSCSI: 1, ControllerSATA: 2, ControllerNVMe: 3}

// vmProperties are the VM properties the inventory reads, in one call.
var vmProperties = []string{
	"name", "parent", "parentVApp",
	"config.uuid", "config.instanceUuid", "config.hardware", "config.firmware", "config.bootOptions",
	"config.guestId", "config.guestFullName", "config.changeTrackingEnabled", "config.keyId",
	"guest.guestFamily", "guest.toolsRunningStatus", "guest.guestId", "guest.guestFullName",
	"runtime.powerState", "runtime.host",
	"snapshot", "datastore", "network",
}

// Inventory reads what the migration needs to know about a VM into a
// SourceInventory, in as few round trips as the property collector allows:
// one RetrieveProperties for the VM, its ancestors (inventory path and
// datacenter), its datastores and its networks (names, port group keys),
// and a second one for its host's name and hardware UUID. InventoriedAt is left for the
// caller to stamp with its clock. Every string is cut to its bound
// (SourceInventory.Bound); a VM with more disks or NICs than status keeps
// is refused (a *v1alpha1.CountError).
func Inventory(ctx context.Context, s *Session, vm *object.VirtualMachine) (*v1alpha1.SourceInventory, error) {
	c := s.Client()
	ref := vm.Reference()
	req := inventoryRequest(c.ServiceContent.PropertyCollector, ref)
	var objs []any
	if err := mo.RetrievePropertiesForRequest(ctx, c, req, &objs); err != nil {
		return nil, fmt.Errorf("reading inventory of virtual machine %s: %w", ref.Value, err)
	}
	r := newInventoryResult(ref, objs)
	if r.vm == nil {
		return nil, fmt.Errorf("reading inventory of virtual machine %s: %w", ref.Value,
			&NotFoundError{Kind: kindVM, Key: "moRef " + ref.Value})
	}
	inv := r.inventory(c.ServiceContent.About.InstanceUuid)

	if h := r.vm.Runtime.Host; h != nil {
		inv.HostMoRef = h.Value
		var host mo.HostSystem
		if err := property.DefaultCollector(c).RetrieveOne(ctx, *h, []string{"name", "summary.hardware.uuid"}, &host); err != nil {
			return nil, fmt.Errorf("reading the name and UUID of host %s of virtual machine %s: %w", h.Value, ref.Value, err)
		}
		inv.Host = host.Name
		if hw := host.Summary.Hardware; hw != nil {
			inv.HostUUID = hw.Uuid
		}
	}
	// What vSphere and VMware Tools say has no bound of its own: status
	// keeps it cut, and so does everything that reads it before.
	if err := inv.CheckCounts(); err != nil {
		return nil, fmt.Errorf("reading inventory of virtual machine %s: %w", ref.Value, err)
	}
	inv.Bound()
	return inv, nil
}

func inventoryRequest(pc types.ManagedObjectReference, vm types.ManagedObjectReference) types.RetrieveProperties {
	parent := "parent"
	toParent := []types.BaseSelectionSpec{&types.SelectionSpec{Name: parent}}
	return types.RetrieveProperties{
		This: pc,
		SpecSet: []types.PropertyFilterSpec{{
			ObjectSet: []types.ObjectSpec{{
				Obj:  vm,
				Skip: types.NewBool(false),
				SelectSet: []types.BaseSelectionSpec{
					&types.TraversalSpec{SelectionSpec: types.SelectionSpec{Name: parent}, Type: "ManagedEntity", Path: "parent", Skip: types.NewBool(false), SelectSet: toParent},
					&types.TraversalSpec{Type: "VirtualMachine", Path: "parentVApp", Skip: types.NewBool(false), SelectSet: []types.BaseSelectionSpec{
						&types.SelectionSpec{Name: parent}, &types.SelectionSpec{Name: "vappFolder"},
					}},
					&types.TraversalSpec{SelectionSpec: types.SelectionSpec{Name: "vappFolder"}, Type: "VirtualApp", Path: "parentFolder", Skip: types.NewBool(false), SelectSet: toParent},
					&types.TraversalSpec{Type: "VirtualMachine", Path: "datastore", Skip: types.NewBool(false)},
					&types.TraversalSpec{Type: "VirtualMachine", Path: "network", Skip: types.NewBool(false)},
				},
			}},
			PropSet: []types.PropertySpec{
				{Type: "VirtualMachine", PathSet: append(slices.Clone(vmProperties), guestNetProperties...)},
				{Type: "Folder", PathSet: []string{"name", "parent"}},
				{Type: "Datacenter", PathSet: []string{"name", "parent"}},
				{Type: "VirtualApp", PathSet: []string{"name", "parent", "parentFolder"}},
				{Type: "ResourcePool", PathSet: []string{"name", "parent"}},
				{Type: "Datastore", PathSet: []string{"name", "summary.url"}},
				{Type: "Network", PathSet: []string{"name"}},
				{Type: "DistributedVirtualPortgroup", PathSet: []string{"name", "key"}},
				{Type: "OpaqueNetwork", PathSet: []string{"name", "summary"}},
			},
		}},
	}
}

// inventoryResult indexes the objects of the inventory call.
type inventoryResult struct {
	vm          *mo.VirtualMachine
	entities    map[types.ManagedObjectReference]mo.ManagedEntity
	datacenter  string
	datastores  map[string]string // moRef value -> name
	dsURLs      map[string]string // moRef value -> summary.url
	networks    map[string]string // moRef value -> name
	portgroups  map[string]string // port group key -> name
	opaqueNets  map[string]string // opaque network id -> name
	vappFolders map[types.ManagedObjectReference]types.ManagedObjectReference
}

func newInventoryResult(vmRef types.ManagedObjectReference, objs []any) *inventoryResult {
	r := &inventoryResult{
		entities:    map[types.ManagedObjectReference]mo.ManagedEntity{},
		datastores:  map[string]string{},
		dsURLs:      map[string]string{},
		networks:    map[string]string{},
		portgroups:  map[string]string{},
		opaqueNets:  map[string]string{},
		vappFolders: map[types.ManagedObjectReference]types.ManagedObjectReference{},
	}
	for _, o := range objs {
		switch x := o.(type) {
		case mo.VirtualMachine:
			if x.Self == vmRef {
				vm := x
				r.vm = &vm
				r.entities[x.Self] = x.ManagedEntity
			}
		case mo.Folder:
			r.entities[x.Self] = x.ManagedEntity
		case mo.Datacenter:
			r.entities[x.Self] = x.ManagedEntity
		case mo.VirtualApp:
			r.entities[x.Self] = x.ManagedEntity
			if x.ParentFolder != nil {
				r.vappFolders[x.Self] = *x.ParentFolder
			}
		case mo.ResourcePool:
			r.entities[x.Self] = x.ManagedEntity
		case mo.Datastore:
			r.datastores[x.Self.Value] = x.Name
			r.dsURLs[x.Self.Value] = x.Summary.Url
		case mo.DistributedVirtualPortgroup:
			r.networks[x.Self.Value] = x.Name
			r.portgroups[x.Key] = x.Name
		case mo.OpaqueNetwork:
			r.networks[x.Self.Value] = x.Name
			if sum, ok := x.Summary.(*types.OpaqueNetworkSummary); ok {
				r.opaqueNets[sum.OpaqueNetworkId] = x.Name
			}
		case mo.Network:
			r.networks[x.Self.Value] = x.Name
		}
	}
	return r
}

// inventoryPath walks the VM's parents up to the root folder, which is not
// part of a path. A VM in a vApp is placed in the vApp's folder.
func (r *inventoryResult) inventoryPath() string {
	var names []string
	cur := r.vm.Self
	parentOf := func(e mo.ManagedEntity) *types.ManagedObjectReference {
		if e.Self == r.vm.Self && e.Parent == nil {
			return r.vm.ParentVApp
		}
		if f, ok := r.vappFolders[e.Self]; ok {
			return &f
		}
		return e.Parent
	}
	for i := 0; i < 64; i++ { // bounded: a malformed tree must not loop
		e, ok := r.entities[cur]
		if !ok {
			break
		}
		p := parentOf(e)
		if p == nil {
			break // the root folder
		}
		names = append(names, e.Name)
		if e.Self.Type == "Datacenter" && r.datacenter == "" {
			r.datacenter = e.Name
		}
		cur = *p
	}
	for i, j := 0, len(names)-1; i < j; i, j = i+1, j-1 {
		names[i], names[j] = names[j], names[i]
	}
	return "/" + strings.Join(names, "/")
}

func (r *inventoryResult) inventory(serverUUID string) *v1alpha1.SourceInventory {
	vm := r.vm
	inv := &v1alpha1.SourceInventory{
		Name:          vm.Name,
		MoRef:         vm.Self.Value,
		InventoryPath: r.inventoryPath(),
		Server:        serverUUID,
		Datacenter:    r.datacenter,
		PowerState:    string(vm.Runtime.PowerState),
		Firmware:      v1alpha1.FirmwareBIOS,
		Snapshots:     SnapshotNames(vm.Snapshot),
	}
	if cfg := vm.Config; cfg != nil {
		inv.BIOSUUID = cfg.Uuid
		inv.InstanceUUID = cfg.InstanceUuid
		inv.GuestID = cfg.GuestId
		inv.GuestFullName = cfg.GuestFullName
		inv.CBTEnabled = cfg.ChangeTrackingEnabled != nil && *cfg.ChangeTrackingEnabled
		inv.Encrypted = cfg.KeyId != nil && cfg.KeyId.KeyId != ""
		if strings.EqualFold(cfg.Firmware, string(types.GuestOsDescriptorFirmwareTypeEfi)) {
			inv.Firmware = v1alpha1.FirmwareEFI
		}
		if b := cfg.BootOptions; b != nil && b.EfiSecureBootEnabled != nil {
			inv.SecureBoot = *b.EfiSecureBootEnabled
		}
		hw := cfg.Hardware
		cores := int32(1)
		if hw.NumCoresPerSocket != nil {
			cores = *hw.NumCoresPerSocket
		}
		if cores <= 0 {
			cores = 1
		}
		sockets := hw.NumCPU / cores
		if sockets <= 0 {
			sockets = 1
		}
		inv.CPU = v1alpha1.CPUTopology{Sockets: sockets, CoresPerSocket: cores}
		inv.MemoryMiB = int64(hw.MemoryMB)
		inv.Disks, inv.NICs, inv.VTPM = r.devices(hw.Device)
	}
	if g := vm.Guest; g != nil {
		inv.GuestFamily = g.GuestFamily
		inv.ToolsRunningStatus = g.ToolsRunningStatus
		// What VMware Tools report of the running guest, which may differ
		// from the guest OS the VM was configured with.
		inv.DetectedGuestID, inv.DetectedGuestFullName = g.GuestId, g.GuestFullName
	}
	inv.GuestNetworkRejected = addGuestNetwork(inv.NICs, vm.Guest)
	if inv.GuestFamily == "" {
		inv.GuestFamily = guestFamilyFromID(cmp.Or(inv.DetectedGuestID, inv.GuestID))
	}
	return inv
}

// guestFamilyFromID guesses the family from the configured guest id when
// the guest (VMware Tools) does not report it, as on a powered-off VM.
func guestFamilyFromID(id string) string {
	l := strings.ToLower(id)
	switch {
	case l == "":
		return ""
	case strings.HasPrefix(l, "win"):
		return string(types.VirtualMachineGuestOsFamilyWindowsGuest)
	case strings.HasPrefix(l, "darwin"):
		return string(types.VirtualMachineGuestOsFamilyDarwinGuestFamily)
	case strings.HasPrefix(l, "solaris"):
		return string(types.VirtualMachineGuestOsFamilySolarisGuest)
	case strings.HasPrefix(l, "netware"):
		return string(types.VirtualMachineGuestOsFamilyNetwareGuest)
	case strings.HasPrefix(l, "other") && !strings.Contains(l, "linux"),
		strings.HasPrefix(l, "freebsd"), strings.HasPrefix(l, "dos"), strings.HasPrefix(l, "os2"):
		return string(types.VirtualMachineGuestOsFamilyOtherGuestFamily)
	}
	return string(types.VirtualMachineGuestOsFamilyLinuxGuest)
}

// SnapshotNames lists the names in a VM's snapshot tree, parents first.
func SnapshotNames(info *types.VirtualMachineSnapshotInfo) []string {
	if info == nil {
		return nil
	}
	var names []string
	var walk func([]types.VirtualMachineSnapshotTree)
	walk = func(trees []types.VirtualMachineSnapshotTree) {
		for _, t := range trees {
			names = append(names, t.Name)
			walk(t.ChildSnapshotList)
		}
	}
	walk(info.RootSnapshotList)
	return names
}

// controllerInfo is the bus a disk hangs on.
type controllerInfo struct {
	kind, model string
	bus         int32
}

func describeController(d types.BaseVirtualDevice) (controllerInfo, bool) {
	bc, ok := d.(types.BaseVirtualController)
	if !ok {
		return controllerInfo{}, false
	}
	info := controllerInfo{bus: bc.GetVirtualController().BusNumber}
	switch d.(type) {
	case *types.ParaVirtualSCSIController:
		info.kind, info.model = ControllerSCSI, "pvscsi"
	case *types.VirtualLsiLogicController:
		info.kind, info.model = ControllerSCSI, "lsilogic"
	case *types.VirtualLsiLogicSASController:
		info.kind, info.model = ControllerSCSI, "lsilogic-sas"
	case *types.VirtualBusLogicController:
		info.kind, info.model = ControllerSCSI, "buslogic"
	case *types.VirtualAHCIController:
		info.kind, info.model = ControllerSATA, "ahci"
	case *types.VirtualNVMEController:
		info.kind, info.model = ControllerNVMe, "nvme"
	case *types.VirtualIDEController:
		info.kind, info.model = ControllerIDE, "ide"
	default:
		switch d.(type) {
		case types.BaseVirtualSCSIController:
			info.kind, info.model = ControllerSCSI, "scsi"
		case types.BaseVirtualSATAController:
			info.kind, info.model = ControllerSATA, "sata"
		default:
			return controllerInfo{}, false // USB, PCI, SIO...: not a disk bus
		}
	}
	return info, true
}

// devices turns the device list into disks (sorted by controller type,
// bus, unit) and NICs (sorted by key), and says whether a vTPM is present.
func (r *inventoryResult) devices(devs []types.BaseVirtualDevice) ([]v1alpha1.SourceDisk, []v1alpha1.SourceNIC, bool) {
	controllers := map[int32]controllerInfo{}
	for _, d := range devs {
		if info, ok := describeController(d); ok {
			controllers[d.GetVirtualDevice().Key] = info
		}
	}
	var (
		disks []v1alpha1.SourceDisk
		nics  []v1alpha1.SourceNIC
		vtpm  bool
	)
	for _, d := range devs {
		switch x := d.(type) {
		case *types.VirtualDisk:
			disks = append(disks, r.disk(x, controllers))
		case types.BaseVirtualEthernetCard:
			nics = append(nics, r.nic(x))
		case *types.VirtualTPM:
			vtpm = true
		}
	}
	sort.SliceStable(disks, func(i, j int) bool {
		a, b := disks[i], disks[j]
		if ra, rb := controllerRank[a.ControllerType], controllerRank[b.ControllerType]; ra != rb {
			return ra < rb
		}
		if a.BusNumber != b.BusNumber {
			return a.BusNumber < b.BusNumber
		}
		if a.UnitNumber != b.UnitNumber {
			return a.UnitNumber < b.UnitNumber
		}
		return a.Key < b.Key
	})
	sort.SliceStable(nics, func(i, j int) bool { return nics[i].Key < nics[j].Key })
	return disks, nics, vtpm
}

func (r *inventoryResult) disk(d *types.VirtualDisk, controllers map[int32]controllerInfo) v1alpha1.SourceDisk {
	out := v1alpha1.SourceDisk{
		Key:           d.Key,
		CapacityBytes: d.CapacityInBytes,
	}
	if out.CapacityBytes == 0 {
		out.CapacityBytes = d.CapacityInKB * 1024
	}
	if info := d.DeviceInfo; info != nil {
		out.Label = info.GetDescription().Label
	}
	if d.UnitNumber != nil {
		out.UnitNumber = *d.UnitNumber
	}
	if c, ok := controllers[d.ControllerKey]; ok {
		out.ControllerType, out.ControllerModel, out.BusNumber = c.kind, c.model, c.bus
	}

	file := diskBacking(d.Backing, &out)
	if file != nil {
		out.FileName = file.FileName
		if file.Datastore != nil {
			out.Datastore = r.datastores[file.Datastore.Value]
			out.DatastoreURL = r.dsURLs[file.Datastore.Value]
		}
	}
	if out.Datastore == "" {
		out.Datastore = datastoreFromPath(out.FileName)
	}
	return out
}

// diskBacking fills what a disk's backing says (mode, sharing, change ID,
// provisioning, RDM, snapshot delta) and returns its file backing, nil
// for a raw disk (whose descriptor is the file name).
func diskBacking(backing types.BaseVirtualDeviceBackingInfo, out *v1alpha1.SourceDisk) *types.VirtualDeviceFileBackingInfo {
	switch b := backing.(type) {
	case *types.VirtualDiskFlatVer2BackingInfo:
		out.DiskMode, out.Sharing, out.ChangeID = b.DiskMode, b.Sharing, b.ChangeId
		out.SnapshotDelta = b.Parent != nil
		switch {
		case b.ThinProvisioned != nil && *b.ThinProvisioned:
			out.Provisioning = ProvisioningThin
		case b.EagerlyScrub != nil && *b.EagerlyScrub:
			out.Provisioning = ProvisioningEagerZeroedThick
		default:
			out.Provisioning = ProvisioningThick
		}
		return &b.VirtualDeviceFileBackingInfo
	case *types.VirtualDiskSeSparseBackingInfo:
		out.DiskMode, out.ChangeID, out.Provisioning, out.SnapshotDelta = b.DiskMode, b.ChangeId, ProvisioningThin, b.Parent != nil
		return &b.VirtualDeviceFileBackingInfo
	case *types.VirtualDiskSparseVer2BackingInfo:
		out.DiskMode, out.ChangeID, out.Provisioning, out.SnapshotDelta = b.DiskMode, b.ChangeId, ProvisioningThin, b.Parent != nil
		return &b.VirtualDeviceFileBackingInfo
	case *types.VirtualDiskFlatVer1BackingInfo:
		out.DiskMode, out.Provisioning, out.SnapshotDelta = b.DiskMode, ProvisioningThick, b.Parent != nil
		return &b.VirtualDeviceFileBackingInfo
	case *types.VirtualDiskSparseVer1BackingInfo:
		out.DiskMode, out.Provisioning, out.SnapshotDelta = b.DiskMode, ProvisioningThin, b.Parent != nil
		return &b.VirtualDeviceFileBackingInfo
	case *types.VirtualDiskRawDiskMappingVer1BackingInfo:
		out.DiskMode, out.Sharing, out.ChangeID, out.RDM = b.DiskMode, b.Sharing, b.ChangeId, true
		out.SnapshotDelta = b.Parent != nil
		return &b.VirtualDeviceFileBackingInfo
	case *types.VirtualDiskRawDiskVer2BackingInfo:
		out.FileName, out.Sharing, out.ChangeID, out.RDM = b.DescriptorFileName, b.Sharing, b.ChangeId, true
	}
	return nil
}

// datastoreFromPath reads "ds" from "[ds] dir/file.vmdk".
func datastoreFromPath(p string) string {
	var dp object.DatastorePath
	if dp.FromString(p) {
		return dp.Datastore
	}
	return ""
}

func (r *inventoryResult) nic(card types.BaseVirtualEthernetCard) v1alpha1.SourceNIC {
	e := card.GetVirtualEthernetCard()
	out := v1alpha1.SourceNIC{Key: e.Key, MAC: e.MacAddress, AdapterType: adapterType(card), PCISlotNumber: pciSlot(e.SlotInfo)}
	if info := e.DeviceInfo; info != nil {
		out.Label = info.GetDescription().Label
	}
	switch b := e.Backing.(type) {
	case *types.VirtualEthernetCardNetworkBackingInfo:
		out.Network = b.DeviceName
		if b.Network != nil && r.networks[b.Network.Value] != "" {
			out.Network = r.networks[b.Network.Value]
		}
	case *types.VirtualEthernetCardDistributedVirtualPortBackingInfo:
		out.Network = r.portgroups[b.Port.PortgroupKey]
		if out.Network == "" {
			out.Network = b.Port.PortgroupKey
		}
	case *types.VirtualEthernetCardOpaqueNetworkBackingInfo:
		out.Network = r.opaqueNets[b.OpaqueNetworkId]
		if out.Network == "" {
			out.Network = b.OpaqueNetworkId
		}
	}
	return out
}

// adapterType names the virtual NIC model.
func adapterType(card types.BaseVirtualEthernetCard) string {
	switch card.(type) {
	case *types.VirtualVmxnet3Vrdma:
		return "vmxnet3vrdma"
	case *types.VirtualVmxnet3:
		return "vmxnet3"
	case *types.VirtualVmxnet2:
		return "vmxnet2"
	case *types.VirtualVmxnet:
		return "vmxnet"
	case *types.VirtualE1000e:
		return "e1000e"
	case *types.VirtualE1000:
		return "e1000"
	case *types.VirtualPCNet32:
		return "pcnet32"
	case *types.VirtualSriovEthernetCard:
		return "sriov"
	}
	return "unknown"
}
