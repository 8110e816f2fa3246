package vsphere

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

const kindVM = "virtual machine"

var (
	uuidPattern  = regexp.MustCompile(`^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$`)
	moRefPattern = regexp.MustCompile(`^(vm-)?[0-9]+$`)
)

// FindVM finds the one virtual machine the selector names, by exactly one
// of name, inventory path, BIOS UUID, instance UUID or managed object
// reference. A name or BIOS UUID that matches several VMs fails with an
// *AmbiguousError listing the candidates' inventory paths; nothing found
// fails with a *NotFoundError. The returned VM's InventoryPath is set when
// the lookup learned it.
func FindVM(ctx context.Context, s *Session, sel v1alpha1.VMSelector) (*object.VirtualMachine, error) {
	set := 0
	for _, v := range []string{sel.Name, sel.InventoryPath, sel.BIOSUUID, sel.InstanceUUID, sel.MoRef} {
		if v != "" {
			set++
		}
	}
	if set != 1 {
		return nil, fmt.Errorf("finding virtual machine: the selector must set exactly one of name, inventoryPath, biosUUID, instanceUUID or moRef, it sets %d", set)
	}
	var (
		vm  *object.VirtualMachine
		err error
	)
	switch {
	case sel.Name != "":
		vm, err = findVMByName(ctx, s, sel.Name)
	case sel.InventoryPath != "":
		vm, err = findVMByPath(ctx, s, sel.InventoryPath)
	case sel.BIOSUUID != "":
		vm, err = findVMByUUID(ctx, s, sel.BIOSUUID, false)
	case sel.InstanceUUID != "":
		vm, err = findVMByUUID(ctx, s, sel.InstanceUUID, true)
	default:
		vm, err = findVMByMoRef(ctx, s, sel.MoRef)
	}
	if err != nil {
		return nil, fmt.Errorf("finding virtual machine on %s: %w", s.url, err)
	}
	return vm, nil
}

// KnownVM is the virtual machine whose managed object reference value the
// server itself gave (an inventory read earlier), without a round trip to
// check that it still exists: the first call on it fails with a
// ManagedObjectNotFound fault (ClassNotFound) if the VM is gone since.
// A reference a person wrote goes through FindVM, which checks it and
// accepts both the vCenter and the ESXi spelling.
func KnownVM(s *Session, moRef string) *object.VirtualMachine {
	return object.NewVirtualMachine(s.Client(), types.ManagedObjectReference{Type: "VirtualMachine", Value: moRef})
}

func findVMByName(ctx context.Context, s *Session, name string) (*object.VirtualMachine, error) {
	c := s.Client()
	ref, ok, seen := s.names.cached(name, s.now())
	if ok {
		still, err := s.stillNamed(ctx, ref, name)
		if err != nil {
			return nil, err
		}
		if still {
			return object.NewVirtualMachine(c, ref), nil
		}
	}
	// Compare exactly (property.Match would treat * and ? as patterns).
	// vSphere escapes "/", "%" and "\" in names: both spellings match.
	vms, err := s.listedAfter(ctx, name, seen)
	if err != nil {
		return nil, err
	}
	switch len(vms) {
	case 0:
		dc, err := s.Datacenter(ctx)
		if err != nil {
			return nil, err
		}
		return nil, &NotFoundError{Kind: kindVM, Key: fmt.Sprintf("name %q in datacenter %s", name, dc.Name())}
	case 1:
		return object.NewVirtualMachine(c, vms[0]), nil
	}
	candidates := make([]string, 0, len(vms))
	for _, ref := range vms {
		p, err := find.InventoryPath(ctx, c, ref)
		if err != nil {
			p = ref.Value
		}
		candidates = append(candidates, p)
	}
	sort.Strings(candidates)
	return nil, &AmbiguousError{Kind: kindVM, Key: fmt.Sprintf("name %q", name), Candidates: candidates}
}

