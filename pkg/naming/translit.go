package naming

import (
	"strings"
	"unicode"
)

// The tables below map lower-case letters that Unicode compatibility
// decomposition (NFKD) leaves outside ASCII to ASCII. Letters with
// diacritics never reach them: NFKD splits them into a base letter and
// combining marks, and the marks are removed (é→e, ё→е→e, й→и→i, ї→і→i,
// ά→α→a). A letter found in no table is dropped.

// latinLetters are the Latin letters that do not decompose.
var latinLetters = map[rune]string{
	'ß': "ss", 'æ': "ae", 'ð': "d", 'ø': "o", 'þ': "th", 'đ': "d",
	'ħ': "h", 'ı': "i", 'ĸ': "k", 'ł': "l", 'ŋ': "ng", 'œ': "oe",
	'ŧ': "t", 'ƀ': "b", 'ƒ': "f", 'ȷ': "j", 'ə': "e",
}

// cyrillicLetters follow the Cyrillic table of ICAO Doc 9303 (the
// transliteration of machine-readable travel documents), which is ASCII
// only; where languages read a letter differently it gives the Russian
// reading (г→g, not the Ukrainian h). The soft sign has no transliteration.
var cyrillicLetters = map[rune]string{
	'а': "a", 'б': "b", 'в': "v", 'г': "g", 'д': "d", 'е': "e",
	'ж': "zh", 'з': "z", 'и': "i", 'к': "k", 'л': "l", 'м': "m",
	'н': "n", 'о': "o", 'п': "p", 'р': "r", 'с': "s", 'т': "t",
	'у': "u", 'ф': "f", 'х': "kh", 'ц': "ts", 'ч': "ch", 'ш': "sh",
	'щ': "shch", 'ъ': "ie", 'ы': "y", 'ь': "", 'э': "e", 'ю': "iu",
	'я': "ia", 'і': "i", 'є': "ie", 'ґ': "g", 'ђ': "d", 'ѕ': "dz",
	'ј': "j", 'љ': "lj", 'њ': "nj", 'ћ': "c", 'џ': "dz",
}

// greekLetters follow the letter table of ELOT 743 (the Greek standard
// behind ISO 843, used in Greek passports). Its vowel digraphs are applied
// by greekDigraph; its consonant clusters (μπ, ντ, γγ, γκ) are written
// letter by letter.
var greekLetters = map[rune]string{
	'α': "a", 'β': "v", 'γ': "g", 'δ': "d", 'ε': "e", 'ζ': "z",
	'η': "i", 'θ': "th", 'ι': "i", 'κ': "k", 'λ': "l", 'μ': "m",
	'ν': "n", 'ξ': "x", 'ο': "o", 'π': "p", 'ρ': "r", 'σ': "s",
	'ς': "s", 'τ': "t", 'υ': "y", 'φ': "f", 'χ': "ch", 'ψ': "ps",
	'ω': "o",
}

// greekVoiced are the Greek letters before which αυ, ευ and ηυ read v
// (vowels and voiced consonants); before any other letter, or at the end
// of a word, they read f.
const greekVoiced = "αεηιουωβγδζλμνρ"

// greekDigraphFirst are the vowels that open a digraph with υ.
var greekDigraphFirst = map[rune]string{'ο': "o", 'α': "a", 'ε': "e", 'η': "i"}

// combiningDiaeresis (dialytika) on υ says it is not part of a digraph.
const combiningDiaeresis = '\u0308'

// transliterate returns the ASCII form of the lower-case letter r, how many
// of the runes that follow it (rest, in NFKD, any case) it consumed, and
// false when r has no transliteration and must be dropped.
func transliterate(r rune, rest []rune) (out string, skip int, ok bool) {
	if out, skip, ok := greekDigraph(r, rest); ok {
		return out, skip, true
	}
	for _, table := range []map[rune]string{latinLetters, cyrillicLetters, greekLetters} {
		if out, ok := table[r]; ok {
			return out, 0, true
		}
	}
	return "", 0, false
}

// greekDigraph applies the ELOT 743 vowel digraphs: ου→ou, and αυ, ευ, ηυ
// → av, ev, iv or af, ef, if. A mark on the first vowel (άυ) or a
// dialytika on the υ (αϋ) means two separate vowels.
func greekDigraph(r rune, rest []rune) (out string, skip int, ok bool) {
	first := greekDigraphFirst[r]
	if first == "" || len(rest) == 0 || unicode.ToLower(rest[0]) != 'υ' {
		return "", 0, false
	}
	after := rest[1:]
	for len(after) > 0 && unicode.Is(unicode.Mn, after[0]) {
		if after[0] == combiningDiaeresis {
			return "", 0, false
		}
		after = after[1:]
	}
	if r == 'ο' {
		return "ou", 1, true
	}
	if len(after) > 0 && strings.ContainsRune(greekVoiced, unicode.ToLower(after[0])) {
		return first + "v", 1, true
	}
	return first + "f", 1, true
}
