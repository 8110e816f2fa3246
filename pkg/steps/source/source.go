package source

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vmware/govmomi/object"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corelisters "k8s.io/client-go/listers/core/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/steps"
	"platform.example/vm-migration/pkg/vsphere"
)

// DefaultCallTimeout bounds each operation on the source, connection included.
const DefaultCallTimeout = 2 * time.Minute

// Observation and failure reasons of the source.
const (
	ReasonCredentialsSecretNotFound = "CredentialsSecretNotFound"
	ReasonCredentialsInvalid        = "CredentialsInvalid"
	// ReasonCredentialsEndpointNotAllowed: the credentials Secret does not
	// name the migration's endpoint (key endpoints): nothing was sent.
	ReasonCredentialsEndpointNotAllowed = "CredentialsEndpointNotAllowed"
	ReasonSourceVMNotFound              = "SourceVMNotFound"
	ReasonSourceAuthFailed              = "SourceAuthenticationFailed"
	ReasonSourcePermissionDenied        = "SourcePermissionDenied"
	ReasonSourceUnavailable             = "SourceUnavailable"
	ReasonSourceError                   = "SourceError"
)

// Step implements steps.SourceStep on vSphere.
type Step struct {
	// Secrets is the cache of the credentials Secrets: only those that opt
	// in with the label v1alpha1.LabelVSphereCredentials=true.
	Secrets corelisters.SecretLister
	// Sessions reuses vSphere sessions across reconciles.
	Sessions *vsphere.SessionCache
	// CallTimeout bounds each operation; zero means DefaultCallTimeout.
	CallTimeout time.Duration
}

var _ steps.SourceStep = (*Step)(nil)

func (s *Step) timeout() time.Duration {
	if s.CallTimeout > 0 {
		return s.CallTimeout
	}
	return DefaultCallTimeout
}

// connect reads the Secret, enters the endpoint's gate (the caller calls
// leave when done; it is a no-op on failure), gets a session and finds
// the VM. Once the VM was inventoried it is named by its managed object
// reference, so that a renamed or re-created namesake is never taken for
// it.
func (s *Step) connect(ctx context.Context, m *v1alpha1.VirtualMachineMigration) (*vsphere.Session, *object.VirtualMachine, func(), *statemachine.ObservedError) {
	leave := func() {}
	sess, vm, err := s.connectGated(ctx, m, &leave)
	return sess, vm, leave, err
}

func (s *Step) connectGated(ctx context.Context, m *v1alpha1.VirtualMachineMigration, leave *func()) (*vsphere.Session, *object.VirtualMachine, *statemachine.ObservedError) {
	spec := m.SpecInForce()
	ref := spec.Source.CredentialsSecretRef.Name
	secret, err := s.Secrets.Secrets(m.Namespace).Get(ref)
	switch {
	case apierrors.IsNotFound(err) && s.Sessions.Keeps(credentialsOwner(m)):
		// Gone with its namespace: the restore uses what was kept.
		return s.connectKept(ctx, m, leave)
	case apierrors.IsNotFound(err):
		return nil, nil, &statemachine.ObservedError{Class: statemachine.ErrorNeedsUser, Reason: ReasonCredentialsSecretNotFound,
			Message: fmt.Sprintf("no credentials Secret %q with the label %s=true in namespace %q: create it with the keys username, password and endpoints (the vCenter or ESXi hosts it may be sent to, e.g. vcenter.example.com:443; optionally ca.crt or thumbprint) and label it, which allows this controller to use it",
				ref, v1alpha1.LabelVSphereCredentials, m.Namespace)}
	case err != nil:
		return nil, nil, &statemachine.ObservedError{Class: statemachine.ErrorTransient, Reason: ReasonSourceUnavailable,
			Message: fmt.Sprintf("reading credentials Secret %q: %v", ref, err)}
	}
	if _, err := vsphere.CredentialsFromSecret(secret); err != nil {
		// The error names the Secret already.
		return nil, nil, &statemachine.ObservedError{Class: statemachine.ErrorNeedsUser, Reason: ReasonCredentialsInvalid,
			Message: err.Error()}
	}
	ep := vsphere.Endpoint{URL: spec.Source.URL, Datacenter: spec.Source.Datacenter, InsecureSkipVerify: spec.Source.InsecureSkipVerify}
	if err := vsphere.CheckSecretEndpoint(secret, ep.URL); err != nil {
		return nil, nil, classify(err)
	}
	gateLeave, err := s.Sessions.Enter(ep.URL)
	if err != nil {
		return nil, nil, classify(err)
	}
	*leave = gateLeave
	sess, err := s.Sessions.Get(ctx, ep, secret)
	if err != nil {
		return nil, nil, classify(err)
	}
	s.keep(m, ep, secret)
	return s.findVM(ctx, m, sess)
}

// findVM is m's source VM on sess.
func (s *Step) findVM(ctx context.Context, m *v1alpha1.VirtualMachineMigration, sess *vsphere.Session) (*vsphere.Session, *object.VirtualMachine, *statemachine.ObservedError) {
	if src := m.Status.Source; src != nil && src.MoRef != "" {
		// Inventoried: its reference is the server's own, and the call
		// made on it says if it is gone (bench-scale: checking it first
		// was a third of the vSphere calls of a migration).
		return sess, vsphere.KnownVM(sess, src.MoRef), nil
	}
	vm, err := vsphere.FindVM(ctx, sess, m.SpecInForce().Source.VM)
	if err != nil {
		return nil, nil, classify(err)
	}
	return sess, vm, nil
}

