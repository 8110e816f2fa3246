package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/steps/pipeline"
)

// createArgs are the flags of a valid create.
var createArgs = []string{"create", "web-01", "--url", "https://vcenter.example.com/sdk", "--credentials-secret", "vcenter", "--vm", "web-01"}

func TestCreate(t *testing.T) {
	h := newHarness(t, nil)
	args := append(append([]string(nil), createArgs...),
		"--network-map", "VM Network=pod", "--network-map", "backend=default/backend", "--network-map", "dmz=IGNORE",
		"--storage-class", "standard", "--storage-map", "ssd-01=fast", "--approve-required", "--plan-only", "--no-start")
	require.Equal(t, 0, h.run(context.Background(), args...), "exit code (stderr %q)", h.errOut)
	assert.Equal(t, "virtualmachinemigration.migration.platform.example/web-01 created\n", h.out.String(), "output")
	m, err := h.factory.mig.MigrationV1alpha1().VirtualMachineMigrations("apps").Get(context.Background(), "web-01", metav1.GetOptions{})
	require.NoError(t, err, "getting the created migration")
	want := v1alpha1.VirtualMachineMigrationSpec{
		Source: v1alpha1.SourceSpec{URL: "https://vcenter.example.com/sdk", CredentialsSecretRef: v1alpha1.SecretReference{Name: "vcenter"}, VM: v1alpha1.VMSelector{Name: "web-01"}},
		Target: v1alpha1.TargetSpec{
			Start: ptr.To(false),
			Networks: []v1alpha1.NetworkMapping{
				{Source: "VM Network", Type: v1alpha1.NetworkTypePod},
				{Source: "backend", Type: v1alpha1.NetworkTypeMultus, MultusNetworkName: "default/backend"},
				{Source: "dmz", Type: v1alpha1.NetworkTypeIgnore},
			},
			Storage: v1alpha1.StorageMapping{
				Default:    &v1alpha1.StorageTarget{StorageClassName: "standard"},
				Datastores: []v1alpha1.DatastoreStorageMapping{{Datastore: "ssd-01", Target: v1alpha1.StorageTarget{StorageClassName: "fast"}}},
			},
		},
		Policy:   v1alpha1.PolicySpec{RequireApproval: true},
		PlanOnly: true,
	}
	assertSpecYAML(t, want, m.Spec, "created spec differs")
}

// assertSpecYAML asserts that two specs render to the same YAML, the
// comparison a user sees (nil and empty alike), with a diff of the YAML.
func assertSpecYAML(t *testing.T, want, got v1alpha1.VirtualMachineMigrationSpec, msgAndArgs ...any) bool {
	t.Helper()
	g, err := yamlOf(&got)
	require.NoError(t, err, "rendering the spec as YAML")
	w, err := yamlOf(&want)
	require.NoError(t, err, "rendering the wanted spec as YAML")
	return assert.Equal(t, w, g, msgAndArgs...)
}

func TestCreateDryRunClient(t *testing.T) {
	h := newHarness(t, nil)
	args := append(append([]string(nil), createArgs...), "--network-map", "VM Network=pod", "--dry-run=client", "-o", "yaml")
	require.Equal(t, 0, h.run(context.Background(), args...), "exit code (stderr %q)", h.errOut)
	golden(t, "create-dry-run", h.out.Bytes())
	assert.Empty(t, h.factory.mig.Actions(), "a client dry run sent requests")
}

