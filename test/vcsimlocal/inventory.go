package vcsimlocal

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"platform.example/vm-migration/pkg/blocktree"
)

// MiB is a mebibyte.
const MiB = int64(1) << 20

// VMSpec describes a VM to create.
type VMSpec struct {
	// Name of the VM; also its directory on each datastore it uses. Names
	// are unique in a Server, across datacenters.
	Name string
	// Datacenter the VM is created in; empty means Datacenter. Start
	// creates Options.Datacenters of them: DC0, DC1...
	Datacenter string
	// Host is the standalone ESXi host the VM runs on, one of the
	// datacenter's (DC0_H0, DC0_H1... with Options.Hosts); empty means its
	// first, DCn_H0.
	Host string
	// Folder is a path under the datacenter's VM folder ("prod/web"),
	// created where missing; empty means the VM folder itself.
	Folder string
	// Datastore holds the VM's configuration, and its disks unless they
	// name another; empty means Datastore. Start creates
	// Options.Datastores of them in each datacenter: LocalDS_0, LocalDS_1...
	Datastore string
	// Sockets and CoresPerSocket make the vCPUs.
	Sockets, CoresPerSocket int32
	// MemoryMiB of the VM.
	MemoryMiB int64
	// Firmware is "efi" or "bios".
	Firmware string
	// SecureBoot turns EFI secure boot on.
	SecureBoot bool
	// Disks in order; each gets its own unit on one paravirtual SCSI controller.
	Disks []DiskSpec
	// NICs in order.
	NICs []NICSpec
	// PoweredOn leaves the VM running once created.
	PoweredOn bool
	// ChangeTracking turns changed-block tracking on: the VM's disks get
	// change IDs and QueryChangedDiskAreas answers for them (cbt.go).
	ChangeTracking bool
}

// DiskSpec is a disk of a VM and the content it holds.
type DiskSpec struct {
	// SizeBytes is the capacity, a positive multiple of 512 bytes (a
	// sector), as any real disk.
	SizeBytes int64
	// Datastore holds the disk; empty means the VM's. The VM's directory is
	// created there when missing.
	Datastore string
	// Seed makes the content (DiskBytes).
	Seed uint64
	// Image, when set, is a raw image file served as the disk's flat
	// extent instead of DiskBytes (see ImageDisk).
	Image string
	// Empty leaves the disk without content: no descriptor and no flat
	// extent are uploaded, so a disk of any capacity costs nothing. Its
	// bytes cannot be read (for control-plane benchmarks, where no
	// transfer reads them).
	Empty bool
	// AllocatedPercent, from 1 to 100, makes the disk thin: data in
	// scattered runs over about that share of it (ThinRuns), holes
	// elsewhere, its flat extent a sparse file. 0 fills the whole disk
	// (DiskBytes).
	AllocatedPercent int
}

// NICSpec is a network adapter.
type NICSpec struct {
	// Network is NetworkVM or NetworkDVPG.
	Network string
	// MAC is a manual MAC address, "00:50:56:..".
	MAC string
	// PCISlot is the NIC's PCI slot number (its slotInfo), as a real host
	// assigns them (192, 224, 256...: a Linux guest names the NIC
	// ens<slot>); 0 leaves it unset, as plain vcsim does.
	PCISlot int32
	// Guest is what VMware Tools reports of the NIC once the VM runs
	// (SetGuestNetwork); nil reports no address, as plain vcsim does.
	Guest *GuestNIC
}

// VM is a created VM.
type VM struct {
	// Name and MoRef of the VM.
	Name, MoRef string
	// Datacenter the VM is in, and its InventoryPath
	// ("/DC0/vm/prod/web-01").
	Datacenter, InventoryPath string
	// Disks in order.
	Disks []Disk
	// MACs of the NICs, in order.
	MACs []string
	// Spec it was created from.
	Spec VMSpec
}

