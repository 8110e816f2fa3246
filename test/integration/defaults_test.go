//go:build integration

package integration

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	migrationv1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/test/framework"
)

// TestDefaultsApplied creates the smallest valid migration and checks every
// default the API server fills in.
func TestDefaultsApplied(t *testing.T) {
	env := framework.Env(t)
	ns := env.Namespace(t)
	createAndGet(t, env, ns, newMigration("minimal"))

	got, err := migrationClient(t, env).MigrationV1alpha1().VirtualMachineMigrations(ns).Get(testContext(t), "minimal", metav1.GetOptions{})
	require.NoError(t, err, "getting the migration")
	assertDefaults(t, &got.Spec)
	// Fields without a default stay unset.
	const notDefaulted = "%s has no default, but was set"
	assert.Empty(t, got.Spec.Target.Name, notDefaulted, "spec.target.name")
	assert.False(t, got.Spec.Conversion.Skip, notDefaulted, "spec.conversion.skip")
	assert.False(t, got.Spec.Policy.RequireApproval, notDefaulted, "spec.policy.requireApproval")
	assert.False(t, got.Spec.Policy.Paused, notDefaulted, "spec.policy.paused")
}

// assertDefaults asserts that every defaulted field of spec holds its
// documented default. Pointers are compared as ptrString renders them,
// so that an unset field fails as <unset>.
func assertDefaults(t *testing.T, spec *migrationv1alpha1.VirtualMachineMigrationSpec) {
	t.Helper()
	const msg = "spec.%s, want its default"
	assert.Equal(t, "true", ptrString(spec.Target.Start), msg, "target.start")
	assert.Equal(t, "true", ptrString(spec.Target.PreserveMACAddresses), msg, "target.preserveMACAddresses")
	assert.Equal(t, "10", ptrString(spec.Staging.SizeOverheadPercent), msg, "staging.sizeOverheadPercent")
	assert.Equal(t, migrationv1alpha1.ShutdownModeGuestThenPowerOff, spec.Policy.Shutdown.Mode, msg, "policy.shutdown.mode")
	assertDuration(t, 5*time.Minute, spec.Policy.Shutdown.Timeout, msg, "policy.shutdown.timeout")
	assert.Equal(t, "3", ptrString(spec.Policy.Retry.Limit), msg, "policy.retry.limit")
	assertDuration(t, 24*time.Hour, spec.Policy.Retry.Deadline, msg, "policy.retry.deadline")
	assert.Equal(t, migrationv1alpha1.CleanupPolicyDelete, spec.Policy.Cleanup, msg, "policy.cleanup")
	assertDuration(t, 30*time.Minute, spec.Policy.StallTimeout, msg, "policy.stallTimeout")
	assertDuration(t, 10*time.Minute, spec.Policy.StartTimeout, msg, "policy.startTimeout")
}

// assertDefaultsFilled asserts that no defaulted field of spec is unset:
// an example may choose other values, but the API server must fill every
// one.
func assertDefaultsFilled(t *testing.T, spec *migrationv1alpha1.VirtualMachineMigrationSpec) {
	t.Helper()
	const msg = "spec.%s not defaulted"
	assert.NotNil(t, spec.Target.Start, msg, "target.start")
	assert.NotNil(t, spec.Target.PreserveMACAddresses, msg, "target.preserveMACAddresses")
	assert.NotNil(t, spec.Staging.SizeOverheadPercent, msg, "staging.sizeOverheadPercent")
	assert.NotEmpty(t, spec.Policy.Shutdown.Mode, msg, "policy.shutdown.mode")
	assert.NotNil(t, spec.Policy.Shutdown.Timeout, msg, "policy.shutdown.timeout")
	assert.NotNil(t, spec.Policy.Retry.Limit, msg, "policy.retry.limit")
	assert.NotNil(t, spec.Policy.Retry.Deadline, msg, "policy.retry.deadline")
	assert.NotEmpty(t, spec.Policy.Cleanup, msg, "policy.cleanup")
	assert.NotNil(t, spec.Policy.StallTimeout, msg, "policy.stallTimeout")
	assert.NotNil(t, spec.Policy.StartTimeout, msg, "policy.startTimeout")
}

// assertDuration asserts that d is set to want (compared as the
// durations' text, so that an unset d fails as <unset>).
func assertDuration(t *testing.T, want time.Duration, d *migrationv1alpha1.Duration, msgAndArgs ...any) bool {
	t.Helper()
	got := "<unset>"
	if d != nil {
		got = d.Duration.String()
	}
	return assert.Equal(t, want.String(), got, msgAndArgs...)
}

// ptrString renders *p, or <unset> for nil.
func ptrString[T any](p *T) string {
	if p == nil {
		return "<unset>"
	}
	return fmt.Sprint(*p)
}

