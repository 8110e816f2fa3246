package untrusted

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Bounds of the values this package checks, in bytes.
const (
	// MaxAddress bounds an address as reported, before it is parsed: the
	// longest canonical IPv6 address (with an IPv4 tail) is 45 bytes.
	MaxAddress = 64
	// MaxQuoted bounds how much of a refused value a message quotes.
	MaxQuoted = 64
)

// Field checks s as one field of a line-oriented file or as one
// argument: not empty, at most max bytes of valid UTF-8, without
// whitespace (which separates fields, and lines), control characters
// (a newline starts another line or argument) or format characters
// (invisible ones, which make a value read as another).
func Field(s string, max int) error {
	if s == "" {
		return fmt.Errorf("is empty")
	}
	if err := length(s, max); err != nil {
		return err
	}
	return scan(s, func(r rune) bool { return unicode.IsSpace(r) || refusedInText(r) })
}

// Text checks s as a value inside a structured document (an XML element
// or attribute, a JSON string, an annotation), where a space separates
// nothing: at most max bytes of valid UTF-8, without control or format
// characters or line and paragraph separators. An empty s passes.
func Text(s string, max int) error {
	if err := length(s, max); err != nil {
		return err
	}
	return scan(s, refusedInText)
}

// Addr parses s as an IP address reported by vSphere or the guest: a
// Field of at most MaxAddress bytes that netip.ParseAddr takes, without
// a zone (netip takes a zone of any bytes, a newline included, and a
// zone means nothing outside the guest). Its String is its canonical
// form, the only one the controller writes anywhere.
func Addr(s string) (netip.Addr, error) {
	if err := Field(s, MaxAddress); err != nil {
		return netip.Addr{}, err
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("is not an IP address")
	}
	if a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("has a zone (%%%s)", a.Zone())
	}
	return a, nil
}

// MaxInterfaceName is the longest interface name Linux takes (IFNAMSIZ
// less its NUL).
const MaxInterfaceName = 15

// InterfaceName checks s as a network interface name a guest's
// configuration gives, to be written into a systemd .link file's Name=
// and kept in status: a Field of at most MaxInterfaceName bytes of
// printable ASCII without '%', '/' or ':' (what systemd takes), and not
// "." or "..".
func InterfaceName(s string) error {
	if err := Field(s, MaxInterfaceName); err != nil {
		return err
	}
	if s == "." || s == ".." {
		return fmt.Errorf("is not a name")
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c > '~':
			return fmt.Errorf("holds a character beyond ASCII at byte %d, which no interface name has", i)
		case c == '%' || c == '/' || c == ':':
			return fmt.Errorf("holds %q at byte %d, which no interface name has", c, i)
		}
	}
	return nil
}

// PrefixLength checks n as the prefix length of a: from 0 (unknown) to
// the address's bits.
func PrefixLength(a netip.Addr, n int32) error {
	if n < 0 || int(n) > a.BitLen() {
		return fmt.Errorf("has prefix length %d, not within the %d bits of the address", n, a.BitLen())
	}
	return nil
}

// Quote is s as a message may show it: in double quotes, in printable
// ASCII (a newline shows as \n), at most MaxQuoted characters between
// the quotes ("..." after them when s was cut).
func Quote(s string) string {
	q := strconv.QuoteToASCII(s)
	if len(q) <= MaxQuoted+2 {
		return q
	}
	// Quote rune by rune (a byte that is not UTF-8 is one piece of its
	// own, as QuoteToASCII escapes it) until the next piece would pass
	// the bound: the quoted form of a prefix is the concatenation of its
	// pieces' quoted forms.
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); {
		_, size := utf8.DecodeRuneInString(s[i:])
		piece := strconv.QuoteToASCII(s[i : i+size])
		piece = piece[1 : len(piece)-1]
		if b.Len()-1+len(piece) > MaxQuoted {
			break
		}
		b.WriteString(piece)
		i += size
	}
	b.WriteString(`"...`)
	return b.String()
}

