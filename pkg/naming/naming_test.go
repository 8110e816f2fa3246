package naming

import (
	"regexp"
	"strings"
	"testing"
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
			if got := Child(tc.parent, tc.suffix...); got != tc.want {
				t.Fatalf("Child(%q, %q) = %q, want %q", tc.parent, tc.suffix, got, tc.want)
			}
		})
	}
}

func TestChildLongNamesStayValidAndDistinct(t *testing.T) {
	long := strings.Repeat("migration-", 20)
	a := Child(long+"a", "transfer", "1")
	b := Child(long+"b", "transfer", "1")
	c := Child(long+"a", "transfer", "2")
	for _, n := range []string{a, b, c} {
		if len(n) > MaxNameLength || !dns1123.MatchString(n) {
			t.Fatalf("%q is not a valid DNS-1123 label of at most 63 characters", n)
		}
	}
	if a == b || a == c {
		t.Fatalf("names collide: %q %q %q", a, b, c)
	}
	if !strings.HasSuffix(a, "-transfer-1") {
		t.Fatalf("%q lost its suffix", a)
	}
	if Child(long+"a", "transfer", "1") != a {
		t.Fatal("Child is not deterministic")
	}
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
		if got != want {
			t.Errorf("DNS1123Label(%q) = %q, want %q", in, got, want)
		}
		if !dns1123.MatchString(got) {
			t.Errorf("DNS1123Label(%q) = %q is not a DNS-1123 label", in, got)
		}
	}
}

func TestChildNames(t *testing.T) {
	if got := StagingClaim("m", 2000); got != "m-staging-2000" {
		t.Errorf("StagingClaim = %q", got)
	}
	if got := TransferJob("m", 3); got != "m-transfer-3" {
		t.Errorf("TransferJob = %q", got)
	}
	if got := ConversionJob("m", 1); got != "m-convert-1" {
		t.Errorf("ConversionJob = %q", got)
	}
	if got := ConversionConfigMap("m", 1); got != "m-convert-1-domain" {
		t.Errorf("ConversionConfigMap = %q", got)
	}
	if got := DataVolume("vm", 0); got != "vm-disk-0" {
		t.Errorf("DataVolume = %q", got)
	}
	if got := DiskName(1); got != "disk-1" {
		t.Errorf("DiskName = %q", got)
	}
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
			if got != tc.want || len(got) > MaxNameLength || !dns1123.MatchString(got) {
				t.Fatalf("PlanConfigMap(%q) = %q, want %q (a DNS-1123 label)", tc.migration, got, tc.want)
			}
		})
	}
}
