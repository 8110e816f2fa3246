package cli

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/preflight"
	"platform.example/vm-migration/pkg/statemachine"
)

// proofJobName is the transfer image's proof Job of the fixtures.
var proofJobName = naming.ProofJob(v1alpha1.ComponentTransfer, "dc3f4f301862f457")

// proofUnschedulable is a migration in Validating whose transfer image's
// proof pod no node can run: as a controller records it in
// status.podWaiting when withPodWaiting, else only in the Progressing
// condition (as it did before).
func proofUnschedulable(withPodWaiting bool) *v1alpha1.VirtualMachineMigration {
	return inPhase("proof-waits", v1alpha1.PhaseValidating, func(m *v1alpha1.VirtualMachineMigration) {
		setCondition(m, statemachine.ConditionProgressing, metav1.ConditionTrue, statemachine.ReasonWorking,
			fmt.Sprintf("proving that the transfer image runs in namespace apps (job %s): pod %s-x7k2p: Unschedulable: 0/3 nodes are available: 3 Insufficient memory.", proofJobName, proofJobName))
		if withPodWaiting {
			m.Status.PodWaiting = &v1alpha1.PodWaiting{Job: proofJobName, Reason: "Unschedulable",
				Message: "0/3 nodes are available: 3 Insufficient memory.", Since: at(40 * time.Minute), AttemptFailsAt: atp(45 * time.Minute)}
		}
	})
}

// refusedFor is a migration refused in Validating by blocking findings
// of the given reasons, each with a message of its own.
func refusedFor(name string, reasons ...string) *v1alpha1.VirtualMachineMigration {
	m := inPhase(name, v1alpha1.PhaseFailed, failed)
	m.Status.SourceControl = nil
	var lines []string
	for _, r := range reasons {
		m.Status.Preflight = append(m.Status.Preflight, v1alpha1.PreflightFinding{Reason: r, Severity: v1alpha1.SeverityBlocking, Message: r + " found"})
		lines = append(lines, r+": "+r+" found")
	}
	m.Status.Preflight = append(m.Status.Preflight, v1alpha1.PreflightFinding{Reason: preflight.ReasonStaticAddressOnPodNetwork,
		Severity: v1alpha1.SeverityWarning, Message: "a warning, which blocks nothing"})
	lastError(v1alpha1.PhaseValidating, statemachine.ReasonPreflightFailed, strings.Join(lines, "; "))(m)
	return m
}

