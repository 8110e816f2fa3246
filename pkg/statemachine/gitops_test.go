package statemachine

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/test/builders"
)

// How GitOps tools read a migration's health (issue 50): kstatus
// (sigs.k8s.io/cli-utils, as Flux, kpt and cli-utils compute it) and the
// Argo CD health check shipped in manifests/argocd. Both read statuses the
// state machine wrote, of every phase; docs/operators/gitops.md has the
// same table.

// Argo CD health statuses.
const (
	argoProgressing = "Progressing"
	argoHealthy     = "Healthy"
	argoDegraded    = "Degraded"
	argoSuspended   = "Suspended"
)

// argoHealthCheck is the health check Argo CD is given (manifests/argocd).
var argoHealthCheck = filepath.Join("..", "..", "manifests", "argocd", "health.lua")

// gitopsCase is a migration as the controller left it, and how GitOps
// tools must read it.
type gitopsCase struct {
	name     string
	m        *v1alpha1.VirtualMachineMigration
	kstatus  kstatus.Status
	kSays    string // a part of kstatus' message
	argo     string
	argoSays string // a part of the Argo CD health message
}

// drivenTo is a migration driven by decisions through the world w (a
// fresh one that runs everything well, unless given) until it reaches
// phase p, its status the one the decision that reached p wrote.
func drivenTo(t *testing.T, p v1alpha1.Phase, w *world, opts ...builders.MigrationMod) *v1alpha1.VirtualMachineMigration {
	t.Helper()
	if w == nil {
		w = &world{sourceOn: true, jobs: map[string]bool{}}
	}
	m, _ := driveTo(t, newMigration(append([]builders.MigrationMod{builders.WithoutFinalizer}, opts...)...), w, p)
	return m
}

// decidedIn is m with the status one decision on o wrote, which must
// leave it in phase p.
func decidedIn(t *testing.T, p v1alpha1.Phase, m *v1alpha1.VirtualMachineMigration, o Observation) *v1alpha1.VirtualMachineMigration {
	t.Helper()
	d := decide(m, o)
	require.Equal(t, p, d.Status.Phase, "the decision's phase (lastError %+v)", d.Status.LastError)
	return after(m, d)
}

// specChanged is m with its spec changed since the controller's last
// status: its generation ahead of status.observedGeneration.
func specChanged(m *v1alpha1.VirtualMachineMigration) *v1alpha1.VirtualMachineMigration {
	m = m.DeepCopy()
	m.Generation = m.Status.ObservedGeneration + 1
	return m
}

