package cli

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
)

// guestText is what a guest (or vSphere, or a cluster object) can put in
// a string the controller copies into status: a C1 CSI (encoded, and as
// the raw byte 8-bit terminals take for it), a backspace, bidirectional
// overrides and isolates, a zero-width space, a C0 escape sequence, a
// next line, a byte that is not UTF-8, a line separator, and a line
// break that would start a forged line.
const guestText = "\u009b31m\x9b\b\u202e\u2066\u2069\u200b\x1b[2J\u0085\xff\u2028\r\nPhase:\tSucceeded"

// terminalUnsafe lists what in s a terminal would act on or hide: any
// control character but the newlines and tabs that lay a view out, any
// format character (bidirectional overrides and isolates, zero-width
// ones), line and paragraph separators, bytes that are not UTF-8.
func terminalUnsafe(s string) []string {
	var found []string
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				found = append(found, fmt.Sprintf("byte %#x at %d", s[i], i))
			}
			continue
		}
		if r != '\n' && r != '\t' && (unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)) {
			found = append(found, fmt.Sprintf("%U at %d", r, i))
		}
	}
	return found
}

// withText returns a copy of m in which every plain string of its status
// that is not empty ends with suffix (conditions keep their type, which
// the views look conditions up by).
func withText(m *v1alpha1.VirtualMachineMigration, suffix string) *v1alpha1.VirtualMachineMigration {
	m = m.DeepCopy()
	appendToStrings(reflect.ValueOf(&m.Status).Elem(), suffix, false)
	return m
}

// withTextEverywhere is withText for the enumerations too (the phases,
// a condition's status, a dry run's outcome): the API server holds only
// the values the CRD lists, and the views print some as they are.
func withTextEverywhere(m *v1alpha1.VirtualMachineMigration, suffix string) *v1alpha1.VirtualMachineMigration {
	m = m.DeepCopy()
	appendToStrings(reflect.ValueOf(&m.Status).Elem(), suffix, true)
	return m
}

func appendToStrings(v reflect.Value, suffix string, enums bool) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			appendToStrings(v.Elem(), suffix, enums)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() || (v.Type() == reflect.TypeFor[metav1.Condition]() && f.Name == "Type") {
				continue
			}
			appendToStrings(v.Field(i), suffix, enums)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			appendToStrings(v.Index(i), suffix, enums)
		}
	case reflect.String:
		if (enums || v.Type() == reflect.TypeFor[string]()) && v.String() != "" {
			v.SetString(v.String() + suffix)
		}
	}
}

// textEvents are m's events with suffix after their reason and message.
func textEvents(m *v1alpha1.VirtualMachineMigration, suffix string) []runtime.Object {
	var out []runtime.Object
	for _, e := range fixtureEvents(m) {
		e.Reason += suffix
		e.Message += suffix
		out = append(out, &e)
	}
	return out
}

// textPlanConfigMaps are the plan ConfigMaps of the migrations that name
// one, under the name status gives (suffix and all).
func textPlanConfigMaps(t *testing.T, ms []*v1alpha1.VirtualMachineMigration, originals map[string]*v1alpha1.VirtualMachineMigration) []runtime.Object {
	var out []runtime.Object
	for _, m := range ms {
		if p := m.Status.Plan; p != nil && p.ConfigMapName != "" {
			cm := planConfigMap(t, originals[m.Name])
			cm.Name = p.ConfigMapName
			out = append(out, cm)
		}
	}
	return out
}

// viewRun is one command's output: stdout and stderr, and its exit code.
type viewRun struct {
	out, errOut string
	code        int
}

