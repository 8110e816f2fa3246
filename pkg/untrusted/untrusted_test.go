package untrusted

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestField(t *testing.T) {
	tests := map[string]struct {
		value string
		want  string // "" when accepted
	}{
		"a MAC address":       {"00:50:56:aa:bb:01", ""},
		"an interface name":   {"ens192", ""},
		"non-ASCII letters":   {"größe", ""},
		"empty":               {"", "is empty"},
		"a newline":           {"2001:db8::7%x\n--root=/dev/sdb9", "holds a newline at byte 13"},
		"a space":             {"10.0.0.1 -x", "holds a space at byte 8"},
		"a tab":               {"a\tb", "holds a tab at byte 1"},
		"a carriage return":   {"a\rb", "holds a carriage return at byte 1"},
		"an escape":           {"eth0\x1b[2J", "holds a control character (U+001B) at byte 4"},
		"a NUL":               {"eth0\x00", "holds a control character (U+0000) at byte 4"},
		"a no-break space":    {"a\u00a0b", "holds whitespace (U+00A0) at byte 1"},
		"a line separator":    {"a\u2028b", "holds a line separator (U+2028) at byte 1"},
		"a bidi override":     {"a\u202eb", "holds an invisible format character (U+202E) at byte 1"},
		"a zero-width joiner": {"a\u200db", "holds an invisible format character (U+200D) at byte 1"},
		"not UTF-8":           {"a\xffb", "is not UTF-8 at byte 1"},
		"too long":            {strings.Repeat("a", 33), "is 33 bytes long, more than 32"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := Field(tc.value, 32)
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.EqualError(t, err, tc.want)
		})
	}
}

func TestText(t *testing.T) {
	for _, ok := range []string{"", "SQL-02 (prod)", "VM Network", "[datastore1] web 01/web 01.vmdk", "Größe"} {
		assert.NoError(t, Text(ok, 80), "%q", ok)
	}
	for value, want := range map[string]string{
		"web\n01":               "holds a newline at byte 3",
		"web\u2029":             "holds a line separator (U+2029) at byte 3",
		"\x1b]0;owned\x07":      "holds a control character (U+001B) at byte 0",
		"a\u2066b":              "holds an invisible format character (U+2066) at byte 1",
		"\xc3":                  "is not UTF-8 at byte 0",
		strings.Repeat("a", 81): "is 81 bytes long, more than 80",
	} {
		assert.EqualError(t, Text(value, 80), want, "%q", value)
	}
}

func TestAddr(t *testing.T) {
	for in, want := range map[string]string{
		"192.168.10.21":         "192.168.10.21",
		"2001:DB8:0:0::21":      "2001:db8::21",
		"::ffff:10.20.30.40":    "::ffff:10.20.30.40",
		"fe80::250:56ff:feaa:1": "fe80::250:56ff:feaa:1",
		"2001:0db8:0000::0001":  "2001:db8::1",
	} {
		a, err := Addr(in)
		if assert.NoError(t, err, "%q", in) {
			assert.Equal(t, want, a.String(), "the canonical form of %q", in)
		}
	}
	for in, want := range map[string]string{
		"2001:db8::7%x\n--root=/dev/sdb9": "holds a newline at byte 13",
		"fe80::1%eth0":                    "has a zone (%eth0)",
		"fe80::1%12":                      "has a zone (%12)",
		"192.168.10.21/24":                "is not an IP address",
		"10.0.0.1,10.0.0.2":               "is not an IP address",
		"":                                "is empty",
		" 10.0.0.1":                       "holds a space at byte 0",
		strings.Repeat("1", 65):           "is 65 bytes long, more than 64",
	} {
		_, err := Addr(in)
		assert.EqualError(t, err, want, "%q", in)
	}
}

