package naming

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// sourceHash is the suffix TargetName appends: 8 hex digits of the SHA-256
// of the exact source name.
func sourceHash(source string) string {
	sum := sha256.Sum256([]byte(source))
	return hex.EncodeToString(sum[:])[:8]
}

// checkTargetName fails t unless name is what TargetName may return for
// source: a DNS-1123 label of at most MaxTargetNameLength characters, a
// fixed point of TargetName, whose DataVolume names are "<name>-disk-<i>"
// and valid for up to 1000 disks.
func checkTargetName(t *testing.T, source, name string) {
	t.Helper()
	require.Regexp(t, dns1123, name, "TargetName(%q): not a DNS-1123 label of at most %d characters", source, MaxTargetNameLength)
	require.LessOrEqual(t, len(name), MaxTargetNameLength, "TargetName(%q) = %q: not a DNS-1123 label of at most %d characters", source, name, MaxTargetNameLength)
	require.Equal(t, name, TargetName(name), "TargetName(%q) = %q, but TargetName(%q) differs: not a fixed point", source, name, name)
	for _, i := range []int{0, 9, 10, 99, 100, 999} {
		dv := DataVolume(name, i)
		require.Equal(t, fmt.Sprintf("%s-disk-%d", name, i), dv, "DataVolume(%q, %d), want the valid label <name>-disk-<i>", name, i)
		require.Regexp(t, dns1123, dv, "DataVolume(%q, %d), want a valid label", name, i)
	}
}

func TestTargetName(t *testing.T) {
	long63 := strings.Repeat("a", 63)
	long64 := strings.Repeat("b", 64)
	long300 := strings.Repeat("Datenbank-", 30)
	fits := "a" + strings.Repeat("-0", 26) + "z" // 54 characters, a valid label
	tests := map[string]struct{ source, want string }{
		"ascii label unchanged":       {"web-01", "web-01"},
		"single character":            {"a", "a"},
		"label with a run of dashes":  {"web--01", "web--01"},
		"label of 54 unchanged":       {fits, fits},
		"separators folded":           {"Web_01 (prod)", "web-01-prod"},
		"separators trimmed":          {"  --DB_primary--  ", "db-primary"},
		"ascii symbols separate":      {"a+b=c|d~e", "a-b-c-d-e"},
		"unicode punctuation":         {"web«01»—prod", "web-01-prod"},
		"german umlauts":              {"Überprüfung", "uberprufung"},
		"german sharp s":              {"Straße Köln", "strasse-koln"},
		"capital sharp s":             {"STRAẞE", "strasse"},
		"french":                      {"Serveur Élysée à Noël", "serveur-elysee-a-noel"},
		"french ligature":             {"Cœur-Œuvre", "coeur-oeuvre"},
		"polish":                      {"Łódź Żółć Gęś", "lodz-zolc-ges"},
		"turkish":                     {"İstanbul Şube Çağrı", "istanbul-sube-cagri"},
		"turkish dotless i":           {"Işık", "isik"},
		"danish norwegian":            {"Ærø Tromsø", "aero-tromso"},
		"swedish":                     {"Ångström Göteborg", "angstrom-goteborg"},
		"icelandic":                   {"Þórshöfn Dalvík Garðabær", "thorshofn-dalvik-gardabaer"},
		"serbo-croatian latin":        {"Đorđe", "dorde"},
		"full-width and ligature":     {"ＷＥＢ０１ ﬁle", "web01-file"},
		"greek":                       {"Αθήνα", "athina"},
		"greek capitals":              {"ΘΕΣΣΑΛΟΝΙΚΗ", "thessaloniki"},
		"greek ου and ευ voiced":      {"Πρωτεύουσα", "protevousa"},
		"greek ευ before vowel":       {"Ευρώπη", "evropi"},
		"greek αυ unvoiced":           {"Αυτοκίνητο", "aftokinito"},
		"greek αυ at end":             {"ταυ", "taf"},
		"greek dialytika":             {"προϋπόθεση", "proypothesi"},
		"greek accent splits":         {"άυλος", "aylos"},
		"greek ψ χ":                   {"Ψυχή", "psychi"},
		"russian":                     {"Москва", "moskva"},
		"russian words":               {"Сервер базы данных", "server-bazy-dannykh"},
		"russian iu ia yo":            {"Юля Ёлкина", "iulia-elkina"},
		"russian shch":                {"Щука", "shchuka"},
		"russian hard and soft sign":  {"Объект Ольга", "obieekt-olga"},
		"ukrainian":                   {"Київ Євген Ґанок", "kiiv-ievgen-ganok"},
		"serbian cyrillic":            {"Љубљана Ђорђе Џеп", "ljubljana-dorde-dzep"},
		"japanese":                    {"東京サーバー", "vm-" + sourceHash("東京サーバー")},
		"chinese":                     {"数据库服务器", "vm-" + sourceHash("数据库服务器")},
		"chinese with digits":         {"数据库服务器01", "01-" + sourceHash("数据库服务器01")},
		"mixed scripts":               {"Web-東京-01", "web-01-" + sourceHash("Web-東京-01")},
		"dropped letter separates":    {"a中b", "a-b-" + sourceHash("a中b")},
		"emoji alone":                 {"🚀", "vm-" + sourceHash("🚀")},
		"emoji in a name":             {"web🙂", "web-" + sourceHash("web🙂")},
		"non-ascii symbols":           {"Web©€", "web-" + sourceHash("Web©€")},
		"compatibility symbol":        {"Web™", "webtm"},
		"invalid utf-8":               {"web\xff", "web-" + sourceHash("web\xff")},
		"empty":                       {"", "vm-e3b0c442"}, // pinned: the hash must never change
		"pinned, as in migrations.md": {"数据库服务器", "vm-2cba3fb4"},
		"pinned emoji, migrations.md": {"web🙂", "web-19d19d3e"},
		"separators only":             {"***", "vm-" + sourceHash("***")},
		"63 characters":               {long63, long63[:45] + "-" + sourceHash(long63)},
		"64 characters":               {long64, long64[:45] + "-" + sourceHash(long64)},
		"300 characters":              {long300, "datenbank-datenbank-datenbank-datenbank-daten-" + sourceHash(long300)},
		"cut before a dash":           {strings.Repeat("ab-", 30), strings.Repeat("ab-", 14) + "ab-" + sourceHash(strings.Repeat("ab-", 30))},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := TargetName(tc.source)
			require.Equal(t, tc.want, got, "TargetName(%q)", tc.source)
			checkTargetName(t, tc.source, got)
		})
	}
}

