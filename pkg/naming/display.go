package naming

import (
	"strings"
	"time"
)

// MaxDisplayName is the width tables give a name that comes from vSphere:
// a VM name with escaped characters runs to hundreds of characters.
const MaxDisplayName = 40

// Shorten cuts s to at most n runes for a table, keeping its start and its
// end around "...": the ends of long VM names are what tells them apart.
// Strings of at most n runes, and any n below 5, are returned as they are.
func Shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n || n < 5 {
		return s
	}
	keep := n - 3
	head := (keep + 1) / 2
	return string(r[:head]) + "..." + string(r[len(r)-(keep-head):])
}

// MaxSummary is the width of a message's short form (Summarize): the Last
// Error column of kubectl get -o wide and kubectl vmm list -o wide.
const MaxSummary = 80

// Summarize is a message's short form for a table: on one line, and when
// longer than MaxSummary runes its start, cut after a word, ended with
// "..." (a single word too long is cut inside).
func Summarize(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= MaxSummary {
		return s
	}
	cut := MaxSummary - 3
	for i := cut; i > 0; i-- {
		if r[i] == ' ' {
			cut = i
			break
		}
	}
	return strings.TrimRight(string(r[:cut]), " ,;:") + "..."
}

// Duration is d as tables show it, without trailing zero units: "54s",
// "35m20s", "30m", "24h", "1h30m"; "0s" for none.
func Duration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
