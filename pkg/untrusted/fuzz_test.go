package untrusted

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// nastySeeds are values no guest, vSphere or peer should send, and every
// one of them may: empty, huge, not UTF-8, control and escape bytes,
// CJK, a bidi override, the C1 CSI (U+009B, and its bare byte).
var nastySeeds = []string{
	"", " ", "\x00", "\n", "\r\n", "\t", "\x1b[2J\x1b]0;owned\x07", "\x7f", "\xff\xfe", "\xc3", "\xed\xa0\x80",
	"漢字サーバー", "\u202eevil\u202c", "\u009b2J", "\x9b2J", "\u2028\u2029", "\u200d\ufeff", "\ufffd",
	"a%b", "%", "fe80::1%\n", strings.Repeat("é", 40), strings.Repeat("漢", 30), strings.Repeat("\x01", 70),
	strings.Repeat("a", 4096), strings.Repeat("\xff", 300),
}

// realSeeds are values the unit tests and VMware Tools give.
var realSeeds = []string{
	"00:50:56:aa:bb:01", "ens192", "größe", "SQL-02 (prod)", "VM Network", "[datastore1] web 01/web 01.vmdk",
	"192.168.10.21", "2001:DB8:0:0::21", "::ffff:10.20.30.40", "fe80::250:56ff:feaa:1", "2001:0db8:0000::0001",
	"2001:db8::7%x\n--root=/dev/sdb9", "fe80::1%eth0", "192.168.10.21/24", "10.0.0.1,10.0.0.2", " 10.0.0.1",
	"br-lan.10", "abcdefghijklmno", "abcdefghijklmnop", "..", "../etc", "eth0:1", "eth%d", "a\u00a0b",
}

func addSeeds(f *testing.F) {
	for _, s := range append(append([]string{}, realSeeds...), nastySeeds...) {
		f.Add(s)
	}
}

// checkMessage: an error message is one line of text a status and a log
// can keep as it is.
func checkMessage(t *testing.T, what, msg string) {
	t.Helper()
	if err := Text(msg, len(msg)); err != nil {
		t.Fatalf("%s %q: %v", what, msg, err)
	}
}

// FuzzField checks Field, Text, InterfaceName and Addr: what they accept
// is valid UTF-8 within its bound without what each refuses, Text
// accepts exactly what Clean keeps as it is, a Field is Text, an
// interface name a Field, an address as checkAddr says; every refusal is
// one line of text, quoted whole by Refuse.
func FuzzField(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, s string) {
		const max = 32
		fieldErr, textErr, nameErr := Field(s, max), Text(s, max), InterfaceName(s)
		for what, err := range map[string]error{"Field": fieldErr, "Text": textErr, "InterfaceName": nameErr} {
			if err == nil {
				continue
			}
			checkMessage(t, what+" error", err.Error())
			checkMessage(t, what+" refusal", Refuse("the guest's value", s, err).Error())
		}
		if textErr == nil {
			if !utf8.ValidString(s) || len(s) > max {
				t.Fatalf("Text(%q) accepted a value that is not UTF-8 or too long", s)
			}
			for _, r := range s {
				if refusedInText(r) {
					t.Fatalf("Text(%q) accepted %U", s, r)
				}
			}
		}
		if fieldErr == nil {
			if s == "" || textErr != nil {
				t.Fatalf("Field(%q) accepted what Text refuses (%v) or nothing", s, textErr)
			}
			if strings.IndexFunc(s, unicode.IsSpace) >= 0 {
				t.Fatalf("Field(%q) accepted whitespace", s)
			}
		}
		if nameErr == nil {
			if err := Field(s, MaxInterfaceName); err != nil {
				t.Fatalf("InterfaceName(%q) accepted what Field refuses: %v", s, err)
			}
			if s == "." || s == ".." || strings.ContainsAny(s, "%/:") {
				t.Fatalf("InterfaceName(%q) accepted it", s)
			}
			for i := 0; i < len(s); i++ {
				if s[i] < '!' || s[i] > '~' {
					t.Fatalf("InterfaceName(%q) accepted byte %d", s, i)
				}
			}
		}
		// Text accepts exactly what Clean keeps as it is.
		if kept := Clean(s, 3*len(s)) == s; kept != (Text(s, len(s)) == nil) {
			t.Fatalf("Clean(%q) kept it: %v, Text accepts it: %v", s, kept, !kept)
		}
		checkAddr(t, s)
	})
}

