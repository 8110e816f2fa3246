package vsphere

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// simVM is what the simulator holds about one VM, read independently of
// the code under test.
type simVM struct {
	ref          types.ManagedObjectReference
	name, path   string
	biosUUID     string
	instanceUUID string
}

func firstVM(t *testing.T, s *Session) simVM {
	t.Helper()
	ctx := testCtx(t)
	dc, err := s.Datacenter(ctx)
	require.NoError(t, err)
	finder := find.NewFinder(s.Client(), true).SetDatacenter(dc)
	vms, err := finder.VirtualMachineList(ctx, "*")
	require.NoError(t, err)
	require.NotEmpty(t, vms)
	return readSimVM(t, s, vms[0])
}

func readSimVM(t *testing.T, s *Session, vm *object.VirtualMachine) simVM {
	t.Helper()
	ctx := testCtx(t)
	var m mo.VirtualMachine
	require.NoError(t, property.DefaultCollector(s.Client()).RetrieveOne(ctx, vm.Reference(), []string{"name", "config"}, &m))
	p, err := find.InventoryPath(ctx, s.Client(), vm.Reference())
	require.NoError(t, err)
	return simVM{ref: vm.Reference(), name: m.Name, path: p, biosUUID: m.Config.Uuid, instanceUUID: m.Config.InstanceUuid}
}

func TestFindVM(t *testing.T) {
	for _, kind := range bothModels {
		t.Run(string(kind), func(t *testing.T) {
			env := newSim(t, kind, nil)
			s := env.connect(t)
			ctx := testCtx(t)
			want := firstVM(t, s)
			upperNoDash := strings.ToUpper(strings.ReplaceAll(want.biosUUID, "-", ""))

			found := map[string]v1alpha1.VMSelector{
				"name":                        {Name: want.name},
				"inventory path":              {InventoryPath: want.path},
				"bios uuid":                   {BIOSUUID: want.biosUUID},
				"bios uuid uppercase no dash": {BIOSUUID: upperNoDash},
				"instance uuid":               {InstanceUUID: want.instanceUUID},
				"moRef as given":              {MoRef: want.ref.Value},
				"moRef in the other spelling": {MoRef: otherMoRefSpelling(want.ref.Value)},
			}
			for name, sel := range found {
				t.Run(name, func(t *testing.T) {
					vm, err := FindVM(ctx, s, sel)
					require.NoError(t, err)
					assert.Equal(t, want.ref, vm.Reference())
				})
			}

			missing := map[string]v1alpha1.VMSelector{
				"name":           {Name: "no-such-vm"},
				"inventory path": {InventoryPath: "/nowhere/vm/no-such-vm"},
				"bios uuid":      {BIOSUUID: "00000000-0000-0000-0000-000000000001"},
				"instance uuid":  {InstanceUUID: "00000000-0000-0000-0000-000000000002"},
				"moRef":          {MoRef: "vm-999999"},
			}
			for name, sel := range missing {
				t.Run("missing "+name, func(t *testing.T) {
					_, err := FindVM(ctx, s, sel)
					require.Error(t, err)
					var nf *NotFoundError
					assert.True(t, errors.As(err, &nf), "%v", err)
					assert.Equal(t, ClassNotFound, Classify(err))
				})
			}

			bad := map[string]v1alpha1.VMSelector{
				"empty selector":   {},
				"two fields":       {Name: want.name, MoRef: want.ref.Value},
				"bad uuid":         {BIOSUUID: "not-a-uuid"},
				"bad moRef":        {MoRef: "host-1"},
				"relative path":    {InventoryPath: "vm/x"},
				"path to a folder": {InventoryPath: strings.TrimSuffix(want.path, "/"+want.name)},
			}
			for name, sel := range bad {
				t.Run("invalid "+name, func(t *testing.T) {
					_, err := FindVM(ctx, s, sel)
					require.Error(t, err)
					assert.Equal(t, ClassPermanent, Classify(err), "%v", err)
				})
			}
		})
	}
}

func otherMoRefSpelling(v string) string {
	if strings.HasPrefix(v, "vm-") {
		return strings.TrimPrefix(v, "vm-")
	}
	return "vm-" + v
}

func TestFindVMAmbiguousName(t *testing.T) {
	env := newSim(t, vpx, nil)
	s := env.connect(t)
	ctx := testCtx(t)
	dc, err := s.Datacenter(ctx)
	require.NoError(t, err)
	folders, err := dc.Folders(ctx)
	require.NoError(t, err)
	a, err := folders.VmFolder.CreateFolder(ctx, "team-a")
	require.NoError(t, err)
	b, err := folders.VmFolder.CreateFolder(ctx, "team-b")
	require.NoError(t, err)
	createVMIn(t, s, a, "web-01")
	second := createVMIn(t, s, b, "web-01")

	_, err = FindVM(ctx, s, v1alpha1.VMSelector{Name: "web-01"})
	require.Error(t, err)
	var amb *AmbiguousError
	require.True(t, errors.As(err, &amb), "%v", err)
	assert.Equal(t, []string{"/DC0/vm/team-a/web-01", "/DC0/vm/team-b/web-01"}, amb.Candidates)
	assert.Contains(t, err.Error(), "/DC0/vm/team-a/web-01, /DC0/vm/team-b/web-01")
	assert.Equal(t, ClassPermanent, Classify(err))

	// The inventory path picks one of them.
	vm, err := FindVM(ctx, s, v1alpha1.VMSelector{InventoryPath: "/DC0/vm/team-b/web-01"})
	require.NoError(t, err)
	assert.Equal(t, second.Reference(), vm.Reference())
}