// runViews runs every view of every fixture with suffix after the strings
// of its status (withText or withTextEverywhere) and its events.
func runViews(t *testing.T, with func(*v1alpha1.VirtualMachineMigration, string) *v1alpha1.VirtualMachineMigration, suffix string) map[string]viewRun {
	t.Helper()
	originals := fixtures()
	var ms []*v1alpha1.VirtualMachineMigration
	var migrations []runtime.Object
	kube := []runtime.Object{}
	for _, name := range fixtureNames() {
		m := with(originals[name], suffix)
		ms = append(ms, m)
		migrations = append(migrations, m)
		kube = append(kube, textEvents(m, suffix)...)
	}
	kube = append(kube, textPlanConfigMaps(t, ms, originals)...)
	commands := [][]string{{"list"}, {"list", "-A", "-o", "wide"}, {"list", "--summary"}}
	for _, name := range fixtureNames() {
		commands = append(commands, []string{"get", name}, []string{"describe", name}, []string{"plan", name}, []string{"plan", name, "--domain"}, []string{"cancel", name})
	}
	runs := map[string]viewRun{}
	for _, args := range commands {
		h := newHarness(t, migrations, kube...)
		h.in.WriteString("n\n")
		code := h.run(context.Background(), args...)
		runs[strings.Join(args, " ")] = viewRun{out: h.out.String(), errOut: h.errOut.String(), code: code}
	}
	return runs
}

// TestViewsShowNoGuestControlCharacters: text a guest controls reaches
// status (its detectedGuestFullName, a NIC's name, a warning of
// virt-v2v, a message quoting any of them); no view lets it drive the
// terminal (a C1 CSI, a backspace, a bidirectional override, an escape
// sequence), hide text (format characters) or forge a line (issue 46).
// Each view shows as many lines as with plain text in the same places.
func TestViewsShowNoGuestControlCharacters(t *testing.T) {
	plain := runViews(t, withText, "-text")
	guest := runViews(t, withText, guestText)
	for cmd, got := range guest {
		t.Run(cmd, func(t *testing.T) {
			want := plain[cmd]
			assert.Empty(t, terminalUnsafe(got.out), "stdout:\n%s", got.out)
			assert.Empty(t, terminalUnsafe(got.errOut), "stderr:\n%s", got.errOut)
			assert.Equal(t, want.code, got.code, "exit code (stderr %q)", got.errOut)
			assert.Equal(t, strings.Count(want.out, "\n"), strings.Count(got.out, "\n"), "lines of stdout, want as many as with plain text:\n%s", got.out)
			assert.Equal(t, strings.Count(want.errOut, "\n"), strings.Count(got.errOut, "\n"), "lines of stderr:\n%s", got.errOut)
		})
	}
}

// TestViewsShowNoControlCharactersAnywhere: the views print through a
// writer that lets no control or format character through but the
// layout's newlines and tabs, even from a string a view did not clean:
// here every string of status, the enumerations included.
func TestViewsShowNoControlCharactersAnywhere(t *testing.T) {
	for cmd, got := range runViews(t, withTextEverywhere, guestText) {
		assert.Empty(t, terminalUnsafe(got.out), "%s: stdout:\n%s", cmd, got.out)
		assert.Empty(t, terminalUnsafe(got.errOut), "%s: stderr:\n%s", cmd, got.errOut)
	}
}

// TestTerminalWriter: the layout's newlines and tabs pass; any other
// control or format character and any byte that is not UTF-8 shows as
// U+FFFD; text passes as it is.
func TestTerminalWriter(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"NAME\tPHASE\nweb-01\tSucceeded\n", "NAME\tPHASE\nweb-01\tSucceeded\n"},
		{"guest:\tWindows Server 2022 (64 bits) \u00e9\u65e5\n", "guest:\tWindows Server 2022 (64 bits) \u00e9\u65e5\n"},
		{"a\x1b[2J\u009b31m\x9b\b\r\u202e\u2066\u200b\xff\u2028\tb\n", "a\ufffd[2J\ufffd31m\ufffd\ufffd\ufffd\ufffd\ufffd\ufffd\ufffd\ufffd\tb\n"},
	} {
		var out strings.Builder
		n, err := terminalWriter{w: &out}.Write([]byte(tc.in))
		assert.NoError(t, err)
		assert.Equal(t, len(tc.in), n, "bytes taken of %q", tc.in)
		assert.Equal(t, tc.want, out.String(), "written of %q", tc.in)
	}
}