// gitopsCases are statuses the state machine wrote in every phase, with
// how kstatus and the Argo CD health check read them.
func gitopsCases(t *testing.T) []gitopsCase {
	t.Helper()
	working := func(p v1alpha1.Phase) gitopsCase {
		return gitopsCase{name: string(p), m: drivenTo(t, p, nil), kstatus: kstatus.InProgressStatus, argo: argoProgressing}
	}
	failing := func() *world { return &world{sourceOn: true, jobs: map[string]bool{}, transferFails: true} }
	succeeded := drivenTo(t, v1alpha1.PhaseSucceeded, nil)
	failed := drivenTo(t, v1alpha1.PhaseFailed, failing(), builders.RetryLimit(0))
	transferring := builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
		s.Transfer = &v1alpha1.JobStatus{JobName: naming.TransferJob(builders.Name, 1), Attempt: 1}
		s.LastProgressTime = builders.TP(-time.Hour)
	})
	transferRuns := newObs(claims(stagingClaims()...), transferJob(JobObservation{Name: naming.TransferJob(builders.Name, 1)}))

	cases := []gitopsCase{
		working(v1alpha1.PhasePending),
		working(v1alpha1.PhaseValidating),
		working(v1alpha1.PhaseQueued),
		working(v1alpha1.PhaseStoppingSource),
		working(v1alpha1.PhaseTransferringDisks),
		working(v1alpha1.PhaseConverting),
		working(v1alpha1.PhaseImporting),
		working(v1alpha1.PhaseCreatingVM),
		working(v1alpha1.PhaseStarting),
		working(v1alpha1.PhaseCleaningUp),
		{
			// Waiting for spec.planOnly to turn false: nothing migrated,
			// so not Current (Ready stays False); a person acts next.
			name: "Planned", m: decidedIn(t, v1alpha1.PhasePlanned, planned(), newObs(storedPlan)),
			kstatus: kstatus.InProgressStatus, kSays: "spec.planOnly",
			argo: argoSuspended, argoSays: "spec.planOnly",
		},
		{
			name: "AwaitingApproval",
			m: decidedIn(t, v1alpha1.PhaseAwaitingApproval, drivenTo(t, v1alpha1.PhaseAwaitingApproval, nil, builders.RequireApproval),
				newObs(sourceInventory, slot(true))),
			kstatus: kstatus.InProgressStatus, kSays: `"approved":true`,
			argo: argoSuspended, argoSays: `"approved":true`,
		},
		{
			name:    "TransferringDisks, paused",
			m:       decidedIn(t, v1alpha1.PhaseTransferringDisks, newMigration(builders.Reached(v1alpha1.PhaseTransferringDisks), builders.Paused), transferRuns),
			kstatus: kstatus.InProgressStatus, kSays: "spec.policy.paused",
			argo: argoSuspended, argoSays: "spec.policy.paused",
		},
		{
			// No progress for spec.policy.stallTimeout: kstatus' Stalled,
			// as it reads a Deployment past its progress deadline.
			name:    "TransferringDisks, stalled",
			m:       decidedIn(t, v1alpha1.PhaseTransferringDisks, newMigration(builders.Reached(v1alpha1.PhaseTransferringDisks), transferring), transferRuns),
			kstatus: kstatus.FailedStatus, kSays: "no progress in TransferringDisks",
			argo: argoDegraded, argoSays: "no progress in TransferringDisks",
		},
		{
			// The failure is final once the source is restored: the
			// Failed condition (and kstatus' Failed) waits for it.
			name: "RollingBack", m: drivenTo(t, v1alpha1.PhaseRollingBack, failing(), builders.RetryLimit(0)),
			kstatus: kstatus.InProgressStatus, kSays: "failed in TransferringDisks",
			argo: argoDegraded, argoSays: "failed in TransferringDisks",
		},
		{
			name:    "Cancelling",
			m:       decidedIn(t, v1alpha1.PhaseCancelling, newMigration(builders.Reached(v1alpha1.PhaseTransferringDisks), builders.Deleted), newObs(sourceOff, claims(stagingClaims()...))),
			kstatus: kstatus.TerminatingStatus,
			// Argo CD says "Pending deletion" itself, before it runs the check.
			argo: argoProgressing, argoSays: "Cancelling",
		},
		{
			name:    "Cancelling, restored from a backup without its deletion",
			m:       decidedIn(t, v1alpha1.PhaseCancelling, newMigration(builders.Reached(v1alpha1.PhaseCancelling)), newObs()),
			kstatus: kstatus.InProgressStatus, argo: argoProgressing,
		},
		{
			name: "Succeeded", m: succeeded,
			kstatus: kstatus.CurrentStatus,
			argo:    argoHealthy, argoSays: "the migration succeeded",
		},
		{
			// Applied again once its time to live deleted it (issue 50):
			// calm, done, nothing to wait for.
			name:    "Succeeded, already migrated",
			m:       decidedIn(t, v1alpha1.PhaseSucceeded, reapplied(), newObs(sourceInventory, earlierCopy(), takenByCopy)),
			kstatus: kstatus.CurrentStatus,
			argo:    argoHealthy, argoSays: "already migrated",
		},
		{
			name: "Failed", m: failed,
			kstatus: kstatus.FailedStatus, kSays: "failed in TransferringDisks",
			argo: argoDegraded, argoSays: "failed in TransferringDisks: transfer job web01-mig-transfer-1 failed: stream reset",
		},
		{
			name: "Failed, refused in Validating",
			m: decidedIn(t, v1alpha1.PhaseFailed, newMigration(builders.Reached(v1alpha1.PhaseValidating)),
				newObs(sourceInventory, preflight(v1alpha1.SeverityBlocking, "RDMDisk"))),
			kstatus: kstatus.FailedStatus, kSays: "failed in Validating",
			argo: argoDegraded, argoSays: "RDMDisk found",
		},
		{
			name: "Succeeded, its spec changed since", m: specChanged(succeeded),
			kstatus: kstatus.InProgressStatus, kSays: "latest observed generation",
			argo: argoProgressing, argoSays: "observe generation 2 (status is of generation 1)",
		},
		{
			name: "Failed, its spec changed since", m: specChanged(failed),
			kstatus: kstatus.InProgressStatus, kSays: "latest observed generation",
			argo: argoProgressing, argoSays: "observe generation 2 (status is of generation 1)",
		},
		{
			// kstatus reads an object with no conditions as Current: no
			// status of the controller's can say otherwise (the docs say so).
			name: "new, no status yet", m: newMigration(builders.WithoutFinalizer),
			argo: argoProgressing, argoSays: "waiting for the controller",
		},
	}
	var covered []v1alpha1.Phase
	for _, c := range cases {
		covered = append(covered, c.m.Status.Phase)
	}
	for _, p := range v1alpha1.Phases() {
		require.Contains(t, covered, p, "no case of phase %s", p)
	}
	return cases
}

