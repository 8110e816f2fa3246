//go:build integration

package integration

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"platform.example/vm-migration/test/framework"
)

// TestCreateRejectsInvalidSpecs creates invalid migrations and checks that
// the API server refuses each with a message that names the field and says
// what is wrong.
func TestCreateRejectsInvalidSpecs(t *testing.T) {
	env := framework.Env(t)
	ns := env.Namespace(t)
	client := migrations(t, env, ns)

	tooManyNetworks := make([]map[string]any, 65)
	for i := range tooManyNetworks {
		tooManyNetworks[i] = network(fmt.Sprintf("net-%d", i), "Pod", "")
	}

	tests := []struct {
		name string
		mods []modifier
		// strict creates with fieldValidation=Strict, as kubectl does.
		strict bool
		// wantCode is the HTTP status; 422 (Invalid) when zero.
		wantCode int32
		// want are substrings of the error message.
		want []string
	}{
		{
			name: "no VM selector",
			mods: []modifier{set("spec.source.vm", map[string]any{})},
			want: []string{"spec.source.vm", "source.vm must set exactly one of name, inventoryPath, biosUUID, instanceUUID or moRef"},
		},
		{
			name: "two VM selectors",
			mods: []modifier{set("spec.source.vm", map[string]any{"name": "web-01", "moRef": "vm-42"})},
			want: []string{"source.vm must set exactly one of name, inventoryPath, biosUUID, instanceUUID or moRef"},
		},
		{
			name: "VM selector missing",
			mods: []modifier{del("spec.source.vm")},
			want: []string{"spec.source.vm: Required value"},
		},
		{
			name: "URL missing",
			mods: []modifier{del("spec.source.url")},
			want: []string{"spec.source.url: Required value"},
		},
		{
			name: "URL not https",
			mods: []modifier{set("spec.source.url", "http://vcenter.example.com/sdk")},
			want: []string{"spec.source.url", "source.url must be an https URL with a host, for example https://vcenter.example.com/sdk"},
		},
		{
			name: "URL without host",
			mods: []modifier{set("spec.source.url", "https:///sdk")},
			want: []string{"spec.source.url", "source.url must be an https URL with a host"},
		},
		{
			name: "URL not a URL",
			mods: []modifier{set("spec.source.url", "vcenter.example.com/sdk")},
			want: []string{"spec.source.url", "source.url must be an https URL with a host"},
		},
		{
			name: "URL too long",
			mods: []modifier{set("spec.source.url", "https://vcenter.example.com/"+strings.Repeat("a", 2030))},
			want: []string{"spec.source.url", "Too long", "2048"},
		},
		{
			name: "credentials Secret missing",
			mods: []modifier{del("spec.source.credentialsSecretRef")},
			want: []string{"spec.source.credentialsSecretRef: Required value"},
		},
		{
			name: "credentials Secret name not DNS-1123",
			mods: []modifier{set("spec.source.credentialsSecretRef.name", "vCenter Creds")},
			want: []string{"spec.source.credentialsSecretRef.name", "should match"},
		},
		{
			name: "VM name empty",
			mods: []modifier{set("spec.source.vm.name", "")},
			want: []string{"spec.source.vm.name", "at least 1 chars long"},
		},
		{
			name: "VM name too long",
			mods: []modifier{set("spec.source.vm.name", strings.Repeat("w", 81))},
			want: []string{"spec.source.vm.name", "Too long", "80"},
		},
		{
			name: "inventory path not absolute",
			mods: []modifier{set("spec.source.vm", map[string]any{"inventoryPath": "dc1/vm/web-01"})},
			want: []string{"spec.source.vm.inventoryPath", "should match '^/.+'"},
		},
		{
			name: "BIOS UUID malformed",
			mods: []modifier{set("spec.source.vm", map[string]any{"biosUUID": "4221-not-a-uuid"})},
			want: []string{"spec.source.vm.biosUUID", "should match"},
		},
		{
			name: "instance UUID malformed",
			mods: []modifier{set("spec.source.vm", map[string]any{"instanceUUID": "zzzzzzzz-0000-0000-0000-000000000000"})},
			want: []string{"spec.source.vm.instanceUUID", "should match"},
		},
		{
			name: "moRef of a host, not a VM",
			mods: []modifier{set("spec.source.vm", map[string]any{"moRef": "host-12"})},
			want: []string{"spec.source.vm.moRef", "should match '^(vm-)?[0-9]+$'"},
		},
		{
			name: "datacenter too long",
			mods: []modifier{set("spec.source.datacenter", strings.Repeat("d", 256))},
			want: []string{"spec.source.datacenter", "Too long", "255"},
		},
		{
			name: "target name not DNS-1123",
			mods: []modifier{set("spec.target.name", "Web_01")},
			want: []string{"spec.target.name", "must be a DNS-1123 label"},
		},
		{
			name: "target name too long",
			mods: []modifier{set("spec.target.name", strings.Repeat("v", 64))},
			want: []string{"spec.target.name", "Too long", "63"},
		},
		{
			name: "staging overhead negative",
			mods: []modifier{set("spec.staging.sizeOverheadPercent", int64(-1))},
			want: []string{"spec.staging.sizeOverheadPercent", "should be greater than or equal to 0"},
		},
		{
			name: "staging overhead over 100",
			mods: []modifier{set("spec.staging.sizeOverheadPercent", int64(101))},
			want: []string{"spec.staging.sizeOverheadPercent", "should be less than or equal to 100"},
		},
		{
			name: "staging overhead not a number",
			mods: []modifier{set("spec.staging.sizeOverheadPercent", "ten")},
			want: []string{"spec.staging.sizeOverheadPercent", "must be of type integer"},
		},
		{
			name: "staging storage class not DNS-1123",
			mods: []modifier{set("spec.staging.storageClassName", "Fast_SSD")},
			want: []string{"spec.staging.storageClassName", "should match"},
		},
		{
			name: "retry limit negative",
			mods: []modifier{set("spec.policy.retry.limit", int64(-1))},
			want: []string{"spec.policy.retry.limit", "should be greater than or equal to 0"},
		},
		{
			name: "retry limit over 100",
			mods: []modifier{set("spec.policy.retry.limit", int64(1000))},
			want: []string{"spec.policy.retry.limit", "should be less than or equal to 100"},
		},
		{
			name: "network type unknown",
			mods: []modifier{networks(network("VM Network", "Bridge", ""))},
			want: []string{"spec.target.networks[0].type", `Unsupported value: "Bridge"`, `"Pod", "Multus", "Ignore"`},
		},
		{
			name: "Multus mapping without network name",
			mods: []modifier{networks(network("VM Network", "Multus", ""))},
			want: []string{"spec.target.networks[0]", "multusNetworkName is required with type Multus and not allowed otherwise"},
		},
		{
			name: "Pod mapping with a Multus network name",
			mods: []modifier{networks(network("VM Network", "Pod", "br-prod"))},
			want: []string{"spec.target.networks[0]", "multusNetworkName is required with type Multus and not allowed otherwise"},
		},
		{
			name: "Multus network name malformed",
			mods: []modifier{networks(network("VM Network", "Multus", "Other_NS/br0"))},
			want: []string{"spec.target.networks[0].multusNetworkName", "should match"},
		},
		{
			name: "network mapped twice",
			mods: []modifier{networks(network("VM Network", "Pod", ""), network("VM Network", "Ignore", ""))},
			want: []string{"spec.target.networks[1]", "Duplicate value"},
		},
		{
			name: "too many network mappings",
			mods: []modifier{networks(tooManyNetworks...)},
			want: []string{"spec.target.networks", "Too many", "64"},
		},
		{
			name: "volume mode unknown",
			mods: []modifier{set("spec.target.storage.default", map[string]any{"volumeMode": "Raw"})},
			want: []string{"spec.target.storage.default.volumeMode", `Unsupported value: "Raw"`, `"Filesystem", "Block"`},
		},
		{
			name: "access mode unknown",
			mods: []modifier{set("spec.target.storage.default", map[string]any{"accessModes": []any{"ReadWriteSometimes"}})},
			want: []string{"spec.target.storage.default.accessModes[0]", `Unsupported value: "ReadWriteSometimes"`},
		},
		{
			name: "disk key negative",
			mods: []modifier{set("spec.target.storage.disks", []any{map[string]any{"diskKey": int64(-1), "target": map[string]any{}}})},
			want: []string{"spec.target.storage.disks[0].diskKey", "should be greater than or equal to 0"},
		},
		{
			name: "conversion image with spaces",
			mods: []modifier{set("spec.conversion.image", "quay.io/virt v2v:latest")},
			want: []string{"spec.conversion.image", "should match"},
		},
		{
			name: "shutdown mode unknown",
			mods: []modifier{set("spec.policy.shutdown.mode", "Hard")},
			want: []string{"spec.policy.shutdown.mode", `Unsupported value: "Hard"`, `"GuestThenPowerOff", "PowerOff"`},
		},
		{
			name: "cleanup policy unknown",
			mods: []modifier{set("spec.policy.cleanup", "Keep")},
			want: []string{"spec.policy.cleanup", `Unsupported value: "Keep"`, `"Delete", "Retain"`},
		},
		{
			name: "shutdown timeout in words",
			mods: []modifier{set("spec.policy.shutdown.timeout", "5 minutes")},
			want: []string{"spec.policy.shutdown.timeout", "must be a positive duration of at most 8760h"},
		},
		{
			name: "retry deadline in days",
			mods: []modifier{set("spec.policy.retry.deadline", "1d")},
			want: []string{"spec.policy.retry.deadline", "must be a positive duration of at most 8760h"},
		},
		{
			name: "stall timeout negative",
			mods: []modifier{set("spec.policy.stallTimeout", "-30m")},
			want: []string{"spec.policy.stallTimeout", "must be a positive duration of at most 8760h"},
		},
		{
			name: "start timeout without unit",
			mods: []modifier{set("spec.policy.startTimeout", "600")},
			want: []string{"spec.policy.startTimeout", "must be a positive duration of at most 8760h"},
		},
		{
			name: "stall timeout Go cannot hold",
			mods: []modifier{set("spec.policy.stallTimeout", "9999999999h")},
			want: []string{"spec.policy.stallTimeout", "must be a positive duration of at most 8760h"},
		},
		{
			name: "retry deadline over a year",
			mods: []modifier{set("spec.policy.retry.deadline", "8760h1s")},
			want: []string{"spec.policy.retry.deadline", "must be a positive duration of at most 8760h"},
		},
		{
			name:     "misspelt field, with kubectl's strict field validation",
			mods:     []modifier{set("spec.source.vmName", "web-01")},
			strict:   true,
			wantCode: http.StatusBadRequest,
			want:     []string{`unknown field "spec.source.vmName"`},
		},
	}
	require.GreaterOrEqual(t, len(tests), 20, "invalid specs: the suite promises at least 20")
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obj := newMigration(fmt.Sprintf("invalid-%d", i), tc.mods...)
			opts := metav1.CreateOptions{}
			if tc.strict {
				opts.FieldValidation = metav1.FieldValidationStrict
			}
			_, err := client.Create(testContext(t), obj, opts)
			require.Error(t, err, "created; want the API server to reject it with %q", tc.want)
			t.Logf("rejected: %v", err)
			wantCode := tc.wantCode
			if wantCode == 0 {
				wantCode = http.StatusUnprocessableEntity
			}
			assert.Equal(t, wantCode, apiStatusCode(err), "HTTP status (reason %s): %v", apierrors.ReasonForError(err), err)
			for _, want := range tc.want {
				assert.ErrorContains(t, err, want, "error message lacks %q", want)
			}
		})
	}
}