// Disk is a created disk.
type Disk struct {
	// Key is the device key.
	Key int32
	// FileName is the descriptor's datastore path, "[LocalDS_0] vm/vm.vmdk".
	FileName string
	// Datastore holds the disk.
	Datastore string
	// SizeBytes is the capacity.
	SizeBytes int64
	// SHA256 is the root of the block tree of the disk's bytes (package
	// blocktree: the checksum the transfer reports), hex; empty for an
	// empty disk.
	SHA256 string
}

// SampleVM is the sample inventory's VM: 2 sockets of 2 cores, 2 GiB,
// EFI with secure boot, three disks (8, 6 and 4 MiB of random data with
// runs of zeros) and two NICs, one on each network.
func SampleVM(name string, seed uint64) VMSpec {
	return VMSpec{
		Name: name, Sockets: 2, CoresPerSocket: 2, MemoryMiB: 2048,
		Firmware: "efi", SecureBoot: true,
		Disks: []DiskSpec{{SizeBytes: 8 * MiB, Seed: seed}, {SizeBytes: 6 * MiB, Seed: seed + 1}, {SizeBytes: 4 * MiB, Seed: seed + 2}},
		NICs: []NICSpec{
			{Network: NetworkVM, MAC: macFor(seed, 1)},
			{Network: NetworkDVPG, MAC: macFor(seed, 2)},
		},
		PoweredOn: true,
	}
}

// macFor is a MAC address in VMware's manual range, made from seed and n.
func macFor(seed uint64, n int) string {
	v := (seed*31 + uint64(n)) & 0x3fffff
	return fmt.Sprintf("00:50:56:%02x:%02x:%02x", byte(v>>16)&0x3f, byte(v>>8), byte(v))
}

// DiskBytes is the content of a disk: pseudo-random bytes from seed with
// runs of zeros (a whole zero MiB, zero blocks inside data, a zero tail),
// so that sparse handling is exercised. Runs beyond a small disk's end are
// left out; size is at least 0.
func DiskBytes(size int64, seed uint64) []byte {
	b := make([]byte, max(size, 0))
	diskContent(seed).fill(b, 0, size)
	return b
}

// WriteDiskImage writes into file the bytes DiskBytes(size, seed) holds,
// a MiB at a time, so that a disk of any size can be served (ImageDisk)
// without being held in memory: vcsim-local --disk-gib.
func WriteDiskImage(file string, size int64, seed uint64) error {
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("creating the disk image: %w", err)
	}
	c, buf := diskContent(seed), make([]byte, MiB)
	for off := int64(0); off < size && err == nil; off += MiB {
		b := buf[:min(MiB, size-off)]
		c.fill(b, off, size)
		_, err = f.Write(b)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing the disk image %s: %w", file, err)
	}
	return nil
}

// diskGenerator makes a disk's content in order, a piece at a time.
type diskGenerator struct{ r *rand.Rand }

// diskContent is the generator of the content of a disk of seed.
func diskContent(seed uint64) diskGenerator {
	return diskGenerator{rand.New(rand.NewPCG(seed, seed^0x5bd1e9955bd1e995))}
}

// fill writes into b the disk's bytes from off on (off a multiple of 8,
// the pieces asked in order), of a disk of size bytes.
func (g diskGenerator) fill(b []byte, off, size int64) {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], g.r.Uint64())
	}
	if i < len(b) {
		v := g.r.Uint64()
		for j := 0; i+j < len(b); j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	end := off + int64(len(b))
	zero := func(from, to int64) {
		from, to = min(max(from, 0, off), size, end), min(max(to, 0), size, end)
		if from < to {
			clear(b[from-off : to-off])
		}
	}
	zero(MiB, 2*MiB)                  // a whole zero chunk
	zero(2*MiB+64<<10, 2*MiB+320<<10) // zero blocks inside data
	zero(size-MiB/2, size)            // a zero tail (all of a disk under 512 KiB)
	zero(2*MiB+1000, 2*MiB+1100)      // a short run that stays data
}

// SectorSize is the unit of a disk's capacity.
const SectorSize = 512