// TestValidSpecsAccepted creates valid migrations that use every selector
// and most options, and checks that explicit values survive defaulting.
func TestValidSpecsAccepted(t *testing.T) {
	env := framework.Env(t)
	ns := env.Namespace(t)
	typed := migrationClient(t, env).MigrationV1alpha1().VirtualMachineMigrations(ns)

	tests := []struct {
		name  string
		mods  []modifier
		check func(t *testing.T, spec *migrationv1alpha1.VirtualMachineMigrationSpec)
	}{
		{name: "by inventory path", mods: []modifier{set("spec.source.vm", map[string]any{"inventoryPath": "/dc1/vm/prod/web-01"})}},
		{name: "by BIOS UUID", mods: []modifier{set("spec.source.vm", map[string]any{"biosUUID": "4221c0b6-8f3a-4e8b-9d6c-0a1b2c3d4e5f"})}},
		{name: "by BIOS UUID without dashes", mods: []modifier{set("spec.source.vm", map[string]any{"biosUUID": "4221C0B68F3A4E8B9D6C0A1B2C3D4E5F"})}},
		{name: "by instance UUID", mods: []modifier{set("spec.source.vm", map[string]any{"instanceUUID": "5021c0b6-8f3a-4e8b-9d6c-0a1b2c3d4e5f"})}},
		{name: "by moRef", mods: []modifier{set("spec.source.vm", map[string]any{"moRef": "vm-42"})}},
		{name: "by bare moRef number", mods: []modifier{set("spec.source.vm", map[string]any{"moRef": "42"})}},
		{name: "ESXi host with port and datacenter", mods: []modifier{set("spec.source.url", "https://esxi-01.lab.example:8443/sdk"), set("spec.source.datacenter", "ha-datacenter"), set("spec.source.insecureSkipVerify", true)}},
		{name: "URL by IP address", mods: []modifier{set("spec.source.url", "https://192.0.2.10/sdk")}},
		{
			name: "every option set away from its default",
			mods: []modifier{
				set("spec.target", map[string]any{
					"name":                 "web-01-kv",
					"start":                false,
					"preserveMACAddresses": false,
					"waitForGuestAgent":    true,
					"storage": map[string]any{
						"default":    map[string]any{"storageClassName": "ceph-rbd", "volumeMode": "Block", "accessModes": []any{"ReadWriteMany"}},
						"datastores": []any{map[string]any{"datastore": "datastore1", "target": map[string]any{"storageClassName": "fast.ssd"}}},
						"disks":      []any{map[string]any{"diskKey": int64(2000), "target": map[string]any{"volumeMode": "Filesystem"}}},
					},
				}),
				networks(network("VM Network", "Pod", ""), network("Prod VLAN 10", "Multus", "networking/vlan10"), network("Backup", "Multus", "backup-net"), network("iSCSI", "Ignore", "")),
				set("spec.staging", map[string]any{"storageClassName": "local-path", "sizeOverheadPercent": int64(0)}),
				set("spec.conversion", map[string]any{"skip": true, "image": "registry.example.com/virt-v2v@sha256:" + strings.Repeat("ab", 32)}),
				set("spec.policy", map[string]any{
					"shutdown":        map[string]any{"mode": "PowerOff", "timeout": "90s"},
					"retry":           map[string]any{"limit": int64(0), "deadline": "1h30m"},
					"cleanup":         "Retain",
					"requireApproval": true,
					"approved":        false,
					"paused":          true,
					"stallTimeout":    "1.5h",
					"startTimeout":    "500ms",
				}),
			},
			check: func(t *testing.T, s *migrationv1alpha1.VirtualMachineMigrationSpec) {
				const zeroes = "%s: an explicit false/0 was overwritten by its default"
				assert.Equal(t, "false", ptrString(s.Target.Start), zeroes, "target.start")
				assert.Equal(t, "false", ptrString(s.Target.PreserveMACAddresses), zeroes, "target.preserveMACAddresses")
				assert.Equal(t, "0", ptrString(s.Staging.SizeOverheadPercent), zeroes, "staging.sizeOverheadPercent")
				assert.Equal(t, "0", ptrString(s.Policy.Retry.Limit), zeroes, "policy.retry.limit")
				assert.Equal(t, migrationv1alpha1.ShutdownModePowerOff, s.Policy.Shutdown.Mode, "enum overwritten: shutdown.mode")
				assert.Equal(t, migrationv1alpha1.CleanupPolicyRetain, s.Policy.Cleanup, "enum overwritten: cleanup")
				assertDuration(t, 90*time.Second, s.Policy.Shutdown.Timeout, "duration changed: policy.shutdown.timeout")
				assertDuration(t, 90*time.Minute, s.Policy.Retry.Deadline, "duration changed: policy.retry.deadline")
				assertDuration(t, 90*time.Minute, s.Policy.StallTimeout, "duration changed: policy.stallTimeout")
				assertDuration(t, 500*time.Millisecond, s.Policy.StartTimeout, "duration changed: policy.startTimeout")
				if assert.Len(t, s.Target.Networks, 4, "networks") {
					assert.Equal(t, "networking/vlan10", s.Target.Networks[1].MultusNetworkName, "networks[1].multusNetworkName: %+v", s.Target.Networks)
				}
			},
		},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("valid-%d", i)
			createAndGet(t, env, ns, newMigration(name, tc.mods...))
			got, err := typed.Get(testContext(t), name, metav1.GetOptions{})
			require.NoError(t, err, "getting %s", name)
			assertDefaultsFilled(t, &got.Spec)
			if tc.check != nil {
				tc.check(t, &got.Spec)
			}
		})
	}
}

