package v1alpha1

import (
	"time"

	"k8s.io/utils/ptr"
)

// Defaults the API server applies through the CRD schema; the accessors
// below apply the same values when a field is unset (objects built in code
// or served by a server without the schema defaults).
const (
	DefaultSizeOverheadPercent = 10
	DefaultShutdownTimeout     = 5 * time.Minute
	DefaultRetryLimit          = 3
	DefaultRetryDeadline       = 24 * time.Hour
	DefaultStallTimeout        = 30 * time.Minute
	DefaultStartTimeout        = 10 * time.Minute
)

// FinalizerName is the finalizer the controller puts on every migration so
// that deleting it cancels the migration and cleans up first.
const FinalizerName = "migration.platform.example/cleanup"

// StartEnabled reports whether the VM is started once created (default true).
func (t *TargetSpec) StartEnabled() bool { return ptr.Deref(t.Start, true) }

// PreserveMACs reports whether source MAC addresses are kept (default
// true): never for a second copy (SecondCopy), whose source's first copy
// runs with them.
func (t *TargetSpec) PreserveMACs() bool {
	return !t.SecondCopy && ptr.Deref(t.PreserveMACAddresses, true)
}

// PreserveStaticIPsEnabled reports whether the guest's interface names
// (and so its static addresses) are kept (default true).
func (t *TargetSpec) PreserveStaticIPsEnabled() bool { return ptr.Deref(t.PreserveStaticIPs, true) }

// AllocatedOnlyEnabled reports whether only the allocated areas of the
// disks are copied where vSphere can map them (default true).
func (t *TransferSpec) AllocatedOnlyEnabled() bool { return ptr.Deref(t.AllocatedOnly, true) }

// OverheadPercent is the staging size overhead in percent (default 10).
func (s *StagingSpec) OverheadPercent() int32 {
	return ptr.Deref(s.SizeOverheadPercent, DefaultSizeOverheadPercent)
}

// ShutdownMode is the shutdown mode (default GuestThenPowerOff).
func (p *PolicySpec) ShutdownMode() ShutdownMode {
	if p.Shutdown.Mode == "" {
		return ShutdownModeGuestThenPowerOff
	}
	return p.Shutdown.Mode
}

// ShutdownTimeout is the guest shutdown timeout (default 5m).
func (p *PolicySpec) ShutdownTimeout() time.Duration {
	return p.Shutdown.Timeout.or(DefaultShutdownTimeout)
}

// RetryLimit is the retry budget's count (default 3).
func (p *PolicySpec) RetryLimit() int32 { return ptr.Deref(p.Retry.Limit, DefaultRetryLimit) }

// RetryDeadline is the retry budget's wall-clock deadline from the start (default 24h).
func (p *PolicySpec) RetryDeadline() time.Duration {
	return p.Retry.Deadline.or(DefaultRetryDeadline)
}

// CleanupPolicy is the cleanup policy (default Delete).
func (p *PolicySpec) CleanupPolicy() CleanupPolicy {
	if p.Cleanup == "" {
		return CleanupPolicyDelete
	}
	return p.Cleanup
}

// StallAfter is how long without progress before Stalled (default 30m).
func (p *PolicySpec) StallAfter() time.Duration {
	return p.StallTimeout.or(DefaultStallTimeout)
}

// StartDeadline is how long the new VM may take to run (default 10m).
func (p *PolicySpec) StartDeadline() time.Duration {
	return p.StartTimeout.or(DefaultStartTimeout)
}

// NeedsApproval reports whether the migration waits for approval before
// the source is stopped.
func (p *PolicySpec) NeedsApproval() bool { return p.RequireApproval && !p.Approved }

// DurationProblems names each duration of the policy that is not a
// positive duration of at most MaxDuration (a value stored under the
// schema of an older release, or built in code), with the value used in
// its place: none for a policy the schema admitted.
func (p *PolicySpec) DurationProblems() []string {
	var out []string
	for _, f := range []struct {
		path string
		d    *Duration
		def  time.Duration
	}{
		{"spec.policy.shutdown.timeout", p.Shutdown.Timeout, DefaultShutdownTimeout},
		{"spec.policy.retry.deadline", p.Retry.Deadline, DefaultRetryDeadline},
		{"spec.policy.stallTimeout", p.StallTimeout, DefaultStallTimeout},
		{"spec.policy.startTimeout", p.StartTimeout, DefaultStartTimeout},
	} {
		if msg := f.d.problem(f.path, f.def); msg != "" {
			out = append(out, msg)
		}
	}
	return out
}

// SpecInForce is the spec the controller works from. Once it began to stop
// the source it works from the spec it committed to (status.appliedSpec),
// where only the live control fields (pause, retry, cleanup, timeouts,
// approval) still follow the user's spec; before, from spec itself.
func (m *VirtualMachineMigration) SpecInForce() *VirtualMachineMigrationSpec {
	if m.Status.AppliedSpec == nil {
		return &m.Spec
	}
	s := m.Status.AppliedSpec.DeepCopy()
	live, from := &s.Policy, &m.Spec.Policy
	live.Paused = from.Paused
	live.Retry = from.Retry
	live.Cleanup = from.Cleanup
	live.StallTimeout = from.StallTimeout
	live.StartTimeout = from.StartTimeout
	live.RequireApproval = from.RequireApproval
	live.Approved = from.Approved
	return s
}