// TestWatchShowsNoGuestControlCharacters: --watch, redrawn on a terminal
// or a line per change, shows guest text as the other views do; on a
// terminal its own clear-screen sequence is the only one.
func TestWatchShowsNoGuestControlCharacters(t *testing.T) {
	all := fixtures()
	for _, name := range []string{"pull-backoff", "failed-converting", "cancelling", "succeeded"} {
		for _, terminal := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, terminal %t", name, terminal), func(t *testing.T) {
				m := withText(all[name], guestText)
				waitFor := name // the line of a watch into a pipe starts with it
				if terminal {
					waitFor = "Next:"
				}
				out, _ := runWatch(t, terminal, objects(m), []string{"get", name, "--watch"}, []watchStep{{waitFor: waitFor}})
				if !terminal {
					assert.Equal(t, 1, strings.Count(out, "\n"), "a watch into a pipe prints one line per change:\n%s", out)
				}
				assert.Empty(t, terminalUnsafe(strings.ReplaceAll(out, clearScreen, "")), "output:\n%q", out)
			})
		}
	}
	t.Run("list, terminal", func(t *testing.T) {
		var ms []*v1alpha1.VirtualMachineMigration
		for _, name := range fixtureNames() {
			ms = append(ms, withText(all[name], guestText))
		}
		out, _ := runWatch(t, true, objects(ms...), []string{"list", "-o", "wide", "-w"}, []watchStep{{waitFor: "validating"}})
		assert.Empty(t, terminalUnsafe(strings.ReplaceAll(out, clearScreen, "")), "output:\n%q", out)
	})
}

// TestCleanKeepsTextAndMarksTheRest: clean keeps any printable text (a
// guest name in French, Japanese) and folds whitespace; every control or
// format character, and every byte that is not UTF-8, shows as U+FFFD,
// visible and one cell wide, as the controller's untrusted.Clean shows
// them in status.
func TestCleanKeepsTextAndMarksTheRest(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"Système d'exploitation Microsoft Windows Server 2022 (64 bits)", "Système d'exploitation Microsoft Windows Server 2022 (64 bits)"},
		{"Red Hat Enterprise Linux 9 (64 ビット)", "Red Hat Enterprise Linux 9 (64 ビット)"},
		{"  two\r\n lines\tand a tab ", "two lines and a tab"},
		{"CSI \u009b31m", "CSI \ufffd31m"},
		{"raw CSI \x9b31m", "raw CSI \ufffd31m"},
		{"ESC \x1b[31mred", "ESC \ufffd[31mred"},
		{"back\bspace", "back\ufffdspace"},
		{"delete\x7f", "delete\ufffd"},
		{"Windows \u202e46x lanoisseforP", "Windows \ufffd46x lanoisseforP"},
		{"isolate \u2066x\u2069", "isolate \ufffdx\ufffd"},
		{"zero\u200bwidth, joiner\u200d, BOM\ufeff, soft\u00adhyphen", "zero\ufffdwidth, joiner\ufffd, BOM\ufffd, soft\ufffdhyphen"},
		{"not UTF-8: \xff\xfe", "not UTF-8: \ufffd\ufffd"},
		{"next\u0085line, line\u2028separator", "next line, line separator"},
	} {
		got := clean(tc.in)
		assert.Equal(t, tc.want, got, "clean(%q)", tc.in)
		assert.Empty(t, terminalUnsafe(got), "clean(%q)", tc.in)
	}
}

// TestGoldenGuestText: how describe and get show a failure whose message
// quotes what a guest says of itself: printable text (accents, CJK) as
// it is, every control or format character as U+FFFD, on one line.
func TestGoldenGuestText(t *testing.T) {
	m := fixtures()["failed-converting"]
	m.Status.Conversion.OperatingSystem = "Windows Server 2022 Datacenter \u00e9dition (\u65e5\u672c\u8a9e)\u202e"
	m.Status.LastError.Message = "virt-v2v: inspection could not detect the source guest \"Windows\u009b2J\b\u202eexe.txt\x1b]0;title\x07\u2066\u200b\xff\nPhase:\tSucceeded\" (InspectionFailed)"
	m.Status.LastError.Summary = naming.Summarize(m.Status.LastError.Message)
	for _, cmd := range []string{"describe", "get"} {
		t.Run(cmd, func(t *testing.T) {
			h := newHarness(t, objects(m))
			require.Equal(t, 0, h.run(context.Background(), cmd, m.Name), "exit code (stderr %q)", h.errOut)
			assert.Empty(t, terminalUnsafe(h.out.String()))
			golden(t, map[string]string{"describe": "describe", "get": "progress"}[cmd]+"-guest-text", h.out.Bytes())
		})
	}
}
