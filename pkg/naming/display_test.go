package naming

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestShorten(t *testing.T) {
	long := "app-" + strings.Repeat("very-long-name-", 12) + "-web-01"
	cases := map[string]struct {
		s    string
		n    int
		want string
	}{
		"short enough":          {"web-01", 40, "web-01"},
		"exactly n":             {strings.Repeat("a", 40), 40, strings.Repeat("a", 40)},
		"long: start and end":   {long, 20, "app-very-...--web-01"},
		"runes, not bytes":      {strings.Repeat("é", 50), 10, "éééé...ééé"},
		"n too small to cut at": {long, 4, long},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Shorten(tc.s, tc.n)
			assert.Equal(t, tc.want, got)
			if tc.n >= 5 {
				assert.LessOrEqual(t, utf8.RuneCountInString(got), tc.n)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	cases := map[string]struct {
		s, want string
	}{
		"short enough":  {"transfer job web-01-transfer-1 failed", "transfer job web-01-transfer-1 failed"},
		"one line":      {"first line\n  second\tline", "first line second line"},
		"cut at a word": {"RDMDisk: disk 2001 is a raw device mapping, which cannot be copied; Snapshots: the VM has 2 snapshots", "RDMDisk: disk 2001 is a raw device mapping, which cannot be copied..."},
		"one long word": {strings.Repeat("x", 100), strings.Repeat("x", MaxSummary-3) + "..."},
		"runes":         {strings.Repeat("é ", 50), strings.Repeat("é ", 38) + "é..."},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Summarize(tc.s)
			assert.Equal(t, tc.want, got)
			assert.LessOrEqual(t, utf8.RuneCountInString(got), MaxSummary)
		})
	}
}

func TestDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                               "0s",
		54 * time.Second:                "54s",
		35*time.Minute + 20*time.Second: "35m20s",
		30 * time.Minute:                "30m",
		24 * time.Hour:                  "24h",
		90 * time.Minute:                "1h30m",
		time.Hour + 2*time.Second:       "1h0m2s",
	} {
		assert.Equal(t, want, Duration(d), "%d", d)
	}
}