func TestCreateRejectsBadFlags(t *testing.T) {
	cases := map[string]struct {
		args    []string
		wantErr string
	}{
		"bad name":          {args: []string{"create", "Web_01"}, wantErr: `migration name "Web_01"`},
		"no url":            {args: []string{"create", "web-01", "--vm", "x", "--credentials-secret", "s"}, wantErr: "--url is required"},
		"http url":          {args: []string{"create", "web-01", "--url", "http://vc/sdk"}, wantErr: "must be an https URL"},
		"url with password": {args: []string{"create", "web-01", "--url", "https://root:pw@vc/sdk"}, wantErr: "must not carry credentials"},
		"no secret":         {args: []string{"create", "web-01", "--url", "https://vc/sdk", "--vm", "x"}, wantErr: "--credentials-secret is required"},
		"bad secret":        {args: []string{"create", "web-01", "--url", "https://vc/sdk", "--vm", "x", "--credentials-secret", "Bad Secret"}, wantErr: `--credentials-secret "Bad Secret"`},
		"no vm":             {args: []string{"create", "web-01", "--url", "https://vc/sdk", "--credentials-secret", "s"}, wantErr: "exactly one of --vm"},
		"two vms":           {args: append(append([]string(nil), createArgs...), "--vm-moref", "vm-1"), wantErr: "(2 given)"},
		"bad uuid":          {args: []string{"create", "web-01", "--url", "https://vc/sdk", "--credentials-secret", "s", "--vm-uuid", "nope"}, wantErr: `--vm-uuid "nope" is not a UUID`},
		"bad moref":         {args: []string{"create", "web-01", "--url", "https://vc/sdk", "--credentials-secret", "s", "--vm-moref", "host-1"}, wantErr: "must look like vm-42"},
		"relative path":     {args: []string{"create", "web-01", "--url", "https://vc/sdk", "--credentials-secret", "s", "--vm-path", "dc/vm/x"}, wantErr: "starting with /"},
		"network map form":  {args: append(append([]string(nil), createArgs...), "--network-map", "VM Network"), wantErr: "must be SOURCE=pod"},
		"network map twice": {args: append(append([]string(nil), createArgs...), "--network-map", "a=pod", "--network-map", "a=ignore"), wantErr: `names source network "a" twice`},
		"bad multus":        {args: append(append([]string(nil), createArgs...), "--network-map", "a=Not/Valid_Name"), wantErr: "neither pod, ignore nor a NetworkAttachmentDefinition"},
		"storage map form":  {args: append(append([]string(nil), createArgs...), "--storage-map", "ds1"), wantErr: "must be DATASTORE=STORAGECLASS"},
		"bad class":         {args: append(append([]string(nil), createArgs...), "--storage-map", "ds1=Fast_SSD"), wantErr: "is not a storage class name"},
		"storage map twice": {args: append(append([]string(nil), createArgs...), "--storage-map", "ds1=a", "--storage-map", "ds1=b"), wantErr: `names datastore "ds1" twice`},
		"bad target":        {args: append(append([]string(nil), createArgs...), "--target-name", "Web 01"), wantErr: `--target-name "Web 01"`},
		"skip and image":    {args: append(append([]string(nil), createArgs...), "--skip-conversion", "--conversion-image", "x"), wantErr: "cannot go together"},
		"bad dry run":       {args: append(append([]string(nil), createArgs...), "--dry-run=maybe"), wantErr: "--dry-run must be none, client or server"},
		"no name":           {args: []string{"create"}, wantErr: "create needs exactly one migration name, got 0"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, nil)
			require.Equal(t, 1, h.run(context.Background(), tc.args...), "exit code")
			assert.Contains(t, h.errOut.String(), tc.wantErr, "stderr, want an error line with %q", tc.wantErr)
			assert.True(t, strings.HasPrefix(h.errOut.String(), "error: "), "stderr %q, want an error line (error: ...)", h.errOut)
			assert.Empty(t, h.factory.mig.Actions(), "requests sent for invalid flags")
		})
	}
}