// AddVM creates a VM with its disks laid out as descriptor plus flat
// extent, filled with DiskBytes, in its datacenter, folder and datastores,
// and powers it on when asked.
func (s *Server) AddVM(ctx context.Context, spec VMSpec) (*VM, error) {
	if err := s.checkSpec(&spec); err != nil {
		return nil, err
	}
	at, err := s.place(ctx, &spec)
	if err != nil {
		return nil, err
	}
	cfg, fileNames, err := s.configSpec(ctx, at, spec)
	if err != nil {
		return nil, err
	}
	task, err := at.folder.CreateVM(ctx, cfg, at.pool, at.host)
	if err != nil {
		return nil, fmt.Errorf("creating VM %s: %w", spec.Name, err)
	}
	info, err := task.WaitForResult(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("creating VM %s: %w", spec.Name, err)
	}
	vm := object.NewVirtualMachine(s.client.Client, info.Result.(types.ManagedObjectReference))
	out := &VM{Name: spec.Name, MoRef: vm.Reference().Value, Spec: spec, Datacenter: spec.Datacenter,
		InventoryPath: path.Join(at.folder.InventoryPath, spec.Name)}
	if out.Disks, err = s.fillDisks(ctx, at, vm, spec, fileNames); err != nil {
		return nil, err
	}
	if err := s.cbt.RefreshUsage(vm.Reference()); err != nil {
		return nil, fmt.Errorf("VM %s: %w", spec.Name, err)
	}
	if spec.ChangeTracking {
		if err := s.cbt.Enable(vm.Reference(), true); err != nil {
			return nil, fmt.Errorf("VM %s: %w", spec.Name, err)
		}
	}
	for _, n := range spec.NICs {
		out.MACs = append(out.MACs, n.MAC)
	}
	if spec.PoweredOn {
		task, err := vm.PowerOn(ctx)
		if err != nil {
			return nil, fmt.Errorf("powering on %s: %w", spec.Name, err)
		}
		if err := task.Wait(ctx); err != nil {
			return nil, fmt.Errorf("powering on %s: %w", spec.Name, err)
		}
	}
	s.mu.Lock()
	s.vms[spec.Name] = out
	s.mu.Unlock()
	if err := s.reportGuestNetwork(ctx, spec); err != nil {
		return nil, err
	}
	return out, nil
}

// reportGuestNetwork has a running VM whose NICs carry guest data report
// it (SetGuestNetwork).
func (s *Server) reportGuestNetwork(ctx context.Context, spec VMSpec) error {
	var nics []*GuestNIC
	for _, n := range spec.NICs {
		nics = append(nics, n.Guest)
	}
	if !spec.PoweredOn || slices.IndexFunc(nics, func(g *GuestNIC) bool { return g != nil }) < 0 {
		return nil
	}
	return s.SetGuestNetwork(ctx, spec.Name, nics)
}

