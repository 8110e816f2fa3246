package naming

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// MaxTargetNameLength is the longest default target VM name: 63 minus the
// longest DataVolume suffix, "-disk-999", so that DataVolume(name, i) is
// exactly "<name>-disk-<i>" (readable, never shortened by Child) for up to
// 1000 disks.
const MaxTargetNameLength = MaxNameLength - len("-disk-999")

// targetHashLength is the number of hex digits of the SHA-256 of the source
// name appended when the readable part alone could not keep sources apart.
const targetHashLength = 8

// TargetName is the default name of the target VirtualMachine migrated from
// the vSphere VM named sourceName, used when spec.target.name is empty.
//
// It folds the name into a DNS-1123 label: compatibility decomposition
// (NFKD) with the combining marks removed (é→e, Ü→u, ﬁ→fi, full-width
// letters to ASCII), Latin letters that do not decompose by a table (ß→ss,
// æ→ae, ø→o, đ→d, ł→l, þ→th, œ→oe, ı→i...), Cyrillic by the ICAO Doc 9303
// table and Greek by the ELOT 743 table (see translit.go), lower case;
// spaces, punctuation and ASCII symbols are separators, and every run of
// them (and of dropped characters) becomes one '-', trimmed at both ends.
//
// A DNS-1123 label of at most MaxTargetNameLength characters is returned
// unchanged. Otherwise, when the fold loses nothing and fits, the folded
// form is the name, with no hash: "Web_01 (prod)" gives "web-01-prod".
// When any character had to be dropped (letters of other scripts such as
// CJK, emoji, symbols outside ASCII, invalid UTF-8), when the folded form
// is empty, or when it is too long, the name is "<readable>-<hash>": the
// folded form cut to fit, or "vm" when empty, then the first 8 hex digits
// of the SHA-256 of the exact source name. So sources that lose anything get distinct names (up to a
// 32-bit hash collision); sources whose names differ only in case,
// separators or what transliteration folds (Ü and U, ß and ss) may share
// one.
//
// The result is always a valid DNS-1123 label of at most
// MaxTargetNameLength characters, and TargetName(TargetName(s)) ==
// TargetName(s).
func TargetName(sourceName string) string {
	if isTargetLabel(sourceName) {
		return sourceName
	}
	folded, lossy := foldLabel(sourceName)
	if !lossy && folded != "" && len(folded) <= MaxTargetNameLength {
		return folded
	}
	sum := sha256.Sum256([]byte(sourceName))
	hash := hex.EncodeToString(sum[:])[:targetHashLength]
	keep := MaxTargetNameLength - len(hash) - 1
	if len(folded) > keep {
		folded = strings.TrimRight(folded[:keep], "-")
	}
	if folded == "" {
		folded = "vm"
	}
	return folded + "-" + hash
}

// isTargetLabel reports whether s is a DNS-1123 label of at most
// MaxTargetNameLength characters, which TargetName keeps as it is (even
// with the runs of '-' that folding would shorten).
func isTargetLabel(s string) bool {
	if s == "" || len(s) > MaxTargetNameLength || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// foldLabel returns the transliterated, lower-case, dash-separated form of
// name (ASCII letters, digits and single inner dashes only, any length) and
// whether a character was dropped on the way.
func foldLabel(name string) (label string, lossy bool) {
	runes := []rune(norm.NFKD.String(name))
	var b strings.Builder
	dash := false
	for i := 0; i < len(runes); i++ {
		r := unicode.ToLower(runes[i])
		var out string
		switch {
		case unicode.Is(unicode.Mn, r):
			continue // a diacritic of the letter before it
		case 'a' <= r && r <= 'z' || '0' <= r && r <= '9':
			out = string(r)
		case isSeparator(r):
			dash = b.Len() > 0
			continue
		default:
			var skip int
			var ok bool
			out, skip, ok = transliterate(r, runes[i+1:])
			if !ok { // dropped, and a word boundary for readability
				lossy = true
				dash = b.Len() > 0
				continue
			}
			i += skip
		}
		if out == "" {
			continue
		}
		if dash {
			b.WriteByte('-')
			dash = false
		}
		b.WriteString(out)
	}
	return b.String(), lossy
}

// isSeparator reports whether r separates words: ASCII punctuation,
// symbols and space, and any Unicode space or punctuation.
func isSeparator(r rune) bool {
	if r < unicode.MaxASCII {
		return unicode.IsPrint(r) || unicode.IsSpace(r)
	}
	return unicode.IsSpace(r) || unicode.IsPunct(r)
}
