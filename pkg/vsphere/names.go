package vsphere

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// VMNameListingTTL is how long a listing of the datacenter's VM names
// serves lookups by name. Finding one VM by name means listing every VM
// of the datacenter (vSphere has no server-side match on names), which
// made validating N migrations cost O(N) each against one vCenter
// (bench-scale). A name the listing holds once is confirmed by one read
// of that VM's name; a name it lacks, or holds more than once, is looked
// up again in a listing made after the lookup began, so a VM is never
// reported missing, nor ambiguous, from an old listing. Only a namesake
// created within the TTL can go unseen, as one created right after any
// listing would.
const VMNameListingTTL = 30 * time.Second

// vmNames is a session's last listing of its datacenter's VM names.
// Listings are numbered in the order they start; they run one at a time.
type vmNames struct {
	mu     sync.Mutex
	byName map[string][]types.ManagedObjectReference
	listed time.Time // when the last listing started
	last   int       // the number of the last listing
}

// cached returns the one VM the last listing, if younger than the TTL,
// holds under name (in either spelling), and the number of the last
// listing: a lookup trusts only later ones for an absence.
func (n *vmNames) cached(name string, now time.Time) (types.ManagedObjectReference, bool, int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.byName == nil || now.Sub(n.listed) > VMNameListingTTL {
		return types.ManagedObjectReference{}, false, n.last
	}
	refs := n.lookup(name)
	if len(refs) != 1 {
		return types.ManagedObjectReference{}, false, n.last
	}
	return refs[0], true, n.last
}

// lookup runs with the lock held.
func (n *vmNames) lookup(name string) []types.ManagedObjectReference {
	refs := slices.Clone(n.byName[name])
	if esc := escapeName(name); esc != name {
		refs = append(refs, n.byName[esc]...)
	}
	return refs
}

// listedAfter returns the VMs named name in a listing that started after
// listing number seen: the last one if it did, else a new one.
func (s *Session) listedAfter(ctx context.Context, name string, seen int) ([]types.ManagedObjectReference, error) {
	n := &s.names
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.last <= seen {
		started := s.now()
		byName, err := s.listVMNames(ctx)
		if err != nil {
			return nil, err
		}
		n.byName, n.listed = byName, started
		n.last++
	}
	return n.lookup(name), nil
}

// listVMNames lists the names of every VM of the session's datacenter.
func (s *Session) listVMNames(ctx context.Context) (map[string][]types.ManagedObjectReference, error) {
	dc, err := s.Datacenter(ctx)
	if err != nil {
		return nil, err
	}
	folders, err := dc.Folders(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading folders of datacenter %s: %w", dc.Name(), err)
	}
	v, err := view.NewManager(s.client).CreateContainerView(ctx, folders.VmFolder.Reference(), []string{"VirtualMachine"}, true)
	if err != nil {
		return nil, fmt.Errorf("creating a view of the virtual machines: %w", err)
	}
	defer func() { _ = v.Destroy(context.WithoutCancel(ctx)) }()
	var all []mo.VirtualMachine
	if err := v.Retrieve(ctx, []string{"VirtualMachine"}, []string{"name"}, &all); err != nil {
		return nil, fmt.Errorf("listing virtual machines: %w", err)
	}
	byName := make(map[string][]types.ManagedObjectReference, len(all))
	for _, m := range all {
		byName[m.Name] = append(byName[m.Name], m.Self)
	}
	return byName, nil
}

// stillNamed reports whether the VM still exists under name.
func (s *Session) stillNamed(ctx context.Context, ref types.ManagedObjectReference, name string) (bool, error) {
	var m mo.VirtualMachine
	err := property.DefaultCollector(s.client).RetrieveOne(ctx, ref, []string{"name"}, &m)
	switch {
	case Classify(err) == ClassNotFound:
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading the name of %s: %w", ref.Value, err)
	}
	return m.Name == name || m.Name == escapeName(name), nil
}