// checkSpec fills a spec's defaults and refuses what no real inventory has.
func (s *Server) checkSpec(spec *VMSpec) error {
	if spec.Name == "" || len(spec.Disks) == 0 {
		return fmt.Errorf("a VM needs a name and at least one disk")
	}
	spec.Datacenter = orDefault(spec.Datacenter, Datacenter)
	spec.Datastore = orDefault(spec.Datastore, Datastore)
	for i, d := range spec.Disks {
		if d.SizeBytes <= 0 || d.SizeBytes%SectorSize != 0 {
			return fmt.Errorf("disk %d of %s: %d bytes is not a positive multiple of %d", i, spec.Name, d.SizeBytes, SectorSize)
		}
		if d.AllocatedPercent < 0 || d.AllocatedPercent > 100 || (d.AllocatedPercent > 0 && (d.Image != "" || d.Empty)) {
			return fmt.Errorf("disk %d of %s: allocated percent %d must be 0 to 100, and 0 with an image or an empty disk", i, spec.Name, d.AllocatedPercent)
		}
		spec.Disks[i].Datastore = orDefault(d.Datastore, spec.Datastore)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, taken := s.vms[spec.Name]; taken {
		return fmt.Errorf("a VM named %s exists already", spec.Name)
	}
	return nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// placement is where a VM goes.
type placement struct {
	dc     *object.Datacenter
	finder *find.Finder
	folder *object.Folder
	host   *object.HostSystem
	pool   *object.ResourcePool
}

// place finds the VM's datacenter, standalone host and its pool, and
// creates its folder where missing.
func (s *Server) place(ctx context.Context, spec *VMSpec) (*placement, error) {
	f, dc, err := s.finderIn(ctx, spec.Datacenter)
	if err != nil {
		return nil, err
	}
	at := &placement{dc: dc, finder: f}
	hostName := orDefault(spec.Host, spec.Datacenter+"_H0")
	if at.host, err = f.HostSystem(ctx, hostName); err != nil {
		return nil, fmt.Errorf("finding host %s: %w", hostName, err)
	}
	if at.pool, err = at.host.ResourcePool(ctx); err != nil {
		return nil, fmt.Errorf("finding the resource pool of %s: %w", hostName, err)
	}
	folders, err := dc.Folders(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the folders of %s: %w", spec.Datacenter, err)
	}
	at.folder = folders.VmFolder
	for _, name := range strings.FieldsFunc(spec.Folder, func(r rune) bool { return r == '/' }) {
		if at.folder, err = s.subFolder(ctx, f, at.folder, name); err != nil {
			return nil, err
		}
	}
	return at, nil
}

// subFolder is the folder name under parent, created when missing.
func (s *Server) subFolder(ctx context.Context, f *find.Finder, parent *object.Folder, name string) (*object.Folder, error) {
	p := path.Join(parent.InventoryPath, name)
	if found, err := f.Folder(ctx, p); err == nil {
		return found, nil
	}
	child, err := parent.CreateFolder(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("creating folder %s: %w", p, err)
	}
	child.InventoryPath = p
	return child, nil
}

// configSpec is the VM's configuration: one paravirtual SCSI controller
// with the disks, each on its datastore in a directory of the VM's name
// (created there when missing), and the NICs.
func (s *Server) configSpec(ctx context.Context, at *placement, spec VMSpec) (types.VirtualMachineConfigSpec, []string, error) {
	var devices object.VirtualDeviceList
	ctrl, err := devices.CreateSCSIController("pvscsi")
	if err != nil {
		return types.VirtualMachineConfigSpec{}, nil, err
	}
	devices = append(devices, ctrl)
	changes := []types.BaseVirtualDeviceConfigSpec{&types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationAdd, Device: ctrl}}
	fileNames := make([]string, len(spec.Disks))
	for i, d := range spec.Disks {
		ds, err := at.finder.Datastore(ctx, d.Datastore)
		if err != nil {
			return types.VirtualMachineConfigSpec{}, nil, fmt.Errorf("finding datastore %s: %w", d.Datastore, err)
		}
		if d.Datastore != spec.Datastore {
			if err := s.makeDirectory(ctx, at.dc, d.Datastore, spec.Name); err != nil {
				return types.VirtualMachineConfigSpec{}, nil, err
			}
		}
		fileNames[i] = fmt.Sprintf("[%s] %s/%s", d.Datastore, spec.Name, diskBase(spec.Name, i)+".vmdk")
		disk := devices.CreateDisk(ctrl.(types.BaseVirtualController), ds.Reference(), fileNames[i])
		disk.CapacityInKB = d.SizeBytes / 1024
		disk.CapacityInBytes = d.SizeBytes
		devices = append(devices, disk)
		changes = append(changes, &types.VirtualDeviceConfigSpec{
			Operation: types.VirtualDeviceConfigSpecOperationAdd, FileOperation: types.VirtualDeviceConfigSpecFileOperationCreate, Device: disk})
	}
	nics, err := s.nicChanges(ctx, at.finder, &devices, spec.NICs)
	if err != nil {
		return types.VirtualMachineConfigSpec{}, nil, err
	}
	cfg := types.VirtualMachineConfigSpec{
		Name:              spec.Name,
		GuestId:           "rhel9_64Guest",
		NumCPUs:           spec.Sockets * spec.CoresPerSocket,
		NumCoresPerSocket: &spec.CoresPerSocket,
		MemoryMB:          spec.MemoryMiB,
		Firmware:          spec.Firmware,
		Files:             &types.VirtualMachineFileInfo{VmPathName: fmt.Sprintf("[%s] %s", spec.Datastore, spec.Name)},
		DeviceChange:      append(changes, nics...),
	}
	if spec.Firmware == "efi" {
		secure := spec.SecureBoot
		cfg.BootOptions = &types.VirtualMachineBootOptions{EfiSecureBootEnabled: &secure}
	}
	return cfg, fileNames, nil
}

// makeDirectory creates a directory on a datastore, as a VM's files need
// one on every datastore they live on; one that exists is fine.
func (s *Server) makeDirectory(ctx context.Context, dc *object.Datacenter, datastore, dir string) error {
	name := fmt.Sprintf("[%s] %s", datastore, dir)
	err := object.NewFileManager(s.client.Client).MakeDirectory(ctx, name, dc, true)
	if err != nil && !fault.Is(err, &types.FileAlreadyExists{}) {
		return fmt.Errorf("creating directory %s: %w", name, err)
	}
	return nil
}

// nicChanges adds one vmxnet3 NIC per spec, with its manual MAC.
func (s *Server) nicChanges(ctx context.Context, f *find.Finder, devices *object.VirtualDeviceList, nics []NICSpec) ([]types.BaseVirtualDeviceConfigSpec, error) {
	var changes []types.BaseVirtualDeviceConfigSpec
	for i, n := range nics {
		ref, err := f.Network(ctx, n.Network)
		if err != nil {
			return nil, fmt.Errorf("finding network %s: %w", n.Network, err)
		}
		backing, err := ref.EthernetCardBackingInfo(ctx)
		if err != nil {
			return nil, fmt.Errorf("network %s: %w", n.Network, err)
		}
		nic, err := devices.CreateEthernetCard("vmxnet3", backing)
		if err != nil {
			return nil, err
		}
		card := nic.(types.BaseVirtualEthernetCard).GetVirtualEthernetCard()
		card.AddressType = string(types.VirtualEthernetCardMacTypeManual)
		card.MacAddress = n.MAC
		card.Key = -200 - int32(i)
		if n.PCISlot > 0 {
			card.SlotInfo = &types.VirtualDevicePciBusSlotInfo{PciSlotNumber: n.PCISlot}
		}
		*devices = append(*devices, nic)
		changes = append(changes, &types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationAdd, Device: nic})
	}
	return changes, nil
}

