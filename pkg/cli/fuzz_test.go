package cli

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/untrusted"
)

// nastySeeds are what status may hold of a guest, vSphere or a peer:
// empty, huge, not UTF-8, control and escape bytes (C0, C1, the bare CSI
// byte), CJK, bidi overrides and isolates, zero-width characters.
var nastySeeds = []string{
	"", " ", "\n", "\r\n", "\t", "a\tb\nc", "\x00", "\x08\x08\x08OK", "\x1b[2J\x1b]0;owned\x07", "\x7f", "\xff\xfe", "\xc3",
	"漢字サーバー", "\u202eexe.txt", "\u2066x\u2069", "\u200b", "\ufeff", "\u009b2J", "\x9b2J", "\u0085", "\u2028\u2029",
	"web-01 (prod)", "Größe", "debian 12.15 (Debian GNU/Linux 12 (bookworm))", strings.Repeat("é", 300), strings.Repeat("\x1b", 200),
}

// checkClean checks the CLI's output cleaning: clean gives one line of
// valid UTF-8 without control or format characters, whitespace folded to
// single spaces, kept as it is by clean again, and text that needs
// nothing of it unchanged; the terminalWriter lets through only the
// layout's newlines and tabs, changes nothing that is printable, and
// counts what it was given.
func checkClean(t *testing.T, s string) {
	t.Helper()
	out := clean(s)
	if err := untrusted.Text(out, len(out)); err != nil {
		t.Fatalf("clean(%q) = %q: %v", s, out, err)
	}
	if strings.Contains(out, "  ") || strings.TrimSpace(out) != out || strings.ContainsFunc(out, func(r rune) bool { return r != ' ' && unicode.IsSpace(r) }) {
		t.Fatalf("clean(%q) = %q: whitespace not folded", s, out)
	}
	if again := clean(out); again != out {
		t.Fatalf("clean(%q) = %q, cleaned again %q", s, out, again)
	}
	if folded := strings.Join(strings.Fields(s), " "); folded == s && untrusted.Text(s, len(s)) == nil && out != s {
		t.Fatalf("clean(%q) = %q: changed printable text", s, out)
	}

	var b bytes.Buffer
	n, err := terminalWriter{w: &b}.Write([]byte(s))
	if err != nil || n != len(s) {
		t.Fatalf("terminalWriter took %d of %d bytes of %q: %v", n, len(s), s, err)
	}
	shown := b.String()
	if !utf8.ValidString(shown) {
		t.Fatalf("terminalWriter wrote %q for %q: not UTF-8", shown, s)
	}
	for _, line := range strings.FieldsFunc(shown, func(r rune) bool { return r == '\n' || r == '\t' }) {
		if err := untrusted.Text(line, len(line)); err != nil {
			t.Fatalf("terminalWriter wrote %q for %q: %v", shown, s, err)
		}
	}
	if strings.Count(shown, "\n") != strings.Count(s, "\n") || strings.Count(shown, "\t") != strings.Count(s, "\t") {
		t.Fatalf("terminalWriter wrote %q for %q: the layout changed", shown, s)
	}
	printable := utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool {
		return r != '\n' && r != '\t' && (unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Zl, r) || unicode.Is(unicode.Zp, r))
	})
	if printable && shown != s {
		t.Fatalf("terminalWriter wrote %q for the printable %q", shown, s)
	}
}

// TestProgressViewOfNaN keeps what FuzzClean's seed found: a DataVolume
// whose status.progress read "NaN%" crashed kubectl vmm get (parsePercent
// passed NaN on, and bar asked strings.Repeat for a negative count:
// "panic: strings: negative Repeat count").
func TestProgressViewOfNaN(t *testing.T) {
	m := &v1alpha1.VirtualMachineMigration{ObjectMeta: metav1.ObjectMeta{Name: "web-01", Namespace: "vms"}}
	m.Status.Phase = v1alpha1.PhaseImporting
	m.Status.Disks = []v1alpha1.DiskStatus{{Name: "disk-0", DataVolume: "web-01-disk-0", ImportPhase: "ImportInProgress", ImportProgress: "NaN%"}}
	var out bytes.Buffer
	if err := printProgress(&out, m, time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	if want := "[>" + strings.Repeat(" ", barWidth-1) + "]   0%"; !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "progress not reported yet") {
		t.Errorf("the view of a NaN progress:\n%s", out.String())
	}
	if b := bar(math.NaN(), 4); b != "[>   ]" {
		t.Errorf("bar(NaN, 4) = %q", b)
	}
}

// FuzzClean checks what the CLI shows of status text (checkClean) and
// reads a DataVolume's progress as status keeps it (CDI's "45.20%", or
// whatever its status holds) and draws it as the live view does:
// parsePercent reads a number from 0 to 100, bar is width cells between
// brackets for any fraction, and the migration's progress view prints
// without a control character whatever the progress says.
func FuzzClean(f *testing.F) {
	for _, s := range []string{"45.20%", "0%", "100.0%", "100%", "N/A", "", "-5%", "250%", "1e3%", " 45% ", "45", "45%%", "+Inf%", "-Inf%",
		"0x1p-2%", "4_5%", "NaN%", "nan%", strings.Repeat("9", 400) + "%"} {
		f.Add(s, 0.45, uint8(30))
	}
	for _, s := range nastySeeds {
		f.Add(s, 0.45, uint8(30))
		f.Add(s+"%", math.Inf(1), uint8(0))
	}
	f.Add("12%", math.Inf(-1), uint8(1))
	f.Add("12%", -0.5, uint8(255))
	f.Add("12%", 1e300, uint8(7))
	f.Add("12%", math.NaN(), uint8(30))
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, progress string, fraction float64, width uint8) {
		checkClean(t, progress)
		v, ok := parsePercent(progress)
		if ok && !(v >= 0 && v <= 100) {
			t.Fatalf("parsePercent(%q) = %v", progress, v)
		}
		w := int(width)
		if b := bar(fraction, w); len(b) != w+2 || b[0] != '[' || b[len(b)-1] != ']' {
			t.Fatalf("bar(%v, %d) = %q", fraction, w, b)
		}
		m := &v1alpha1.VirtualMachineMigration{ObjectMeta: metav1.ObjectMeta{Name: "web-01", Namespace: "vms"}}
		m.Status.Phase = v1alpha1.PhaseImporting
		m.Status.Progress = progress
		m.Status.Disks = []v1alpha1.DiskStatus{{Name: "disk-0", DataVolume: "web-01-disk-0", ImportPhase: "ImportInProgress", ImportProgress: progress}}
		var out bytes.Buffer
		if err := printProgress(terminalWriter{w: &out}, m, now); err != nil {
			t.Fatalf("printProgress: %v", err)
		}
		for _, line := range strings.FieldsFunc(out.String(), func(r rune) bool { return r == '\n' || r == '\t' }) {
			if err := untrusted.Text(line, len(line)); err != nil {
				t.Fatalf("the view of progress %q printed %q: %v", progress, line, err)
			}
		}
	})
}