// TestClosedValidationGaps checks specs an earlier CRD accepted although it
// should not have (zero durations, credentials in the URL): they stay
// rejected.
func TestClosedValidationGaps(t *testing.T) {
	env := framework.Env(t)
	ns := env.Namespace(t)
	client := migrations(t, env, ns)
	tests := []struct {
		name  string
		mods  []modifier
		field string
		why   string
	}{
		{
			name:  "zero shutdown timeout",
			mods:  []modifier{set("spec.policy.shutdown.timeout", "0s")},
			field: "spec.policy.shutdown.timeout",
			why:   `the duration rule's message says "positive" but its pattern accepts 0s (and 0m, 0h)`,
		},
		{
			name:  "zero retry deadline",
			mods:  []modifier{set("spec.policy.retry.deadline", "0m")},
			field: "spec.policy.retry.deadline",
			why:   "a zero deadline means no retry ever; the message promises a positive duration",
		},
		{
			name:  "credentials embedded in the URL",
			mods:  []modifier{set("spec.source.url", "https://administrator:secret@vcenter.example.com/sdk")},
			field: "spec.source.url",
			why:   "user:password in source.url puts credentials in the spec, readable by anyone who can get the migration; credentialsSecretRef exists for that",
		},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.Create(testContext(t), newMigration(fmt.Sprintf("gap-%d", i), tc.mods...), metav1.CreateOptions{})
			require.Error(t, err, "accepted, but this gap was closed in the CRD and must stay closed: %s", tc.why)
			assert.ErrorContains(t, err, tc.field, "rejected, but the message does not name %s", tc.field)
		})
	}
}