// fillDisks finds each created disk's key and uploads its descriptor and
// flat extent to its datastore.
func (s *Server) fillDisks(ctx context.Context, at *placement, vm *object.VirtualMachine, spec VMSpec, fileNames []string) ([]Disk, error) {
	created, err := vm.Device(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the devices of %s: %w", spec.Name, err)
	}
	var out []Disk
	for i, d := range spec.Disks {
		var key int32
		for _, dev := range created.SelectByType((*types.VirtualDisk)(nil)) {
			if b, ok := dev.GetVirtualDevice().Backing.(*types.VirtualDiskFlatVer2BackingInfo); ok && b.FileName == fileNames[i] {
				key = dev.GetVirtualDevice().Key
			}
		}
		if key == 0 {
			return nil, fmt.Errorf("VM %s: disk %s not found after creation", spec.Name, fileNames[i])
		}
		if d.Empty {
			out = append(out, Disk{Key: key, FileName: fileNames[i], Datastore: d.Datastore, SizeBytes: d.SizeBytes})
			continue
		}
		ds, err := at.finder.Datastore(ctx, d.Datastore)
		if err != nil {
			return nil, fmt.Errorf("finding datastore %s: %w", d.Datastore, err)
		}
		if d.Image != "" || d.AllocatedPercent > 0 {
			place := s.placeImage
			if d.Image == "" {
				place = s.placeThin
			}
			sum, err := place(ctx, ds, spec.Name, i, d)
			if err != nil {
				return nil, err
			}
			out = append(out, Disk{Key: key, FileName: fileNames[i], Datastore: d.Datastore, SizeBytes: d.SizeBytes, SHA256: sum})
			continue
		}
		data := DiskBytes(d.SizeBytes, d.Seed)
		base := path.Join(spec.Name, diskBase(spec.Name, i))
		if err := upload(ctx, ds, base+".vmdk", []byte(FlatDescriptor(diskBase(spec.Name, i), d.SizeBytes))); err != nil {
			return nil, err
		}
		if err := upload(ctx, ds, base+"-flat.vmdk", data); err != nil {
			return nil, err
		}
		tree, _, err := blocktree.Compute(ctx, bytes.NewReader(data), int64(len(data)), blocktree.Options{})
		if err != nil {
			return nil, fmt.Errorf("hashing disk %d of VM %s: %w", i, spec.Name, err)
		}
		out = append(out, Disk{Key: key, FileName: fileNames[i], Datastore: d.Datastore, SizeBytes: d.SizeBytes, SHA256: tree.Root()})
	}
	return out, nil
}

