package naming

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