// checkAddr checks Addr: an address it accepts is a valid Field without a
// zone, parses back from its canonical form to itself (which Addr
// accepts too), and PrefixLength takes exactly the lengths within its
// bits.
func checkAddr(t *testing.T, s string) {
	t.Helper()
	a, err := Addr(s)
	if err != nil {
		checkMessage(t, "Addr error", err.Error())
		checkMessage(t, "Addr refusal", Refuse("the guest's address", s, err).Error())
		return
	}
	if !a.IsValid() || a.Zone() != "" || len(s) > MaxAddress || Field(s, MaxAddress) != nil {
		t.Fatalf("Addr(%q) = %v: accepted", s, a)
	}
	if p, perr := netip.ParseAddr(s); perr != nil || p != a {
		t.Fatalf("Addr(%q) = %v, netip says %v, %v", s, a, p, perr)
	}
	canonical := a.String()
	back, err := Addr(canonical)
	if err != nil || back != a || back.String() != canonical {
		t.Fatalf("Addr(%q) = %s, which reads back as %v, %v", s, canonical, back, err)
	}
	for _, n := range []int32{-1, 0, 1, 32, 33, 128, 129} {
		if ok := PrefixLength(a, n) == nil; ok != (n >= 0 && int(n) <= a.BitLen()) {
			t.Fatalf("PrefixLength(%s, %d) accepted: %v", a, n, ok)
		}
	}
}

// checkQuote checks Quote: printable ASCII in double quotes, at most
// MaxQuoted characters between them; what it does not cut unquotes to
// the value, what it cuts to a prefix of it on a rune boundary that
// could take no further piece.
func checkQuote(t *testing.T, s string) {
	t.Helper()
	q := Quote(s)
	if len(q) > MaxQuoted+5 || !strings.HasPrefix(q, `"`) {
		t.Fatalf("Quote(%q) = %s: %d bytes", s, q, len(q))
	}
	for i := 0; i < len(q); i++ {
		if q[i] < ' ' || q[i] > '~' {
			t.Fatalf("Quote(%q) = %q: byte %d is not printable ASCII", s, q, i)
		}
	}
	body, cut := strings.CutSuffix(q, "...")
	if len(body) < 2 || !strings.HasSuffix(body, `"`) {
		t.Fatalf("Quote(%q) = %s: not quoted", s, q)
	}
	if len(body)-2 > MaxQuoted {
		t.Fatalf("Quote(%q) = %s: %d characters quoted", s, q, len(body)-2)
	}
	v, err := strconv.Unquote(body)
	if err != nil {
		t.Fatalf("Quote(%q) = %s, which does not unquote: %v", s, q, err)
	}
	if !cut {
		if v != s {
			t.Fatalf("Quote(%q) = %s, which unquotes to %q", s, q, v)
		}
		return
	}
	if len(v) >= len(s) || !strings.HasPrefix(s, v) {
		t.Fatalf("Quote(%q) = %s: %q is not a part of the value", s, q, v)
	}
	_, size := utf8.DecodeRuneInString(s[len(v):])
	next := strconv.QuoteToASCII(s[len(v) : len(v)+size])
	if len(body)-2+len(next)-2 <= MaxQuoted {
		t.Fatalf("Quote(%q) = %s: cut before %s, which fits", s, q, next)
	}
}

// FuzzClean checks Clean and Quote, the two forms in which a value that
// came from outside is kept or shown: Clean's is valid UTF-8 of at most
// max bytes that Text accepts, kept as it is by Clean again, the longest
// prefix of the value cleaned whole that fits, and the value itself when
// Text accepts it within max; Quote's as checkQuote says.
func FuzzClean(f *testing.F) {
	for _, s := range append(append([]string{}, realSeeds...), nastySeeds...) {
		f.Add(s, uint16(64))
		f.Add(s, uint16(3))
	}
	f.Add("Größe", uint16(0))
	f.Fuzz(func(t *testing.T, s string, n uint16) {
		checkQuote(t, s)
		max := int(n % 600)
		out := Clean(s, max)
		if !utf8.ValidString(out) || len(out) > max {
			t.Fatalf("Clean(%q, %d) = %q: not UTF-8, or too long", s, max, out)
		}
		if err := Text(out, max); err != nil {
			t.Fatalf("Clean(%q, %d) = %q, which Text refuses: %v", s, max, out, err)
		}
		if again := Clean(out, max); again != out {
			t.Fatalf("Clean(%q, %d) = %q, cleaned again %q", s, max, out, again)
		}
		whole := Clean(s, 3*len(s))
		if !strings.HasPrefix(whole, out) {
			t.Fatalf("Clean(%q, %d) = %q, not a prefix of %q", s, max, out, whole)
		}
		if rest := whole[len(out):]; rest != "" {
			if _, size := utf8.DecodeRuneInString(rest); len(out)+size <= max {
				t.Fatalf("Clean(%q, %d) = %q: cut before %q, which fits", s, max, out, rest)
			}
		}
		if Text(s, max) == nil && out != s {
			t.Fatalf("Clean(%q, %d) = %q: changed what Text accepts", s, max, out)
		}
	})
}