// TestTargetNameDistinct: sources that lose something to the fold (a cut, a
// dropped character) get distinct names even when their readable parts are
// equal.
func TestTargetNameDistinct(t *testing.T) {
	prefix := strings.Repeat("production-database-server-", 10)
	tests := map[string][2]string{
		"long, differing at the end":   {prefix + "a", prefix + "b"},
		"63 characters, last differs":  {strings.Repeat("x", 62) + "1", strings.Repeat("x", 62) + "2"},
		"different CJK names":          {"東京", "大阪"},
		"different emoji":              {"web🙂", "web😀"},
		"same CJK, different position": {"web-東京", "東京-web"},
		"all-dropped and empty":        {"", "🚀"},
		"dropped character vs none":    {"web-01", "web-01🙂"},
		"only dropped characters":      {"web-東-01", "web-京-01"},
		"cut names, one with a symbol": {prefix, prefix + "™"},
	}
	for name, pair := range tests {
		t.Run(name, func(t *testing.T) {
			a, b := TargetName(pair[0]), TargetName(pair[1])
			require.NotEqual(t, a, b, "TargetName(%q) = TargetName(%q), want distinct names", pair[0], pair[1])
		})
	}
}

// TestTargetNameFoldsAlike documents the names that may collide: sources
// that differ only in case, separators or what transliteration folds, with
// nothing dropped and nothing cut, get the same name (no hash), as "Web_01"
// and "web-01" always did. Refusing the second migration of a target name
// is the job of the target-name claim, not of the default name.
func TestTargetNameFoldsAlike(t *testing.T) {
	tests := map[string][2]string{
		"case":                      {"WEB-01", "web-01"},
		"separators":                {"Web_01 (prod)", "web-01-prod"},
		"diaeresis":                 {"Ü", "U"},
		"sharp s":                   {"Straße", "strasse"},
		"decomposed and composed":   {"Ü", "U\u0308"},
		"cyrillic yo and ye":        {"Ёлка", "Елка"},
		"soft sign":                 {"Ольга", "Олга"},
		"full-width and ascii":      {"ＷＥＢ", "web"},
		"greek and latin alike":     {"Αθήνα", "athina"},
		"cyrillic and latin alike ": {"Москва", "moskva"},
	}
	for name, pair := range tests {
		t.Run(name, func(t *testing.T) {
			a, b := TargetName(pair[0]), TargetName(pair[1])
			require.Equal(t, a, b, "TargetName(%q), TargetName(%q): want the same name, without hash", pair[0], pair[1])
			require.NotContains(t, a, sourceHash(pair[0]), "TargetName(%q): want the same name as TargetName(%q), without hash", pair[0], pair[1])
		})
	}
}