// TestDocumentedExamplesAccepted creates every VirtualMachineMigration
// shown in manifests/, README.md, docs/ and examples/, as a user would
// with kubectl apply (strict field validation), and checks the defaults.
func TestDocumentedExamplesAccepted(t *testing.T) {
	env := framework.Env(t)
	examples, err := findExamples(framework.RepoPath(""))
	require.NoError(t, err, "finding examples")
	if len(examples) == 0 {
		t.Skip("no VirtualMachineMigration examples in manifests/, README.md, docs/ or examples/ yet")
	}
	ns := env.Namespace(t)
	client := migrations(t, env, ns)
	typed := migrationClient(t, env).MigrationV1alpha1().VirtualMachineMigrations(ns)
	for _, ex := range examples {
		t.Run(ex.where, func(t *testing.T) {
			ctx := testContext(t)
			obj := ex.obj.DeepCopy()
			obj.SetNamespace(ns)
			created, err := client.Create(ctx, obj, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
			require.NoError(t, err, "the example is rejected")
			got, err := typed.Get(ctx, created.GetName(), metav1.GetOptions{})
			require.NoError(t, err, "getting %s", created.GetName())
			assertDefaultsFilled(t, &got.Spec)
			// Examples may share a name; make room for the next one.
			require.NoError(t, client.Delete(ctx, created.GetName(), metav1.DeleteOptions{}), "deleting %s", created.GetName())
		})
	}
}

// example is one VirtualMachineMigration document found in the repository.
type example struct {
	where string
	obj   *unstructured.Unstructured
}

// findExamples collects the VirtualMachineMigration documents in YAML
// files under manifests/ and examples/, and in yaml code blocks of README.md
// and docs/**/*.md.
func findExamples(root string) ([]example, error) {
	var out []example
	add := func(where string, content []byte) error {
		objs, err := framework.DecodeObjects(content)
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		n := 0
		for _, o := range objs {
			if o.GetKind() != "VirtualMachineMigration" {
				continue
			}
			n++
			out = append(out, example{where: fmt.Sprintf("%s#%d %s", where, n, o.GetName()), obj: o})
		}
		return nil
	}
	walk := func(dir string, match func(path string) bool, extract func([]byte) [][]byte) error {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) {
					return filepath.SkipDir
				}
				return err
			}
			if d.IsDir() || !match(path) {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			for i, block := range extract(b) {
				where := rel
				if strings.HasSuffix(path, ".md") {
					where = fmt.Sprintf("%s yaml block %d", rel, i+1)
				}
				if !bytes.Contains(block, []byte("VirtualMachineMigration")) {
					continue
				}
				if err := add(where, block); err != nil {
					return err
				}
			}
			return nil
		})
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	isYAML := func(p string) bool { return strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml") }
	isMarkdown := func(p string) bool { return strings.HasSuffix(p, ".md") }
	whole := func(b []byte) [][]byte { return [][]byte{b} }
	for _, d := range []string{"manifests", "examples"} {
		if err := walk(d, isYAML, whole); err != nil {
			return nil, err
		}
	}
	if err := walk("docs", isMarkdown, yamlBlocks); err != nil {
		return nil, err
	}
	if b, err := os.ReadFile(filepath.Join(root, "README.md")); err == nil {
		for i, block := range yamlBlocks(b) {
			if bytes.Contains(block, []byte("VirtualMachineMigration")) {
				if err := add(fmt.Sprintf("README.md yaml block %d", i+1), block); err != nil {
					return nil, err
				}
			}
		}
	}
	return out, nil
}

// yamlBlocks returns the contents of the ```yaml and ```yml fenced code
// blocks of a Markdown document.
func yamlBlocks(md []byte) [][]byte {
	var blocks [][]byte
	var cur *bytes.Buffer
	for _, line := range strings.SplitAfter(string(md), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && (trimmed == "```yaml" || trimmed == "```yml"):
			cur = &bytes.Buffer{}
		case cur != nil && trimmed == "```":
			blocks = append(blocks, cur.Bytes())
			cur = nil
		case cur != nil:
			cur.WriteString(line)
		}
	}
	return blocks
}
