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
	if err != nil {
		t.Fatalf("getting the migration: %v", err)
	}
	for _, problem := range defaultProblems(&got.Spec) {
		t.Error(problem)
	}
	// Fields without a default stay unset.
	if got.Spec.Target.Name != "" || got.Spec.Conversion.Skip || got.Spec.Policy.RequireApproval || got.Spec.Policy.Paused {
		t.Errorf("fields without a default were set: target.name %q, conversion.skip %v, requireApproval %v, paused %v",
			got.Spec.Target.Name, got.Spec.Conversion.Skip, got.Spec.Policy.RequireApproval, got.Spec.Policy.Paused)
	}
}

// defaultProblems lists the defaulted fields of spec that do not hold
// their documented default.
func defaultProblems(spec *migrationv1alpha1.VirtualMachineMigrationSpec) []string {
	var p []string
	check := func(field string, ok bool, got any, want any) {
		if !ok {
			p = append(p, fmt.Sprintf("spec.%s = %v, want default %v", field, got, want))
		}
	}
	check("target.start", spec.Target.Start != nil && *spec.Target.Start, ptrString(spec.Target.Start), true)
	check("target.preserveMACAddresses", spec.Target.PreserveMACAddresses != nil && *spec.Target.PreserveMACAddresses, ptrString(spec.Target.PreserveMACAddresses), true)
	check("staging.sizeOverheadPercent", spec.Staging.SizeOverheadPercent != nil && *spec.Staging.SizeOverheadPercent == 10, ptrString(spec.Staging.SizeOverheadPercent), 10)
	check("policy.shutdown.mode", spec.Policy.Shutdown.Mode == migrationv1alpha1.ShutdownModeGuestThenPowerOff, spec.Policy.Shutdown.Mode, migrationv1alpha1.ShutdownModeGuestThenPowerOff)
	check("policy.shutdown.timeout", durationIs(spec.Policy.Shutdown.Timeout, 5*time.Minute), spec.Policy.Shutdown.Timeout, "5m")
	check("policy.retry.limit", spec.Policy.Retry.Limit != nil && *spec.Policy.Retry.Limit == 3, ptrString(spec.Policy.Retry.Limit), 3)
	check("policy.retry.deadline", durationIs(spec.Policy.Retry.Deadline, 24*time.Hour), spec.Policy.Retry.Deadline, "24h")
	check("policy.cleanup", spec.Policy.Cleanup == migrationv1alpha1.CleanupPolicyDelete, spec.Policy.Cleanup, migrationv1alpha1.CleanupPolicyDelete)
	check("policy.stallTimeout", durationIs(spec.Policy.StallTimeout, 30*time.Minute), spec.Policy.StallTimeout, "30m")
	check("policy.startTimeout", durationIs(spec.Policy.StartTimeout, 10*time.Minute), spec.Policy.StartTimeout, "10m")
	return p
}

// setFieldsProblems lists the defaulted fields of spec that are unset: an
// example may choose other values, but the API server must fill every one.
func setFieldsProblems(spec *migrationv1alpha1.VirtualMachineMigrationSpec) []string {
	var p []string
	if spec.Target.Start == nil {
		p = append(p, "spec.target.start not defaulted")
	}
	if spec.Target.PreserveMACAddresses == nil {
		p = append(p, "spec.target.preserveMACAddresses not defaulted")
	}
	if spec.Staging.SizeOverheadPercent == nil {
		p = append(p, "spec.staging.sizeOverheadPercent not defaulted")
	}
	if spec.Policy.Shutdown.Mode == "" || spec.Policy.Shutdown.Timeout == nil {
		p = append(p, "spec.policy.shutdown not defaulted")
	}
	if spec.Policy.Retry.Limit == nil || spec.Policy.Retry.Deadline == nil {
		p = append(p, "spec.policy.retry not defaulted")
	}
	if spec.Policy.Cleanup == "" || spec.Policy.StallTimeout == nil || spec.Policy.StartTimeout == nil {
		p = append(p, "spec.policy cleanup/stallTimeout/startTimeout not defaulted")
	}
	return p
}

func durationIs(d *metav1.Duration, want time.Duration) bool {
	return d != nil && d.Duration == want
}

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
				if *s.Target.Start || *s.Target.PreserveMACAddresses || *s.Staging.SizeOverheadPercent != 0 || *s.Policy.Retry.Limit != 0 {
					t.Errorf("explicit false/0 values were overwritten by defaults: start %v, preserveMACAddresses %v, sizeOverheadPercent %d, retry.limit %d",
						*s.Target.Start, *s.Target.PreserveMACAddresses, *s.Staging.SizeOverheadPercent, *s.Policy.Retry.Limit)
				}
				if s.Policy.Shutdown.Mode != migrationv1alpha1.ShutdownModePowerOff || s.Policy.Cleanup != migrationv1alpha1.CleanupPolicyRetain {
					t.Errorf("enums overwritten: shutdown.mode %q, cleanup %q", s.Policy.Shutdown.Mode, s.Policy.Cleanup)
				}
				if !durationIs(s.Policy.Shutdown.Timeout, 90*time.Second) || !durationIs(s.Policy.Retry.Deadline, 90*time.Minute) ||
					!durationIs(s.Policy.StallTimeout, 90*time.Minute) || !durationIs(s.Policy.StartTimeout, 500*time.Millisecond) {
					t.Errorf("durations changed: %v %v %v %v", s.Policy.Shutdown.Timeout, s.Policy.Retry.Deadline, s.Policy.StallTimeout, s.Policy.StartTimeout)
				}
				if len(s.Target.Networks) != 4 || s.Target.Networks[1].MultusNetworkName != "networking/vlan10" {
					t.Errorf("networks: %+v", s.Target.Networks)
				}
			},
		},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("valid-%d", i)
			createAndGet(t, env, ns, newMigration(name, tc.mods...))
			got, err := typed.Get(testContext(t), name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("getting: %v", err)
			}
			for _, p := range setFieldsProblems(&got.Spec) {
				t.Error(p)
			}
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
	if err != nil {
		t.Fatalf("finding examples: %v", err)
	}
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
			if err != nil {
				t.Fatalf("the example is rejected: %v", err)
			}
			got, err := typed.Get(ctx, created.GetName(), metav1.GetOptions{})
			if err != nil {
				t.Fatalf("getting: %v", err)
			}
			for _, p := range setFieldsProblems(&got.Spec) {
				t.Error(p)
			}
			// Examples may share a name; make room for the next one.
			if err := client.Delete(ctx, created.GetName(), metav1.DeleteOptions{}); err != nil {
				t.Fatalf("deleting: %v", err)
			}
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