// TestUpdateRejectsSourceChanges checks the immutability rules on the
// source, and that the fields meant to change after creation can.
func TestUpdateRejectsSourceChanges(t *testing.T) {
	env := framework.Env(t)
	ns := env.Namespace(t)
	client := migrations(t, env, ns)

	tests := []struct {
		name   string
		create []modifier
		update []modifier
		// want are substrings of the error; none means the update is allowed.
		want []string
		// gap, when set, turns an accepted update into a skip: a known CRD gap.
		gap string
	}{
		{
			name:   "VM name changed",
			update: []modifier{set("spec.source.vm.name", "web-02")},
			want:   []string{"spec.source.vm", "source.vm is immutable: the source selection cannot change once set; create a new migration instead"},
		},
		{
			name:   "VM selector switched from name to moRef",
			update: []modifier{set("spec.source.vm", map[string]any{"moRef": "vm-42"})},
			want:   []string{"spec.source.vm", "source.vm is immutable"},
		},
		{
			name:   "URL changed",
			update: []modifier{set("spec.source.url", "https://other-vcenter.example.com/sdk")},
			want:   []string{"spec.source.url", "source.url is immutable: create a new migration to migrate from another endpoint"},
		},
		{
			name:   "datacenter changed",
			create: []modifier{set("spec.source.datacenter", "dc1")},
			update: []modifier{set("spec.source.datacenter", "dc2")},
			want:   []string{"spec.source.datacenter", "source.datacenter is immutable"},
		},
		{
			name:   "datacenter added after creation",
			update: []modifier{set("spec.source.datacenter", "dc2")},
			want:   []string{"spec.source", "source.datacenter is immutable: it cannot be added or removed"},
		},
		{
			name:   "datacenter removed after creation",
			create: []modifier{set("spec.source.datacenter", "dc1")},
			update: []modifier{del("spec.source.datacenter")},
			want:   []string{"spec.source", "source.datacenter is immutable: it cannot be added or removed"},
		},
		{
			name:   "update to an invalid value is rejected like a create",
			update: []modifier{set("spec.policy.shutdown.mode", "Hard")},
			want:   []string{"spec.policy.shutdown.mode", `Unsupported value: "Hard"`},
		},
		{
			name:   "credentials Secret rotated",
			update: []modifier{set("spec.source.credentialsSecretRef.name", "vcenter-credentials-2")},
		},
		{
			name:   "paused, approved and retry changed",
			update: []modifier{set("spec.policy.paused", true), set("spec.policy.approved", true), set("spec.policy.retry.limit", int64(5))},
		},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			created, err := client.Create(ctx, newMigration(fmt.Sprintf("update-%d", i), tc.create...), metav1.CreateOptions{})
			require.NoError(t, err, "creating")
			changed := created.DeepCopy()
			for _, m := range tc.update {
				m(changed.Object)
			}
			_, err = client.Update(ctx, changed, metav1.UpdateOptions{})
			switch {
			case len(tc.want) == 0:
				require.NoError(t, err, "update rejected, want it allowed")
			case err == nil && tc.gap != "":
				t.Skipf("known CRD validation gap, still open: accepted; %s", tc.gap)
			default:
				require.Error(t, err, "update accepted; want it rejected with %q", tc.want)
				assert.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
				for _, want := range tc.want {
					assert.ErrorContains(t, err, want, "error message lacks %q", want)
				}
			}
		})
	}
}