// classify maps a vSphere error onto the state machine's error classes.
func classify(err error) *statemachine.ObservedError {
	msg := err.Error()
	var busy *vsphere.EndpointBusyError
	var notAllowed *vsphere.EndpointNotAllowedError
	switch {
	case errors.As(err, &busy):
		return &statemachine.ObservedError{Class: statemachine.ErrorTransient, Reason: steps.ReasonEndpointBusy, Message: msg}
	case errors.As(err, &notAllowed):
		return &statemachine.ObservedError{Class: statemachine.ErrorNeedsUser, Reason: ReasonCredentialsEndpointNotAllowed, Message: msg}
	}
	switch vsphere.Classify(err) {
	case vsphere.ClassNotFound:
		return &statemachine.ObservedError{Class: statemachine.ErrorGone, Reason: ReasonSourceVMNotFound, Message: msg}
	case vsphere.ClassAuth:
		return &statemachine.ObservedError{Class: statemachine.ErrorNeedsUser, Reason: ReasonSourceAuthFailed,
			Message: msg + ": fix the username and password in the credentials Secret"}
	case vsphere.ClassPermission:
		return &statemachine.ObservedError{Class: statemachine.ErrorNeedsUser, Reason: ReasonSourcePermissionDenied,
			Message: msg + ": grant the vSphere user the missing privilege"}
	case vsphere.ClassTransient, vsphere.ClassInvalidState:
		return &statemachine.ObservedError{Class: statemachine.ErrorTransient, Reason: ReasonSourceUnavailable, Message: msg}
	default:
		return &statemachine.ObservedError{Class: statemachine.ErrorPermanent, Reason: ReasonSourceError, Message: msg}
	}
}

// Observe reads what the decision needs of the source VM.
func (s *Step) Observe(ctx context.Context, m *v1alpha1.VirtualMachineMigration, need statemachine.SourceNeed) statemachine.SourceObservation {
	ctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	sess, vm, leave, oerr := s.connect(ctx, m)
	defer leave()
	if oerr != nil {
		return statemachine.SourceObservation{Error: oerr}
	}
	obs := statemachine.SourceObservation{Observed: true}
	if need == statemachine.SourceNeedInventory {
		inv, err := vsphere.Inventory(ctx, sess, vm)
		if err != nil {
			return statemachine.SourceObservation{Error: classify(err)}
		}
		obs.Inventory = inv
		obs.Snapshots = inv.Snapshots
	}
	power, err := vsphere.ObservePower(ctx, vm)
	if err != nil {
		return statemachine.SourceObservation{Error: classify(err)}
	}
	obs.PowerState, obs.ToolsRunning = string(power.State), power.ToolsRunning
	if statemachine.WatchesPowerOffTasks(m) {
		tasks, err := vsphere.PowerOffTasks(ctx, vm, m.Status.SourceControl.PowerOffTask)
		if err != nil {
			return statemachine.SourceObservation{Error: classify(err)}
		}
		obs.PowerOffTasks = observeTasks(tasks)
	}
	if need == statemachine.SourceNeedState && m.Status.SourceControl != nil {
		for _, snap := range m.Status.SourceControl.Snapshots {
			_, err := vsphere.FindSnapshot(ctx, vm, snap.Name)
			var nf *vsphere.NotFoundError
			switch {
			case err == nil:
				obs.Snapshots = append(obs.Snapshots, snap.Name)
			case !errors.As(err, &nf):
				return statemachine.SourceObservation{Error: classify(err)}
			}
		}
	}
	return obs
}

// observeTasks is what the state machine sees of vSphere tasks: their
// state and, for a failed one, its failure classified.
func observeTasks(tasks []vsphere.TaskState) []statemachine.TaskObservation {
	out := make([]statemachine.TaskObservation, 0, len(tasks))
	for _, t := range tasks {
		o := statemachine.TaskObservation{Ref: t.Ref, State: string(t.State)}
		if t.Err != nil {
			o.Error = classify(t.Err)
		}
		out = append(out, o)
	}
	return out
}

// act runs one operation on the source VM; a failure is returned
// classified (a *statemachine.ObservedError).
func (s *Step) act(ctx context.Context, m *v1alpha1.VirtualMachineMigration, what string, op func(context.Context, *object.VirtualMachine) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	_, vm, leave, oerr := s.connect(ctx, m)
	defer leave()
	if oerr == nil {
		if err := op(ctx, vm); err != nil {
			oerr = classify(err)
		}
	}
	if oerr != nil {
		oerr.Message = what + ": " + oerr.Message
		return oerr
	}
	return nil
}

// ShutdownGuest asks the guest OS to shut down.
func (s *Step) ShutdownGuest(ctx context.Context, m *v1alpha1.VirtualMachineMigration) error {
	return s.act(ctx, m, "guest shutdown", vsphere.ShutdownGuest)
}

// PowerOff asks vSphere to power the source VM off, without waiting for
// the task: the decisions watch it (Observe reads the VM's power-off
// tasks) until it ended, and never restore the source before.
func (s *Step) PowerOff(ctx context.Context, m *v1alpha1.VirtualMachineMigration) error {
	return s.act(ctx, m, "power-off", func(ctx context.Context, vm *object.VirtualMachine) error {
		_, err := vsphere.StartPowerOff(ctx, vm)
		return err
	})
}

// PowerOn powers the source VM on.
func (s *Step) PowerOn(ctx context.Context, m *v1alpha1.VirtualMachineMigration) error {
	return s.act(ctx, m, "power-on", vsphere.PowerOn)
}

// RemoveSnapshot removes a snapshot the controller made.
func (s *Step) RemoveSnapshot(ctx context.Context, m *v1alpha1.VirtualMachineMigration, name string) error {
	return s.act(ctx, m, "removing snapshot "+name, func(ctx context.Context, vm *object.VirtualMachine) error {
		return vsphere.RemoveSnapshot(ctx, vm, name)
	})
}
