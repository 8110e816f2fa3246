package naming

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var dns1123 = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

func TestChild(t *testing.T) {
	tests := map[string]struct {
		parent string
		suffix []string
		want   string
	}{
		"short":        {parent: "web", suffix: []string{"transfer", "1"}, want: "web-transfer-1"},
		"exactly 63":   {parent: strings.Repeat("a", 52), suffix: []string{"transfer", "1"}, want: strings.Repeat("a", 52) + "-transfer-1"},
		"no suffix":    {parent: "web", want: "web"},
		"two suffixes": {parent: "m", suffix: []string{"convert", "2", "domain"}, want: "m-convert-2-domain"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, tc.want, Child(tc.parent, tc.suffix...), "Child(%q, %q)", tc.parent, tc.suffix)
		})
	}
}

func TestChildLongNamesStayValidAndDistinct(t *testing.T) {
	long := strings.Repeat("migration-", 20)
	a := Child(long+"a", "transfer", "1")
	b := Child(long+"b", "transfer", "1")
	c := Child(long+"a", "transfer", "2")
	for _, n := range []string{a, b, c} {
		require.LessOrEqual(t, len(n), MaxNameLength, "%q is not a valid DNS-1123 label of at most 63 characters", n)
		require.Regexp(t, dns1123, n, "%q is not a valid DNS-1123 label of at most 63 characters", n)
	}
	require.NotEqual(t, a, b, "names collide: %q %q %q", a, b, c)
	require.NotEqual(t, a, c, "names collide: %q %q %q", a, b, c)
	require.True(t, strings.HasSuffix(a, "-transfer-1"), "%q lost its suffix -transfer-1", a)
	require.Equal(t, a, Child(long+"a", "transfer", "1"), "Child is not deterministic")
}

func TestDNS1123Label(t *testing.T) {
	tests := map[string]string{
		"Web Server 01":                     "web-server-01",
		"  --DB_primary--  ":                "db-primary",
		"ÜberVM":                            "bervm",
		"***":                               "vm",
		strings.Repeat("x", 80):             strings.Repeat("x", 63),
		"a" + strings.Repeat("-", 70) + "b": "a-b",
	}
	for in, want := range tests {
		got := DNS1123Label(in)
		assert.Equal(t, want, got, "DNS1123Label(%q)", in)
		assert.Regexp(t, dns1123, got, "DNS1123Label(%q) is not a DNS-1123 label", in)
	}
}

func TestChildNames(t *testing.T) {
	assert.Equal(t, "m-staging-2000", StagingClaim("m", 2000), "StagingClaim")
	assert.Equal(t, "m-transfer-3", TransferJob("m", 3), "TransferJob")
	assert.Equal(t, "m-convert-1", ConversionJob("m", 1), "ConversionJob")
	assert.Equal(t, "m-convert-1-domain", ConversionConfigMap("m", 1), "ConversionConfigMap")
	assert.Equal(t, "vm-disk-0", DataVolume("vm", 0), "DataVolume")
	assert.Equal(t, "disk-1", DiskName(1), "DiskName")
}

func TestPlanConfigMap(t *testing.T) {
	tests := map[string]struct {
		migration string
		want      string
	}{
		"short": {migration: "web-01", want: "web-01-plan"},
		"long":  {migration: strings.Repeat("m", 63), want: Child(strings.Repeat("m", 63), "plan")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := PlanConfigMap(tc.migration)
			assert.Equal(t, tc.want, got, "PlanConfigMap(%q)", tc.migration)
			assert.LessOrEqual(t, len(got), MaxNameLength, "PlanConfigMap(%q) = %q is longer than a DNS-1123 label", tc.migration, got)
			assert.Regexp(t, dns1123, got, "PlanConfigMap(%q) = %q is not a DNS-1123 label", tc.migration, got)
		})
	}
}

func TestProofComponent(t *testing.T) {
	for job, want := range map[string]string{
		ProofJob("transfer", "dc3f4f301862f457"):   "transfer",
		ProofJob("conversion", "dc3f4f301862f457"): "conversion",
		TransferJob("web-01", 1):                   "",
		"vmm-proof":                                "",
		"vmm-proofs-transfer-1":                    "",
	} {
		assert.Equal(t, want, ProofComponent(job), job)
	}
}