func TestPrefixLength(t *testing.T) {
	v4, _ := Addr("10.0.0.1")
	v6, _ := Addr("2001:db8::1")
	assert.NoError(t, PrefixLength(v4, 0))
	assert.NoError(t, PrefixLength(v4, 32))
	assert.NoError(t, PrefixLength(v6, 128))
	assert.EqualError(t, PrefixLength(v4, 33), "has prefix length 33, not within the 32 bits of the address")
	assert.EqualError(t, PrefixLength(v6, -1), "has prefix length -1, not within the 128 bits of the address")
}

func TestQuoteAndClean(t *testing.T) {
	assert.Equal(t, `"2001:db8::7%x\n--root=/dev/sdb9"`, Quote("2001:db8::7%x\n--root=/dev/sdb9"))
	assert.Equal(t, `"gr\u00f6\u00dfe"`, Quote("größe"), "printable ASCII only")
	long := strings.Repeat("a", 63) + "ö"
	assert.Equal(t, `"`+strings.Repeat("a", 63)+`"...`, Quote(long+"b"), "cut on a rune boundary")
	assert.Equal(t, `"`+strings.Repeat(`\n`, 32)+`"...`, Quote(strings.Repeat("\n", 100)), "at most MaxQuoted characters quoted")

	// Values shorter than MaxQuoted bytes whose quoted form is longer:
	// each once indexed past the end of the value (a guest's string
	// crashed the controller).
	for name, value := range map[string]string{
		"a dozen accented letters":  strings.Repeat("é", 12),
		"eleven CJK characters":     strings.Repeat("漢", 11),
		"twenty control bytes":      strings.Repeat("\x01", 20),
		"bytes that are not UTF-8":  strings.Repeat("\xff", 30),
		"an ASCII head, a CJK tail": strings.Repeat("a", 50) + strings.Repeat("漢", 4),
		"exactly MaxQuoted bytes":   strings.Repeat("\x02", MaxQuoted),
		"one rune past the bound":   strings.Repeat("a", MaxQuoted) + "é",
		"a long mixed guest string": strings.Repeat("Ünïcödé 漢字 \u202e\x9b", 20),
	} {
		q := Quote(value)
		assert.LessOrEqual(t, len(q), MaxQuoted+5, "%s: %s", name, q)
		assert.True(t, strings.HasPrefix(q, `"`) && (strings.HasSuffix(q, `"`) || strings.HasSuffix(q, `"...`)), "%s: %s", name, q)
		for _, r := range q {
			assert.True(t, r >= ' ' && r <= '~', "%s: printable ASCII only: %q", name, q)
		}
	}
	assert.Equal(t, `"`+strings.Repeat(`\u00e9`, 10)+`"...`, Quote(strings.Repeat("é", 12)), "whole escapes only")

	assert.Equal(t, "eth0\ufffd[2J", Clean("eth0\x1b[2J", 64))
	assert.Equal(t, "a\ufffdb", Clean("a\xffb", 64), "a byte that is not UTF-8")
	assert.Equal(t, "Größe", Clean("Größe", 64))
	assert.Equal(t, "Gr", Clean("Größe", 3), "cut on a rune boundary")

	assert.Equal(t, "Gr...", CleanCut("Größe", 6), "cut on a rune boundary, marked")
	assert.Equal(t, "\ufffd\ufffd...", CleanCut(strings.Repeat("\x1b", 9), 9), "cut after the replacement")
	assert.Equal(t, "Größe", CleanCut("Größe", len("Größe")), "a value of max bytes is whole")
	assert.Equal(t, "eth0\ufffd[2J", CleanCut("eth0\x1b[2J", 64))
}

