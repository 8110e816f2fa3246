package statemachine

// Condition types set on a migration.
const (
	// ConditionReady is true once the migration succeeded; its reason says
	// where a migration in progress stands.
	ConditionReady = "Ready"
	// ConditionProgressing is true while the controller works toward the
	// current checkpoint, false while it waits on something or once the
	// migration ended (the reason then says how).
	ConditionProgressing = "Progressing"
	// ConditionSucceeded is set when the migration ends: true once it
	// succeeded, false once it failed. Scripts wait on it:
	// kubectl wait --for=condition=Succeeded vmm/NAME.
	ConditionSucceeded = "Succeeded"
	// ConditionFailed is set when the migration ends: true once it failed
	// and its rollback restored the source (phase Failed), false once it
	// succeeded. kubectl wait --for=condition=Failed vmm/NAME.
	ConditionFailed = "Failed"
	// ConditionStalled is true when the migration cannot make progress:
	// no progress was seen for the policy's stall timeout (NoProgress), or
	// it ended Failed (the failure's reason). It is kstatus' Stalled,
	// which GitOps tools (Flux, kpt) read as Failed.
	ConditionStalled = "Stalled"
	// ConditionPaused is true while spec.policy.paused holds the migration.
	ConditionPaused = "Paused"
	// ConditionApprovalRequired is true while the cutover waits for approval.
	ConditionApprovalRequired = "ApprovalRequired"
	// ConditionSpecChangeIgnored is true when the spec changed in a way
	// that can no longer apply (the source was already stopped).
	ConditionSpecChangeIgnored = "SpecChangeIgnored"
	// ConditionInsecureConnection is true when TLS verification of the
	// source is off.
	ConditionInsecureConnection = "InsecureConnection"
	// ConditionSourceRestoreFailed is true while powering the source back
	// on fails; the migration keeps its finalizer meanwhile.
	ConditionSourceRestoreFailed = "SourceRestoreFailed"
	// ConditionTargetKept is true when a failed or cancelled migration
	// keeps its target VM and disks because the target had been started.
	ConditionTargetKept = "TargetKept"
)

// Condition and event reasons.
const (
	ReasonWorking                = "Working"
	ReasonSucceeded              = "Succeeded"
	ReasonFailed                 = "Failed"
	ReasonRetrying               = "Retrying"
	ReasonRetryBudgetSpent       = "RetryBudgetSpent"
	ReasonPaused                 = "Paused"
	ReasonNotPaused              = "NotPaused"
	ReasonAwaitingApproval       = "AwaitingApproval"
	ReasonApproved               = "Approved"
	ReasonWaitingForTransferSlot = "WaitingForTransferSlot"
	ReasonPreflightFailed        = "PreflightFailed"
	ReasonSourceVMNotFound       = "SourceVMNotFound"
	ReasonNoProgress             = "NoProgress"
	ReasonProgressing            = "ProgressSeen"
	ReasonSpecChangeIgnored      = "SpecChangeIgnored"
	ReasonSpecApplied            = "SpecApplied"
	ReasonInsecureSkipVerify     = "InsecureSkipVerify"
	ReasonVerifiedTLS            = "VerifiedTLS"
	ReasonTransferFailed         = "TransferFailed"
	ReasonTransferResultMismatch = "TransferResultMismatch"
	ReasonConversionFailed       = "ConversionFailed"
	ReasonImportFailed           = "ImportFailed"
	ReasonImportTimedOut         = "ImportTimedOut"
	ReasonDataVolumesPending     = "DataVolumesPending"
	ReasonTransferTimedOut       = "TransferTimedOut"
	ReasonTargetVMNotOurs        = "TargetVMNotOurs"
	ReasonTargetVMFailed         = "TargetVMFailed"
	ReasonStartTimeout           = "StartTimeout"
	ReasonCancelled              = "Cancelled"
	ReasonSourceRestored         = "SourceRestored"
	ReasonActionFailed           = "ActionFailed"
	ReasonSourceRestoreFailed    = "SourceRestoreFailed"
	ReasonTargetKept             = "TargetKept"
	ReasonSourceSuspended        = "SourceSuspended"
	ReasonSourceRunning          = "SourceRunning"
	ReasonSourceVMClaimed        = "SourceVMClaimed"
	ReasonTargetNameClaimed      = "TargetNameClaimed"
	ReasonTargetStarted          = "TargetStarted"
	ReasonTargetLeftHalted       = "TargetLeftHalted"
	ReasonRollingBack            = "RollingBack"
	ReasonConversionWarnings     = "ConversionWarnings"
	// ReasonVerificationFailed: the Job that reads the target disks back
	// failed, or gave no checksum for one of them (retried).
	ReasonVerificationFailed = "VerificationFailed"
	// ReasonChecksumMismatch: a target disk does not hold the converted
	// bytes; the VM is not started and the source is restored.
	ReasonChecksumMismatch = "ChecksumMismatch"
	// ReasonTargetClaimLost: a claim a disk was transferred and converted
	// in is gone before its DataVolume adopted it, or its DataVolume's
	// claim is another (CDI made a blank one of its name for the blank
	// source); the VM is not created and the source is restored.
	ReasonTargetClaimLost = "TargetClaimLost"
	// ReasonPlanOnly: a dry run rests in phase Planned while
	// spec.planOnly is true.
	ReasonPlanOnly = "PlanOnly"
	// ReasonPodNotStarted: a transfer or conversion pod did not start
	// within the pod start timeout for a reason a person must fix; the
	// attempt counts as failed.
	ReasonPodNotStarted = "PodNotStarted"
	// ReasonEarlierAttemptRunning: a transfer, conversion or verification
	// attempt waits to start until every Job and pod of the earlier
	// attempts is gone (two pods never write the same claim); past the
	// retry deadline the migration fails.
	ReasonEarlierAttemptRunning = "EarlierAttemptRunning"
	// ReasonVerificationAged: the target disks were read back longer
	// before the start than the controller's --verification-max-age;
	// they are read back again before the VM starts.
	ReasonVerificationAged = "VerificationAged"
	// ReasonTargetsReadAgain: the target disks were last read (by the
	// conversion, for disks written in place) before a pause or longer
	// ago than --verification-max-age, or a claim is not known to be the
	// one the transfer wrote, bound under its DataVolume; a verification
	// Job reads them again before the VM is created or started.
	ReasonTargetsReadAgain = "TargetsReadAgain"
)

// Conversion failure reasons a conversion Job reports. Inspection failures
// and unsupported guests are permanent: converting again cannot help.
const (
	ConversionInspectionFailed = "InspectionFailed"
	ConversionUnsupportedGuest = "UnsupportedGuest"
)