// apiStatusCode is the HTTP status code of an API error, 0 for others.
func apiStatusCode(err error) int32 {
	var s apierrors.APIStatus
	if !errors.As(err, &s) {
		return 0
	}
	return s.Status().Code
}

// createAndGet creates obj in client and returns it as stored.
func createAndGet(t *testing.T, env *framework.Environment, ns string, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	got, err := migrations(t, env, ns).Create(testContext(t), obj, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
	require.NoError(t, err, "creating %s", obj.GetName())
	return got
}

// TestMigrationNameIsALabel checks that a migration's name must fit in a
// label value: every child carries it in LabelMigrationName.
func TestMigrationNameIsALabel(t *testing.T) {
	env := framework.Env(t)
	client := migrations(t, env, env.Namespace(t))
	for _, name := range []string{"web.01", strings.Repeat("a", 64)} {
		_, err := client.Create(testContext(t), newMigration(name), metav1.CreateOptions{})
		require.Error(t, err, "migration %q accepted; want it rejected", name)
		assert.ErrorContains(t, err, "must be a DNS-1123 label (at most 63", "migration %q: the error message", name)
	}
	_, err := client.Create(testContext(t), newMigration(strings.Repeat("a", 63)), metav1.CreateOptions{})
	require.NoError(t, err, "a 63-character name was rejected")
}