func TestCut(t *testing.T) {
	for name, tc := range map[string]struct {
		s    string
		max  int
		want string
	}{
		"fits":                     {"web-01", 6, "web-01"},
		"empty":                    {"", 0, ""},
		"one byte over":            {"web-012", 6, "web..."},
		"on a rune boundary":       {"aaé" + "bbbb", 6, "aa..."},
		"a CJK tail":               {"漢字漢字", 10, "漢字..."},
		"max holds the marker":     {"abcdef", 3, "..."},
		"max below the marker":     {"abcdef", 2, "ab"},
		"max below a rune":         {"ééé", 1, ""},
		"bytes that are not UTF-8": {"\xff\xff\xff\xff\xff", 4, "\xff..."},
		"100 KB":                   {strings.Repeat("x", 100<<10), 256, strings.Repeat("x", 253) + CutMarker},
	} {
		t.Run(name, func(t *testing.T) {
			got := Cut(tc.s, tc.max)
			assert.Equal(t, tc.want, got)
			assert.LessOrEqual(t, len(got), tc.max, "within the bound")
			assert.Equal(t, got, Cut(got, tc.max), "a cut value is cut no further")
		})
	}
}

func TestRefuse(t *testing.T) {
	assert.NoError(t, Refuse("the guest's address", "10.0.0.1", nil))
	_, problem := Addr("2001:db8::7%x\n-x")
	err := Refuse("the guest's address of Network adapter 1", "2001:db8::7%x\n-x", problem)
	assert.EqualError(t, err, `the guest's address of Network adapter 1 "2001:db8::7%x\n-x" holds a newline at byte 13`)
	var e *Error
	assert.True(t, errors.As(err, &e))
	assert.NotContains(t, err.Error(), "\n")
}

func TestInterfaceName(t *testing.T) {
	for _, ok := range []string{"ens192", "eth0", "enp1s0f1", "br-lan.10", "wlan_0", "abcdefghijklmno"} {
		assert.NoError(t, InterfaceName(ok), "%q", ok)
	}
	for name, want := range map[string]string{
		"":                 "is empty",
		"abcdefghijklmnop": "is 16 bytes long, more than 15",
		"..":               "is not a name",
		"../etc":           "holds '/' at byte 2, which no interface name has",
		"eth0:1":           "holds ':' at byte 4, which no interface name has",
		"eth%d":            "holds '%' at byte 3, which no interface name has",
		"eth\x1b":          "holds a control character (U+001B) at byte 3",
		"größe":            "holds a character beyond ASCII at byte 2, which no interface name has",
	} {
		assert.EqualError(t, InterfaceName(name), want, "%q", name)
	}
}

// FuzzCut checks Cut: at most max bytes, the value itself when it fits,
// else a prefix of it on a rune boundary followed by CutMarker (when max
// holds it), and cut no further when cut again.
func FuzzCut(f *testing.F) {
	for _, s := range append(append([]string{}, realSeeds...), nastySeeds...) {
		f.Add(s, uint16(64))
		f.Add(s, uint16(3))
	}
	f.Fuzz(func(t *testing.T, s string, n uint16) {
		max := int(n % 600)
		out := Cut(s, max)
		switch {
		case len(out) > max:
			t.Fatalf("Cut(%q, %d) = %q: too long", s, max, out)
		case len(s) <= max && out != s:
			t.Fatalf("Cut(%q, %d) = %q: changed a value that fits", s, max, out)
		case len(s) > max && max >= len(CutMarker) && !strings.HasSuffix(out, CutMarker):
			t.Fatalf("Cut(%q, %d) = %q: cut without the marker", s, max, out)
		case Cut(out, max) != out:
			t.Fatalf("Cut(%q, %d) = %q: cut again", s, max, out)
		}
		kept := strings.TrimSuffix(out, CutMarker)
		if len(s) > max && (!strings.HasPrefix(s, kept) || (kept != "" && !utf8.RuneStart(s[len(kept)]))) {
			t.Fatalf("Cut(%q, %d) = %q: not a prefix cut on a rune boundary", s, max, out)
		}
		if utf8.ValidString(s) && !utf8.ValidString(out) {
			t.Fatalf("Cut(%q, %d) = %q: not UTF-8", s, max, out)
		}
	})
}