func TestPolicyCommands(t *testing.T) {
	all := fixtures()
	cases := []struct {
		name, cmd, migration string
		wantCode             int
		wantOut              string
		check                func(*v1alpha1.VirtualMachineMigration) bool
	}{
		{name: "approve", cmd: "approve", migration: "approval", wantOut: "approval approved", check: func(m *v1alpha1.VirtualMachineMigration) bool { return m.Spec.Policy.Approved }},
		{name: "approve without gate", cmd: "approve", migration: "queued", wantOut: "unchanged: it does not wait for approval", check: func(m *v1alpha1.VirtualMachineMigration) bool { return !m.Spec.Policy.Approved }},
		{name: "pause", cmd: "pause", migration: "transferring", wantOut: "transferring paused", check: func(m *v1alpha1.VirtualMachineMigration) bool { return m.Spec.Policy.Paused }},
		{name: "pause paused", cmd: "pause", migration: "paused", wantOut: "unchanged: already paused", check: func(m *v1alpha1.VirtualMachineMigration) bool { return m.Spec.Policy.Paused }},
		{name: "resume", cmd: "resume", migration: "paused", wantOut: "paused resumed", check: func(m *v1alpha1.VirtualMachineMigration) bool { return !m.Spec.Policy.Paused }},
		{name: "resume running", cmd: "resume", migration: "transferring", wantOut: "unchanged: not paused", check: func(m *v1alpha1.VirtualMachineMigration) bool { return !m.Spec.Policy.Paused }},
		{name: "pause finished", cmd: "pause", migration: "succeeded", wantCode: 1, check: func(m *v1alpha1.VirtualMachineMigration) bool { return !m.Spec.Policy.Paused }},
		{name: "approve cancelling", cmd: "approve", migration: "cancelling", wantCode: 1, check: func(m *v1alpha1.VirtualMachineMigration) bool { return !m.Spec.Policy.Approved }},
		{name: "pause missing", cmd: "pause", migration: "nope", wantCode: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, objects(all[tc.migration]))
			require.Equal(t, tc.wantCode, h.run(context.Background(), tc.cmd, tc.migration), "exit code (stderr %q)", h.errOut)
			assert.Contains(t, h.out.String(), tc.wantOut, "output")
			if tc.check == nil {
				return
			}
			m, err := h.factory.mig.MigrationV1alpha1().VirtualMachineMigrations("apps").Get(context.Background(), tc.migration, metav1.GetOptions{})
			require.NoError(t, err, "getting migration %s", tc.migration)
			assert.True(t, tc.check(m), "spec.policy after %s: %+v", tc.cmd, m.Spec.Policy)
		})
	}
}