// checkHashRule fails t unless name, returned for source, is the lossless
// fold of source when nothing was dropped or cut, and ends in the hash of
// source otherwise; it reports whether a hash was due.
func checkHashRule(t *testing.T, source, name string) (hashed bool) {
	t.Helper()
	folded, lossy := foldLabel(source)
	switch {
	case isTargetLabel(source):
		require.Equal(t, source, name, "TargetName(%q): a valid label that fits must be unchanged", source)
		return false
	case lossy || folded == "" || len(folded) > MaxTargetNameLength:
		require.True(t, strings.HasSuffix(name, "-"+sourceHash(source)), "TargetName(%q) = %q: lost characters (fold %q) but has no hash", source, name, folded)
		return true
	}
	require.Equal(t, folded, name, "TargetName(%q), want its lossless fold", source)
	return false
}

// randomName draws a name from the scripts and characters TargetName treats
// differently: ASCII, Latin with diacritics and without, combining marks,
// Greek, Cyrillic, CJK, emoji, punctuation, symbols, controls and invalid
// UTF-8 bytes.
func randomName(rng *rand.Rand) string {
	ranges := [][2]rune{
		{0x00, 0x7f}, {'a', 'z'}, {'A', 'Z'}, {0xa0, 0x24f}, {0x300, 0x36f},
		{0x370, 0x3ff}, {0x400, 0x4ff}, {0x2000, 0x206f}, {0x2100, 0x21ff},
		{0x3040, 0x30ff}, {0x4e00, 0x4fff}, {0xff00, 0xffef}, {0x1f300, 0x1f64f},
	}
	var b strings.Builder
	for n := rng.Intn(90); n > 0; n-- {
		if rng.Intn(40) == 0 {
			b.WriteByte(byte(0x80 + rng.Intn(0x80))) // invalid UTF-8
			continue
		}
		r := ranges[rng.Intn(len(ranges))]
		b.WriteRune(r[0] + rune(rng.Intn(int(r[1]-r[0]+1))))
	}
	return b.String()
}

// TestTargetNameProperties: over random names, TargetName is deterministic,
// always a valid label of the right length with valid DataVolume names, and
// is either the lossless fold of the source or ends in the source's hash.
func TestTargetNameProperties(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	seen := map[string]string{}
	for range 10000 {
		source := randomName(rng)
		got := TargetName(source)
		checkTargetName(t, source, got)
		require.Equal(t, got, TargetName(source), "TargetName(%q) is not deterministic", source)
		if checkHashRule(t, source, got) {
			if other, ok := seen[got]; ok {
				require.Equal(t, other, source, "TargetName(%q) = TargetName(%q) = %q", source, other, got)
			}
			seen[got] = source
		}
	}
}

// FuzzTargetName checks the properties of TargetName on any input.
func FuzzTargetName(f *testing.F) {
	for _, seed := range []string{"", "web-01", "Web_01 (prod)", "Überprüfung", "Αυτοκίνητο", "Подъезд",
		"東京サーバー", "web🙂", "προϋπόθεση", "ＷＥＢ", "\xff", strings.Repeat("a", 300)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, source string) {
		got := TargetName(source)
		checkTargetName(t, source, got)
		require.Equal(t, got, TargetName(source), "TargetName(%q) is not deterministic", source)
		checkHashRule(t, source, got)
		if dns1123.MatchString(source) && len(source) <= MaxTargetNameLength {
			require.Equal(t, source, got, "TargetName(%q): a valid label that fits must be unchanged", source)
		}
	})
}
