package pipeline

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/utils/ptr"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	cdiinformers "platform.example/vm-migration/pkg/generated/cdi/informers/externalversions"
	kvinformers "platform.example/vm-migration/pkg/generated/kubevirt/informers/externalversions"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/test/builders"
	"platform.example/vm-migration/test/fakes"
)

const gib = builders.GiB

// testConfig is the Step configuration of the golden files.
var testConfig = Config{
	TransferImage:   "registry.example/vm-migration-controller:v0.1.0",
	ConversionImage: "registry.example/virt-v2v:2.13",
}

// migration is a migration named name of the VM inv that reached
// Importing: inventoried, its disks and their DataVolumes named in status
// as the state machine names them, its target named, its spec applied.
// Modifiers run before the spec is applied.
func migration(name string, inv *v1alpha1.SourceInventory, mods ...builders.MigrationMod) *v1alpha1.VirtualMachineMigration {
	m := builders.Migration(append([]builders.MigrationMod{
		builders.Named(name), builders.WithUID("6a1f0c2e-3b4d-4e5f-8a9b-0c1d2e3f4a5b"),
		builders.Credentials("vcenter-credentials"), builders.SourceVM(inv.Name), builders.StagingClass("staging-fs"),
		builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
			s.Phase = v1alpha1.PhaseImporting
			s.Source = inv
			s.Target = &v1alpha1.TargetStatus{Name: naming.DNS1123Label(inv.Name)}
		}),
	}, mods...)...)
	m.Status.Disks = builders.Disks(name, inv)
	for i := range m.Status.Disks {
		m.Status.Disks[i].DataVolume = naming.DataVolume(m.Status.Target.Name, i)
	}
	if m.Status.AppliedSpec == nil {
		m.Status.AppliedSpec = m.Spec.DeepCopy()
	}
	return m
}

// linuxBIOS: a BIOS Linux VM with one disk and one NIC on the pod network,
// in PCI slot 192, whose guest reported a static-looking address (no
// origin, as open-vm-tools says) and a link-local one.
func linuxBIOS() *v1alpha1.VirtualMachineMigration {
	inv := builders.LinuxBIOSInventory()
	inv.NICs[0].PCISlotNumber = ptr.To[int32](192)
	inv.NICs[0].Guest = &v1alpha1.GuestNICInfo{
		IPAddresses: []v1alpha1.GuestIPAddress{{IP: "192.168.10.21", PrefixLength: 24}, {IP: "fe80::250:56ff:feaa:bb01", PrefixLength: 64}},
		Gateway:     "192.168.10.1", DNSServers: []string{"192.168.10.2"},
	}
	return migration("web-01-migration", inv,
		builders.Networks(builders.PodNetwork("VM Network")), builders.DefaultStorage("ceph-rbd"))
}

// windowsEFI: an EFI secure-boot Windows VM with three disks on two
// datastores and controllers, two NICs on two Multus networks, a custom
// conversion image, and a spec changed after the cutover (ignored).
func windowsEFI() *v1alpha1.VirtualMachineMigration {
	block := corev1.PersistentVolumeBlock
	fs := corev1.PersistentVolumeFilesystem
	inv := builders.WindowsEFIInventory()
	// Windows' tools say which addresses are static: two on the first
	// NIC (one IPv6), a DHCP lease on the second.
	inv.NICs[0].Guest = &v1alpha1.GuestNICInfo{
		IPAddresses: []v1alpha1.GuestIPAddress{
			{IP: "10.20.30.40", PrefixLength: 24, Origin: "manual"},
			{IP: "2001:db8::40", PrefixLength: 64, Origin: "manual"},
			{IP: "fe80::1c2d:3e4f:5a6b:7c8d", PrefixLength: 64, Origin: "linklayer"},
		},
		Gateway: "10.20.30.1", DNSServers: []string{"10.20.0.53", "10.20.1.53", "2001:db8::53"},
	}
	inv.NICs[1].Guest = &v1alpha1.GuestNICInfo{IPAddresses: []v1alpha1.GuestIPAddress{{IP: "172.16.4.9", PrefixLength: 16, Origin: "dhcp"}}}
	return migration("sql-02", inv, func(m *v1alpha1.VirtualMachineMigration) {
		m.Spec.Conversion.Image = "registry.example/virt-v2v-win:2.13"
		m.Spec.Staging.SizeOverheadPercent = ptr.To[int32](5)
		m.Spec.Target.Networks = []v1alpha1.NetworkMapping{
			builders.MultusNetwork("Prod-VLAN20", "net-system/vlan20"), builders.MultusNetwork("Backup", "backup"),
		}
		m.Spec.Target.Storage = v1alpha1.StorageMapping{
			Default:    &v1alpha1.StorageTarget{StorageClassName: "standard"},
			Datastores: []v1alpha1.DatastoreStorageMapping{{Datastore: "ds-bulk", Target: v1alpha1.StorageTarget{StorageClassName: "bulk-hdd", VolumeMode: &fs}}},
			Disks: []v1alpha1.DiskStorageMapping{{DiskKey: 2000, Target: v1alpha1.StorageTarget{
				StorageClassName: "fast-block", VolumeMode: &block, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}}}},
		}
		m.Status.AppliedSpec = m.Spec.DeepCopy()
		// Changed after the cutover: none of it may show.
		m.Spec.Conversion.Image = "registry.example/other:latest"
		m.Spec.Target.Storage.Default.StorageClassName = "changed-later"
		m.Spec.Staging.StorageClassName = "changed-later"
	})
}

// ignoredNIC: a VM with a NIC mapped to Ignore, MACs not preserved.
func ignoredNIC() *v1alpha1.VirtualMachineMigration {
	return migration("appliance", builders.ApplianceInventory(), builders.StagingClass(""), builders.TargetName("appliance"),
		builders.Networks(builders.IgnoredNetwork("Mgmt"), builders.PodNetwork("Service")),
		func(m *v1alpha1.VirtualMachineMigration) {
			m.Status.Target.Name = "appliance"
			m.Spec.Target.PreserveMACAddresses = ptr.To(false)
		})
}

// fakeStep is the step over a fake cluster holding objs, its caches
// mirrored from the cluster by sync.
type fakeStep struct {
	*fakes.Cluster
	step    *Step
	kubeInf kubeinformers.SharedInformerFactory
	kvInf   kvinformers.SharedInformerFactory
	cdiInf  cdiinformers.SharedInformerFactory
}

func newFakeStep(t *testing.T, objs ...runtime.Object) *fakeStep {
	t.Helper()
	c := fakes.NewCluster(t, objs...)
	f := &fakeStep{Cluster: c,
		kubeInf: kubeinformers.NewSharedInformerFactory(c.Kube, 0),
		kvInf:   kvinformers.NewSharedInformerFactory(c.KV, 0),
		cdiInf:  cdiinformers.NewSharedInformerFactory(c.CDI, 0)}
	f.step = &Step{Kube: c.Kube, KubeVirt: c.KV, CDI: c.CDI, Config: testConfig, Listers: ListersFrom(f.kubeInf, f.kvInf, f.cdiInf)}
	f.sync()
	return f
}

// sync mirrors the fake cluster into the step's caches.
func (f *fakeStep) sync() { f.Mirror(ChildInformers(f.kubeInf, f.kvInf, f.cdiInf)) }