func TestCancel(t *testing.T) {
	all := fixtures()
	cases := []struct {
		name, migration, input string
		args                   []string
		wantCode               int
		wantDeleted            bool
		wantOut                []string
		wantNotOut             []string
		wantErr                string
	}{
		{name: "confirmed", migration: "transferring", input: "y\n", wantDeleted: true,
			wantOut:    []string{"is in phase TransferringDisks. If you cancel it, ", "powers the source VM back on", "Cancel apps/transferring now? [y/N]: ", "cancelling; follow it"},
			wantNotOut: []string{"Cancelling it"}},
		// Declined: a script tells it from a cancel by its exit code.
		{name: "declined", migration: "transferring", input: "n\n", wantCode: 1,
			wantErr: "error: virtualmachinemigration.migration.platform.example/transferring not cancelled: the answer was not yes\n"},
		{name: "declined by default", migration: "transferring", input: "\n", wantCode: 1, wantErr: "not cancelled"},
		// Without a terminal (no input): the question's line is ended
		// before the error, which goes on a line of its own.
		{name: "no answer", migration: "transferring", input: "", wantCode: 1, wantOut: []string{"Cancel apps/transferring now? [y/N]: \n"}},
		{name: "yes flag", migration: "starting", args: []string{"--yes"}, wantDeleted: true,
			wantOut:    []string{"is in phase Starting. Cancelling it: ", "VirtualMachine web-01, which was started, is halted and kept with its DataVolumes"},
			wantNotOut: []string{"[y/N]"}},
		{name: "before the cutover", migration: "approval", args: []string{"-y"}, wantDeleted: true, wantOut: []string{"nothing was done to the source VM yet"}},
		{name: "succeeded", migration: "succeeded", args: []string{"-y"}, wantDeleted: true, wantOut: []string{"VirtualMachine web-01 and its disks stay, handed over to you (the migration's labels removed, annotation migration.platform.example/migrated-by naming this migration)"}},
		{name: "already cancelling", migration: "cancelling", args: []string{"-y"}, wantOut: []string{"already being cancelled"}},
		{name: "refused before the stop", migration: "failed", args: []string{"-y"}, wantDeleted: true,
			wantOut:    []string{"it was refused before its source VM was touched: there is nothing to restore"},
			wantNotOut: []string{"restored when", "rollback"}},
		// Its image proofs are the namespace's, not its own: cancel does
		// not promise to delete them (issue 46).
		{name: "refused with image proofs", migration: "refused", input: "y\n", wantDeleted: true,
			wantOut:    []string{"the migration is deleted, with its stored plan if it has one", "its image proofs' Jobs are not its own"},
			wantNotOut: []string{"proof Job or plan it left"}},
		{name: "failed after the stop", migration: "rolled-back", args: []string{"-y"}, wantDeleted: true,
			wantOut: []string{"its rollback already powered the source VM back on, as it was found"}},
		{name: "missing", migration: "nope", args: []string{"-y"}, wantCode: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rolledBack := inPhase("rolled-back", v1alpha1.PhaseRollingBack, lastError(v1alpha1.PhaseTransferringDisks, "TransferFailed", "transfer job failed"))
			rolledBack.Status.Phase, rolledBack.Status.SourceControl.RestoredAt = v1alpha1.PhaseFailed, atp(41*time.Minute)
			h := newHarness(t, objects(all["transferring"], all["starting"], all["approval"], all["succeeded"], all["cancelling"], all["failed"], all["refused"], rolledBack))
			h.in.WriteString(tc.input)
			code := h.run(context.Background(), append([]string{"cancel", tc.migration}, tc.args...)...)
			require.Equal(t, tc.wantCode, code, "exit code (stderr %q)", h.errOut)
			for _, want := range tc.wantOut {
				assert.Contains(t, h.out.String(), want, "output lacks %q", want)
			}
			for _, unwanted := range tc.wantNotOut {
				assert.NotContains(t, h.out.String(), unwanted, "output has %q", unwanted)
			}
			deleted := false
			for _, a := range h.factory.mig.Actions() {
				deleted = deleted || a.GetVerb() == "delete"
			}
			assert.Equal(t, tc.wantDeleted, deleted, "whether the migration was deleted")
			assert.Contains(t, h.errOut.String(), tc.wantErr, "stderr")
			if tc.wantCode == 0 {
				assert.Empty(t, h.errOut.String(), "stderr")
			}
		})
	}
}

// TestCancelPromisesOnlyWhatIsDeleted: what cancel says a refused
// migration's deletion deletes is what the controller deletes: its
// children, the objects carrying its UID label (the plan ConfigMap). The
// image proofs it ran are shared by the namespace's migrations, carry an
// empty UID label and no owner, and outlive it until their TTL (issue
// 46: cancel promised to delete "a proof Job" it never deletes).
func TestCancelPromisesOnlyWhatIsDeleted(t *testing.T) {
	m := fixtures()["refused"]
	require.NotEmpty(t, m.Status.ImageProofs, "the fixture ran its image proofs")
	for _, component := range pipeline.ProofComponents(m) {
		job, _, err := pipeline.RenderProof(m, component, pipeline.Config{
			TransferImage: "registry.example/vm-migration-controller:v0.1.0", ConversionImage: "registry.example/virt-v2v:2.2"})
		require.NoError(t, err, "rendering the %s proof", component)
		assert.Empty(t, job.Labels[v1alpha1.LabelMigrationUID], "the %s proof Job's migration UID label: a child of the migration?", component)
		assert.Empty(t, job.OwnerReferences, "the %s proof Job's owners", component)
	}
	plan, err := pipeline.RenderPlanConfigMap(inPhase(m.Name, v1alpha1.PhasePlanned, withPlan), pipeline.Config{
		TransferImage: "registry.example/vm-migration-controller:v0.1.0", ConversionImage: "registry.example/virt-v2v:2.2"})
	require.NoError(t, err, "rendering a plan of the migration")
	assert.Equal(t, string(m.UID), plan.Labels[v1alpha1.LabelMigrationUID], "the plan ConfigMap's migration UID label: a child of the migration")

	effect := cancelEffect(m)
	assert.Contains(t, effect, "the migration is deleted, with its stored plan if it has one")
	assert.NotRegexp(t, `proof[^.;]* (is|are) deleted|deleted[^.;]*proof`, effect, "cancel promises to delete a proof")
}

