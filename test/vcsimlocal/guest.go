package vcsimlocal

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// Power operations a VM with a simulated guest records (PowerOp.Op).
const (
	// OpShutdownGuest: a client asked the guest to shut down.
	OpShutdownGuest = "ShutdownGuest"
	// OpPowerOff: a client powered the VM off.
	OpPowerOff = "PowerOff"
	// OpPowerOn: a client powered the VM on.
	OpPowerOn = "PowerOn"
	// OpGuestOff: the guest finished shutting down and powers the VM off.
	OpGuestOff = "GuestOff"
)

// PowerOp is one power operation a VM with a simulated guest received from
// a client, or the end of its guest's shutdown.
type PowerOp struct {
	// Op is one of the Op constants.
	Op string
	// At is when the VM received it.
	At time.Time
	// State is the VM's power state when it received it (OpGuestOff: the
	// state the guest left, poweredOn).
	State string
}

// GuestOptions shape a VM's simulated guest.
type GuestOptions struct {
	// ShutdownTakes is how long the guest takes to shut down once asked
	// (ShutdownGuest): the VM stays poweredOn meanwhile and then powers
	// off, as a real guest's OS does. Zero powers it off at once, as plain
	// vcsim does.
	ShutdownTakes time.Duration
}

// guestVM is a simulated VM with a guest: the simulator's VM, registered
// in its place, with the power methods overridden (vcsim dispatches to the
// object registered under the VM's reference).
type guestVM struct {
	*simulator.VirtualMachine

	srv  *Server
	ctx  context.Context
	opts GuestOptions
	// own is the session key of the server's own client: its calls are
	// the guest's, not a client's.
	own string

	mu   sync.Mutex
	ops  []PowerOp
	boot int // power-ons so far: a shutdown asked before one is void
}

// SimulateGuest gives a VM made by AddVM a guest that runs VMware Tools,
// so that clients may ask it to shut down, and that takes
// opts.ShutdownTakes to do so; the VM then records every power operation
// it receives (PowerOps). The guest lives until ctx ends; tools are
// reported running whatever the power state.
func (s *Server) SimulateGuest(ctx context.Context, name string, opts GuestOptions) error {
	vm, err := s.vm(ctx, name)
	if err != nil {
		return err
	}
	var sm mo.SessionManager
	if err := s.client.RetrieveOne(ctx, s.sessionManager, []string{"currentSession"}, &sm); err != nil {
		return fmt.Errorf("reading the simulator's own session: %w", err)
	}
	if sm.CurrentSession == nil {
		return fmt.Errorf("the simulator's own client has no session")
	}
	reg := s.model.Map()
	obj, ok := reg.Get(vm.Reference()).(*simulator.VirtualMachine)
	if !ok {
		return fmt.Errorf("VM %s already has a simulated guest", name)
	}
	sctx := &simulator.Context{Context: ctx, Map: reg}
	sctx.WithLock(obj, func() {
		sctx.Update(obj, []types.PropertyChange{
			{Name: "guest.toolsStatus", Val: types.VirtualMachineToolsStatusToolsOk},
			{Name: "guest.toolsRunningStatus", Val: string(types.VirtualMachineToolsRunningStatusGuestToolsRunning)},
		})
	})
	reg.Put(&guestVM{VirtualMachine: obj, srv: s, ctx: ctx, opts: opts, own: sm.CurrentSession.Key})
	return nil
}

// PowerOps lists the power operations a VM with a simulated guest
// received, in order; nil for a VM without one.
func (s *Server) PowerOps(name string) []PowerOp {
	s.mu.Lock()
	v := s.vms[name]
	s.mu.Unlock()
	if v == nil {
		return nil
	}
	g, ok := s.model.Map().Get(types.ManagedObjectReference{Type: "VirtualMachine", Value: v.MoRef}).(*guestVM)
	if !ok {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.ops)
}

// record appends an operation; it returns the boot it happened in.
func (g *guestVM) record(op string, state types.VirtualMachinePowerState) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ops = append(g.ops, PowerOp{Op: op, At: time.Now(), State: string(state)})
	if op == OpPowerOn {
		g.boot++
	}
	return g.boot
}

// fromClient reports whether a call came from a client rather than from
// the simulated guest (the server's own session).
func (g *guestVM) fromClient(ctx *simulator.Context) bool {
	return ctx.Session == nil || ctx.Session.Key != g.own
}

// ShutdownGuest overrides the simulator's: the guest starts shutting down
// and the VM powers off once it is done, unless it was powered off and on
// again meanwhile.
func (g *guestVM) ShutdownGuest(ctx *simulator.Context, req *types.ShutdownGuest) soap.HasFault {
	state := g.Runtime.PowerState
	if state != types.VirtualMachinePowerStatePoweredOn {
		// The simulator's answer: InvalidPowerState.
		return g.VirtualMachine.ShutdownGuest(ctx, req)
	}
	boot := g.record(OpShutdownGuest, state)
	go g.shutDown(boot)
	return &methods.ShutdownGuestBody{Res: new(types.ShutdownGuestResponse)}
}

// PowerOnVMTask overrides the simulator's to record the call.
func (g *guestVM) PowerOnVMTask(ctx *simulator.Context, req *types.PowerOnVM_Task) soap.HasFault {
	if g.fromClient(ctx) {
		g.record(OpPowerOn, g.Runtime.PowerState)
	}
	return g.VirtualMachine.PowerOnVMTask(ctx, req)
}

// PowerOffVMTask overrides the simulator's to record the call: a
// client's, or the guest's own at the end of its shutdown.
func (g *guestVM) PowerOffVMTask(ctx *simulator.Context, req *types.PowerOffVM_Task) soap.HasFault {
	op := OpGuestOff
	if g.fromClient(ctx) {
		op = OpPowerOff
	}
	g.record(op, g.Runtime.PowerState)
	return g.VirtualMachine.PowerOffVMTask(ctx, req)
}

// shutDown is the guest shutting down: after ShutdownTakes it powers the
// VM off through the server's own session, if the VM still runs the boot
// the shutdown was asked in.
func (g *guestVM) shutDown(boot int) {
	select {
	case <-g.ctx.Done():
		return
	case <-time.After(g.opts.ShutdownTakes):
	}
	g.mu.Lock()
	void := g.boot != boot
	g.mu.Unlock()
	if void {
		return
	}
	vm := object.NewVirtualMachine(g.srv.client.Client, g.Self)
	if st, err := vm.PowerState(g.ctx); err != nil || st != types.VirtualMachinePowerStatePoweredOn {
		return
	}
	// Recorded as OpGuestOff when the call arrives; it fails harmlessly
	// if a client powered the VM off in between.
	if task, err := vm.PowerOff(g.ctx); err == nil {
		_ = task.Wait(g.ctx)
	}
}