// escapeName spells a name the way the vSphere API stores it.
func escapeName(name string) string {
	r := strings.NewReplacer("%", "%25", "/", "%2f", `\`, "%5c")
	return r.Replace(name)
}

func findVMByPath(ctx context.Context, s *Session, path string) (*object.VirtualMachine, error) {
	if !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("inventory path %q must be absolute, for example /dc1/vm/web-01", path)
	}
	ref, err := object.NewSearchIndex(s.Client()).FindByInventoryPath(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("searching inventory path %q: %w", path, err)
	}
	if ref == nil {
		return nil, &NotFoundError{Kind: kindVM, Key: fmt.Sprintf("inventory path %q", path)}
	}
	if ref.Reference().Type != "VirtualMachine" {
		return nil, fmt.Errorf("inventory path %q names a %s, not a virtual machine", path, ref.Reference().Type)
	}
	vm := object.NewVirtualMachine(s.Client(), ref.Reference())
	vm.InventoryPath = path
	return vm, nil
}

// canonicalUUID writes a UUID the way vSphere stores it: lowercase, dashed.
func canonicalUUID(u string) (string, error) {
	if !uuidPattern.MatchString(u) {
		return "", fmt.Errorf("%q is not a UUID", u)
	}
	h := strings.ToLower(strings.ReplaceAll(u, "-", ""))
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32], nil
}

func findVMByUUID(ctx context.Context, s *Session, raw string, instance bool) (*object.VirtualMachine, error) {
	kind := "biosUUID"
	if instance {
		kind = "instanceUUID"
	}
	u, err := canonicalUUID(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", kind, err)
	}
	dc, err := s.Datacenter(ctx)
	if err != nil {
		return nil, err
	}
	// FindAllByUuid rather than FindByUuid: clones can share a BIOS UUID,
	// and FindByUuid answers nil, not a fault, for an unknown UUID.
	refs, err := object.NewSearchIndex(s.Client()).FindAllByUuid(ctx, dc, u, true, types.NewBool(instance))
	if err != nil {
		return nil, fmt.Errorf("searching %s %s: %w", kind, u, err)
	}
	key := fmt.Sprintf("%s %s", kind, u)
	switch len(refs) {
	case 0:
		return nil, &NotFoundError{Kind: kindVM, Key: key}
	case 1:
		if refs[0] == nil {
			return nil, &NotFoundError{Kind: kindVM, Key: key}
		}
		return object.NewVirtualMachine(s.Client(), refs[0].Reference()), nil
	}
	candidates := make([]string, 0, len(refs))
	for _, r := range refs {
		p, err := find.InventoryPath(ctx, s.Client(), r.Reference())
		if err != nil {
			p = r.Reference().Value
		}
		candidates = append(candidates, p)
	}
	sort.Strings(candidates)
	return nil, &AmbiguousError{Kind: kindVM, Key: key, Candidates: candidates}
}

func findVMByMoRef(ctx context.Context, s *Session, value string) (*object.VirtualMachine, error) {
	if !moRefPattern.MatchString(value) {
		return nil, fmt.Errorf("moRef %q must look like vm-42 (vCenter) or 42 (ESXi)", value)
	}
	// vCenter names VMs vm-N, a standalone ESXi host just N: try the
	// spelling the endpoint uses first, then the other one.
	bare := strings.TrimPrefix(value, "vm-")
	candidates := []string{"vm-" + bare, bare}
	if !s.IsVC() {
		candidates = []string{bare, "vm-" + bare}
	}
	pc := property.DefaultCollector(s.Client())
	var lastErr error
	for _, v := range candidates {
		ref := types.ManagedObjectReference{Type: "VirtualMachine", Value: v}
		var m mo.VirtualMachine
		err := pc.RetrieveOne(ctx, ref, []string{"name"}, &m)
		if err == nil {
			return object.NewVirtualMachine(s.Client(), ref), nil
		}
		if Classify(err) != ClassNotFound {
			return nil, fmt.Errorf("reading moRef %s: %w", v, err)
		}
		lastErr = err
	}
	return nil, errors.Join(&NotFoundError{Kind: kindVM, Key: fmt.Sprintf("moRef %q", value)}, lastErr)
}