// Clean is s as status may keep it: every rune Text refuses replaced by
// U+FFFD (as is every byte that is not UTF-8), cut to at most max bytes
// on a rune boundary.
func Clean(s string, max int) string {
	var b strings.Builder
	for _, r := range s { // a byte that is not UTF-8 comes as U+FFFD
		if refusedInText(r) {
			r = utf8.RuneError
		}
		if b.Len()+utf8.RuneLen(r) > max {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// CleanCut is Clean with the cut marked: s cleaned, and Cut to max
// bytes when it was longer.
func CleanCut(s string, max int) string {
	// Clean keeps more than max bytes of a value longer than max, so
	// that Cut sees it was longer: a rune takes at most utf8.UTFMax.
	return Cut(Clean(s, max+utf8.UTFMax), max)
}

// CutMarker ends a value Cut shortened.
const CutMarker = "..."

// Cut is s in at most max bytes, for status and messages to keep what a
// source sent without passing a bound: s itself when it fits; else its
// start, cut on a rune boundary, and CutMarker, at most max bytes in
// all (the marker alone when max leaves no room beside it, nothing of
// it when max is shorter). Bytes bound characters too: the API server's
// maxLength, which counts characters, takes what Cut keeps.
func Cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	if max < len(CutMarker) {
		return s[:runeStart(s, max)]
	}
	return s[:runeStart(s, max-len(CutMarker))] + CutMarker
}

// runeStart is the last rune boundary of s at or before i (i < len(s)).
func runeStart(s string, i int) int {
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}

// refusedInText: control and format characters, line and paragraph
// separators (scan refuses what is not UTF-8).
func refusedInText(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) ||
		unicode.Is(unicode.Zl, r) || unicode.Is(unicode.Zp, r)
}

func length(s string, max int) error {
	if len(s) > max {
		return fmt.Errorf("is %d bytes long, more than %d", len(s), max)
	}
	return nil
}

// scan refuses the first rune of s that refused says it must.
func scan(s string, refused func(rune) bool) error {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return fmt.Errorf("is not UTF-8 at byte %d", i)
			}
		}
		if refused(r) {
			return fmt.Errorf("holds %s at byte %d", describe(r), i)
		}
	}
	return nil
}

// describe names a refused rune for a person.
func describe(r rune) string {
	switch r {
	case '\n':
		return "a newline"
	case '\r':
		return "a carriage return"
	case '\t':
		return "a tab"
	case ' ':
		return "a space"
	}
	switch {
	case unicode.IsControl(r):
		return fmt.Sprintf("a control character (U+%04X)", r)
	case unicode.Is(unicode.Cf, r):
		return fmt.Sprintf("an invisible format character (U+%04X)", r)
	case unicode.Is(unicode.Zl, r), unicode.Is(unicode.Zp, r):
		return fmt.Sprintf("a line separator (U+%04X)", r)
	}
	return fmt.Sprintf("whitespace (U+%04X)", r)
}

// Error is a refused value: what it is, the value (quoted) and why.
type Error struct {
	// What names the value for a person: "the guest's address of Network adapter 1".
	What string
	// Value is the value as it came.
	Value string
	// Problem says why it was refused: "holds a newline at byte 13".
	Problem error
}

// Refuse wraps a refusal of Field, Text, Addr or PrefixLength into an
// *Error that names the value; nil stays nil.
func Refuse(what, value string, problem error) error {
	if problem == nil {
		return nil
	}
	return &Error{What: what, Value: value, Problem: problem}
}

// Error says what was refused and why, with the value quoted.
func (e *Error) Error() string {
	return fmt.Sprintf("%s %s %v", e.What, Quote(e.Value), e.Problem)
}

// Unwrap is the problem.
func (e *Error) Unwrap() error { return e.Problem }