// VMs are the VMs AddVM created.
func (s *Server) VMs() []*VM {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*VM, 0, len(s.vms))
	for _, v := range s.vms {
		out = append(out, v)
	}
	return out
}

// diskBase is the base name of a VM's i-th disk, as ESXi names them:
// vm, vm_1, vm_2...
func diskBase(vm string, i int) string {
	if i == 0 {
		return vm
	}
	return fmt.Sprintf("%s_%d", vm, i)
}

func upload(ctx context.Context, ds *object.Datastore, name string, data []byte) error {
	p := soap.DefaultUpload
	p.ContentLength = int64(len(data))
	if err := ds.Upload(ctx, bytes.NewReader(data), name, &p); err != nil {
		return fmt.Errorf("uploading %s: %w", name, err)
	}
	return nil
}

// FlatDescriptor is the text descriptor of a flat disk of size bytes whose
// extent is "<base>-flat.vmdk", as ESXi writes it.
func FlatDescriptor(base string, size int64) string {
	return fmt.Sprintf(`# Disk DescriptorFile
version=1
encoding="UTF-8"
CID=fffffffe
parentCID=ffffffff
createType="vmfs"

# Extent description
RW %d VMFS "%s-flat.vmdk"

# The Disk Data Base
#DDB

ddb.adapterType = "pvscsi"
ddb.thinProvisioned = "1"
ddb.virtualHWVersion = "19"
`, size/512, base)
}

// SmallVM is a small BIOS VM: 2 vCPUs, 512 MiB, one disk of 4 MiB of real
// bytes and one NIC on NetworkVM, for tests that run many migrations.
func SmallVM(name string, seed uint64) VMSpec {
	return VMSpec{
		Name: name, Sockets: 2, CoresPerSocket: 1, MemoryMiB: 512, Firmware: "bios",
		Disks:     []DiskSpec{{SizeBytes: 4 * MiB, Seed: seed}},
		NICs:      []NICSpec{{Network: NetworkVM, MAC: macFor(seed, 1)}},
		PoweredOn: true,
	}
}

// EmptyVM is a VM for control-plane benchmarks: 1 vCPU, 512 MiB, BIOS,
// one disk of 1 GiB without content (DiskSpec.Empty) and one NIC on
// NetworkVM, powered on, on the named host (empty: the datacenter's first).
func EmptyVM(name, host string, seed uint64) VMSpec {
	return VMSpec{
		Name: name, Host: host, Sockets: 1, CoresPerSocket: 1, MemoryMiB: 512, Firmware: "bios",
		Disks:     []DiskSpec{{SizeBytes: 1 << 30, Seed: seed, Empty: true}},
		NICs:      []NICSpec{{Network: NetworkVM, MAC: macFor(seed, 1)}},
		PoweredOn: true,
	}
}