// served is m as the API server serves it to a GitOps tool.
func served(t *testing.T, m *v1alpha1.VirtualMachineMigration) *unstructured.Unstructured {
	t.Helper()
	m = m.DeepCopy()
	m.SetGroupVersionKind(v1alpha1.SchemeGroupVersion.WithKind("VirtualMachineMigration"))
	data, err := json.Marshal(m)
	require.NoError(t, err)
	u := &unstructured.Unstructured{}
	require.NoError(t, u.UnmarshalJSON(data))
	return u
}

// TestKstatus: kstatus reads a migration that failed as Failed, one that
// succeeded as Current, and every other as InProgress (or Terminating
// once deleted), so that a Flux Kustomization waiting on it reports the
// failure instead of timing out.
func TestKstatus(t *testing.T) {
	for _, tc := range gitopsCases(t) {
		if tc.kstatus == "" {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			res, err := kstatus.Compute(served(t, tc.m))
			require.NoError(t, err)
			assert.Equal(t, tc.kstatus, res.Status, "kstatus of phase %s (message %q; conditions %+v)", tc.m.Status.Phase, res.Message, tc.m.Status.Conditions)
			assert.Contains(t, res.Message, tc.kSays, "kstatus' message")
		})
	}
}

// argoHealth runs script as Argo CD runs a resource health check: the
// object in the global obj, only the libraries Argo CD opens for it
// (package, base, table: no string library), a second to run; it
// returns hs.status and hs.message.
func argoHealth(t *testing.T, script string, obj map[string]any) (status, message string) {
	t.Helper()
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.LoadLibName, lua.OpenPackage}, {lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}} {
		require.NoError(t, l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), Protect: true}, lua.LString(lib.name)), "opening %q", lib.name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", luaValue(l, obj))
	require.NoError(t, l.DoString(script), "running the health check")
	hs, ok := l.Get(-1).(*lua.LTable)
	require.True(t, ok, "the health check returned %s, want a table", l.Get(-1).Type())
	st, ok := hs.RawGetString("status").(lua.LString)
	require.True(t, ok, "hs.status is %s, want a string", hs.RawGetString("status").Type())
	msg, ok := hs.RawGetString("message").(lua.LString)
	require.True(t, ok, "hs.message is %s, want a string", hs.RawGetString("message").Type())
	return string(st), string(msg)
}

// luaValue is v as Argo CD hands an object's fields to Lua: maps and
// lists as tables, numbers as numbers.
func luaValue(l *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		tbl := l.CreateTable(0, len(v))
		for k, e := range v {
			tbl.RawSetString(k, luaValue(l, e))
		}
		return tbl
	case []any:
		tbl := l.CreateTable(len(v), 0)
		for _, e := range v {
			tbl.Append(luaValue(l, e))
		}
		return tbl
	case string:
		return lua.LString(v)
	case bool:
		return lua.LBool(v)
	case int64:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	}
	return lua.LNil
}

// TestArgoCDHealthCheck runs the health check manifests/argocd ships over
// the same statuses: Healthy once succeeded, Degraded once failed,
// rolling back or stalled, Suspended while a person must act (approval,
// planOnly, paused), Progressing otherwise.
func TestArgoCDHealthCheck(t *testing.T) {
	script, err := os.ReadFile(argoHealthCheck)
	require.NoError(t, err, "reading the shipped health check")
	valid := []string{argoProgressing, argoHealthy, argoDegraded, argoSuspended}
	for _, tc := range gitopsCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			status, message := argoHealth(t, string(script), served(t, tc.m).Object)
			require.True(t, slices.Contains(valid, status), "hs.status %q is not one Argo CD knows", status)
			assert.Equal(t, tc.argo, status, "Argo CD health of phase %s (message %q)", tc.m.Status.Phase, message)
			assert.NotEmpty(t, message, "hs.message")
			assert.Contains(t, message, tc.argoSays, "hs.message")
		})
	}
}