// planConfigMap is the plan ConfigMap of the planned fixture, rendered by
// the pipeline as the controller stores it (with the transfer's progress
// access, as the controller's default --transfer-progress has it), so
// that the plan's summary covers every kind a plan holds.
func planConfigMap(t *testing.T, m *v1alpha1.VirtualMachineMigration) *corev1.ConfigMap {
	t.Helper()
	cm, err := pipeline.RenderPlanConfigMap(m, pipeline.Config{
		TransferImage:    "registry.example/vm-migration-controller:v0.1.0",
		ConversionImage:  "registry.example/virt-v2v:2.13",
		TransferProgress: true,
	})
	require.NoError(t, err, "rendering the plan of %s", m.Name)
	return cm
}

// conversionConfigMap is the conversion's domain ConfigMap of m, as the
// controller leaves it while the staging objects are kept.
func conversionConfigMap(m *v1alpha1.VirtualMachineMigration) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: m.Status.Conversion.ConfigMapName, Namespace: m.Namespace,
			Labels: map[string]string{v1alpha1.LabelMigrationUID: string(m.UID), v1alpha1.LabelComponent: v1alpha1.ComponentConversion}},
		Data: map[string]string{pipeline.DomainXMLKey: "<domain type=\"kvm\">\n  <name>web-01</name>\n</domain>\n", "convert.sh": "#!/bin/sh\n"},
	}
}