// reservedMAC is a migration KubeVirt refused in the dry run of its
// VirtualMachine: its source NIC, on the pod network, has the MAC
// KubeVirt keeps for its in-pod bridge, which spec.target.preserveMACAddresses keeps.
func reservedMAC() *v1alpha1.VirtualMachineMigration {
	m := refusedFor("reserved-mac")
	m.Status.Source.NICs[0].MAC = "02:00:00:00:00:00"
	m.Status.Source.NICs[0].Label = "Network adapter 1"
	answer := `admission webhook "virtualmachine-validator.kubevirt.io" denied the request: The requested MAC address is reserved for the in-pod bridge. Please choose another one.`
	m.Status.DryRun = &v1alpha1.DryRunStatus{ObservedGeneration: 1, Phase: v1alpha1.PhaseValidating, CheckedAt: at(8 * time.Second), Refused: 1,
		Objects: []v1alpha1.DryRunObject{
			{APIVersion: "v1", Kind: "PersistentVolumeClaim", Name: "web-01-disk-0", Outcome: v1alpha1.DryRunAccepted},
			{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine", Name: "web-01", Outcome: v1alpha1.DryRunRefused, Message: answer},
		}}
	finding := preflight.DryRunFindings(m.Status.DryRun)
	m.Status.Preflight = append(finding, m.Status.Preflight...)
	lastError(v1alpha1.PhaseValidating, statemachine.ReasonPreflightFailed, finding[0].Reason+": "+finding[0].Message)(m)
	return m
}

// guestAddressRejected is a migration refused because VMware Tools
// reported, from inside the guest, network values that are no addresses.
func guestAddressRejected() *v1alpha1.VirtualMachineMigration {
	m := refusedFor("guest-rejected", preflight.ReasonGuestAddressRejected)
	m.Status.Source.GuestNetworkRejected = []string{`NIC 4000: "192.168.10.21%eth0" at byte 13`}
	return m
}

// TestNextFollowsTheBlockingReason: Next says what holds the migration,
// names the field or the object to change, and says when no change of
// the spec can help (issue 50 item 6).
func TestNextFollowsTheBlockingReason(t *testing.T) {
	show := testing.Verbose()
	cases := map[string]struct {
		m            *v1alpha1.VirtualMachineMigration
		want, refuse []string
	}{
		"a proof pod no node runs, as an older controller recorded it": {
			m:      proofUnschedulable(false),
			want:   []string{proofJobName, "Unschedulable"},
			refuse: []string{"reading the source VM's inventory", "nothing to do"},
		},
		"a proof pod no node runs": {
			m: proofUnschedulable(true),
			want: []string{"proof Job " + proofJobName, "transfer image", "(Unschedulable)", "kubectl describe pod -n apps -l job-name=" + proofJobName,
				"no spec field", "2026-11-30T10:45:00Z", "refused", "source"},
			refuse: []string{"reading the source VM's inventory", "retry budget", "nothing to do"},
		},
		"KubeVirt refuses the source's MAC": {
			m:      reservedMAC(),
			want:   []string{"DryRunRefused", "spec.target.preserveMACAddresses", "02:00:00:00:00:00", "Network adapter 1", "kubectl edit vmm reserved-mac -n apps"},
			refuse: []string{"fix the spec"},
		},
		"the guest reported values that are no addresses": {
			m:      guestAddressRejected(),
			want:   []string{"GuestAddressRejected", "no change of the spec", "guest", "kubectl vmm cancel guest-rejected -n apps"},
			refuse: []string{"fix the spec", "kubectl edit"},
		},
		"a quota refuses the staging claims": {
			m:      fixtures()["refused"],
			want:   []string{"DryRunRefused", "ResourceQuota no-claims", "no change of the spec"},
			refuse: []string{"fix the spec", "kubectl edit"},
		},
		"another migration creates the target's name": {
			m: func() *v1alpha1.VirtualMachineMigration {
				m := refusedFor("claimed")
				lastError(v1alpha1.PhaseValidating, statemachine.ReasonTargetNameClaimed, "migration web-01-a already creates a VirtualMachine named web-01 in this namespace")(m)
				return m
			}(),
			want:   []string{"TargetNameClaimed: set spec.target.name", "kubectl edit vmm claimed -n apps"},
			refuse: []string{"no change of the spec"},
		},
		"a spec fix and a vSphere fix": {
			m:    refusedFor("two", preflight.ReasonUnmappedNetwork, preflight.ReasonRDMDisk),
			want: []string{"UnmappedNetwork", "spec.target.networks", "RDMDisk", "vSphere", "make the fixes outside the spec first", "kubectl edit vmm two -n apps"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			next := nextStep(tc.m)
			if show {
				t.Log(next)
			}
			for _, w := range tc.want {
				assert.Contains(t, next, w, "Next")
			}
			for _, r := range tc.refuse {
				assert.NotContains(t, next, r, "Next")
			}
		})
	}
}

// TestEveryRefusalSaysWhatToChange: for every reason a blocking finding
// has, a refused migration's Next names a spec field to change, or says
// that no change of the spec helps (and what to change instead).
func TestEveryRefusalSaysWhatToChange(t *testing.T) {
	for _, reason := range []string{
		preflight.ReasonRDMDisk, preflight.ReasonSharedDisk, preflight.ReasonUnmappedNetwork,
		preflight.ReasonMissingStorageMapping, preflight.ReasonStorageClassMissing,
		preflight.ReasonExistingSnapshots, preflight.ReasonEncryptedVM, preflight.ReasonUnsupportedFirmware,
		preflight.ReasonTargetNameTaken, preflight.ReasonChildNameTaken, preflight.ReasonConversionImageNotAllowed,
		preflight.ReasonMultiplePodNICs, preflight.ReasonNoConversionImage, preflight.ReasonDurationOutOfRange,
		preflight.ReasonSourceSuspended, preflight.ReasonDryRunRefused, preflight.ReasonTransferImageNotRunnable,
		preflight.ReasonConversionImageNotRunnable, preflight.ReasonLauncherSeccompMissing, preflight.ReasonWindowsWithoutVirtioDrivers,
		preflight.ReasonUnsupportedGuestOS, preflight.ReasonGuestAddressRejected, preflight.ReasonNetworkDefinitionMissing,
		preflight.ReasonStorageProfileIncomplete, preflight.ReasonStorageModeUnsupported, preflight.ReasonSourceAlreadyMigrated,
		statemachine.ReasonTargetNameClaimed, statemachine.ReasonSourceVMClaimed,
	} {
		t.Run(reason, func(t *testing.T) {
			next := nextStep(refusedFor("refused", reason))
			assert.Contains(t, next, reason, "Next")
			spec := strings.Contains(next, "spec.") && strings.Contains(next, "kubectl edit vmm refused -n apps")
			assert.True(t, spec || strings.Contains(next, "no change of the spec"), "Next names no spec field and does not say none helps: %s", next)
			if !spec {
				assert.Contains(t, next, "after the fix, create the migration again", "Next")
			}
			assert.NotContains(t, next, "fix the spec", "Next")
		})
	}
	// A rule of a later version: its finding says what to change.
	next := nextStep(refusedFor("refused", "SomeRuleOfALaterVersion"))
	assert.Contains(t, next, "SomeRuleOfALaterVersion: its finding says what to change (kubectl vmm describe refused -n apps)")
}

// TestNextOfAFailedProof: a refusal by an image proof says what the
// failure's reason asks for: a pull, the pull secrets or the image; no
// node, room on one.
func TestNextOfAFailedProof(t *testing.T) {
	for reason, want := range map[string][]string{
		"ImagePullBackOff": {"spec.imagePullSecrets", "registry.example/vm-migration-controller:v0.1.0"},
		"Unschedulable":    {"no change of the spec", "node"},
		"SelfCheckFailed":  {"no change of the spec", "--transfer-image"},
	} {
		t.Run(reason, func(t *testing.T) {
			m := refusedFor("proof-failed", preflight.ReasonTransferImageNotRunnable)
			m.Status.ImageProofs = []v1alpha1.ImageProof{{Component: v1alpha1.ComponentTransfer, Image: "registry.example/vm-migration-controller:v0.1.0",
				JobName: proofJobName, Result: v1alpha1.ProofFailed, Reason: reason, Message: "what the cluster said", CheckedAt: at(9 * time.Second)}}
			next := nextStep(m)
			for _, w := range want {
				assert.Contains(t, next, w, "Next")
			}
		})
	}
}