// TestPlan: kubectl vmm plan answers on every migration: the stored plan,
// what status.plan keeps of one that ran, the dry run's answers, the
// domain the conversion used; or says plainly why not, with advice that
// applies where the migration stands (issue 34: on a migration past its
// stop, -o yaml advised setting spec.planOnly before the stop).
func TestPlan(t *testing.T) {
	all := fixtures()
	planned := all["planned"]
	cases := []struct {
		name       string
		args       []string
		golden     string
		wantCode   int
		wantErr    string
		notWantErr string
		wantOut    string
	}{
		{name: "summary", args: []string{"plan", "planned"}, golden: "plan-summary"},
		{name: "yaml", args: []string{"plan", "planned", "-o", "yaml"}, wantOut: "kind: VirtualMachine\n"},
		{name: "json", args: []string{"plan", "planned", "-o", "json"}, wantOut: `"kind": "List"`},
		{name: "domain", args: []string{"plan", "planned", "--domain"}, wantOut: `<domain type="kvm">`},
		{name: "bad output", args: []string{"plan", "planned", "-o", "wide"}, wantCode: 1, wantErr: "--output must be yaml or json"},
		{name: "not asked, before the stop", args: []string{"plan", "queued"}, wantCode: 1, wantErr: `has no plan: ask for one with kubectl vmm create queued --plan-only ..., or kubectl patch vmm queued -n apps --type merge -p '{"spec":{"planOnly":true}}'`},
		{name: "not asked, past the stop", args: []string{"plan", "transferring", "-o", "yaml"}, wantCode: 1,
			wantErr:    `has no plan: spec.planOnly was not set before its source was stopped, and no plan is made after; what it did: kubectl vmm describe transferring -n apps; the objects it created: kubectl get persistentvolumeclaims,configmaps,jobs,datavolumes,virtualmachines -n apps -l migration.platform.example/migration=transferring -o yaml`,
			notWantErr: "before the source is stopped"},
		{name: "not asked, past the stop, the domain before the conversion", args: []string{"plan", "transferring", "--domain"}, wantCode: 1,
			wantErr: "no conversion domain yet: the conversion renders it in Converting (phase TransferringDisks); kubectl vmm plan transferring -n apps --domain shows it then"},
		{name: "not asked, the domain the conversion used", args: []string{"plan", "importing", "--domain"}, wantOut: `<domain type="kvm">`},
		{name: "not asked, the conversion's ConfigMap deleted by the cleanup", args: []string{"plan", "succeeded", "--domain"}, wantCode: 1,
			wantErr: "the conversion's domain was in ConfigMap succeeded-convert-1-domain, deleted with the staging objects (spec.policy.cleanup: Delete); a migration made with spec.policy.cleanup: Retain keeps it"},
		{name: "not yet", args: []string{"plan", "validating"}, wantCode: 1, wantErr: "has no plan yet (phase Validating)"},
		{name: "missing configmap", args: []string{"plan", "orphan"}, wantCode: 1, wantErr: "the plan ConfigMap orphan-plan named in status.plan is missing"},
		// A plan-first migration that ran: its cleanup deleted the plan
		// ConfigMap, status.plan keeps the list of objects (issue 25: an
		// error about a missing plan).
		{name: "after the run", args: []string{"plan", "plan-ran"}, golden: "plan-ran"},
		{name: "after the run, status still naming the ConfigMap", args: []string{"plan", "plan-ran-older"}, wantOut: "its cleanup deleted the plan's ConfigMap"},
		{name: "after the run, as yaml", args: []string{"plan", "plan-ran", "-o", "yaml"}, wantCode: 1,
			wantErr: "the plan of virtualmachinemigration.migration.platform.example \"plan-ran\" was carried out (phase Succeeded) and its ConfigMap deleted with the staging objects (spec.policy.cleanup: Delete), its objects' YAML with it: kubectl vmm plan plan-ran -n apps lists them; the objects the run created: kubectl get"},
		{name: "after the run, the domain", args: []string{"plan", "plan-ran", "--domain"}, wantCode: 1,
			wantErr: "the plan of virtualmachinemigration.migration.platform.example \"plan-ran\" was carried out (phase Succeeded) and its ConfigMap deleted with the staging objects (spec.policy.cleanup: Delete); the conversion's domain was in ConfigMap plan-ran-convert-1-domain, deleted with the staging objects"},
		{name: "being carried out", args: []string{"plan", "plan-running"}, wantOut: "The migration is carrying out this plan (phase TransferringDisks): these 14 objects, in creation order:"},
		// Refused by the dry run before the stop: no stored plan, the API
		// server's answer per object.
		{name: "refused by the dry run", args: []string{"plan", "refused"}, golden: "plan-dry-run"},
		{name: "refused by the dry run, as yaml", args: []string{"plan", "refused", "-o", "yaml"}, wantCode: 1,
			wantErr:    `has no plan: it ended (phase Failed) without one; kubectl vmm plan refused -n apps shows the API server's answer to the dry run of each object it would create, and a migration created with kubectl vmm create ... --plan-only stores its plan first`,
			notWantErr: "kubectl patch"},
	}
	validating := all["validating"]
	validating.Spec.PlanOnly = true
	orphan := inPhase("orphan", v1alpha1.PhasePlanned, withPlan)
	older := inPhase("plan-ran-older", v1alpha1.PhaseSucceeded, withPlan, planRan, succeeded)
	older.Status.Plan.ConfigMapName = naming.PlanConfigMap(older.Name)
	running := inPhase("plan-running", v1alpha1.PhaseTransferringDisks, withPlan, func(m *v1alpha1.VirtualMachineMigration) { m.Spec.PlanOnly = false })
	migrations := objects(planned, all["transferring"], all["queued"], all["importing"], all["succeeded"], validating, orphan, all["plan-ran"], older, running, all["refused"])
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, migrations, planConfigMap(t, planned), planConfigMap(t, running), conversionConfigMap(all["importing"]))
			require.Equal(t, tc.wantCode, h.run(context.Background(), tc.args...), "exit code (stderr %q)", h.errOut)
			if tc.golden != "" {
				golden(t, tc.golden, h.out.Bytes())
			}
			assert.Contains(t, h.out.String(), tc.wantOut, "stdout")
			assert.Contains(t, h.errOut.String(), tc.wantErr, "stderr")
			if tc.notWantErr != "" {
				assert.NotContains(t, h.errOut.String(), tc.notWantErr, "stderr: advice that cannot apply")
			}
			assert.NotContains(t, strings.TrimSpace(h.errOut.String()), "\n", "stderr is more than one line")
		})
	}
}
