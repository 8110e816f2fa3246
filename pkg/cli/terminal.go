package cli

import (
	"bytes"
	"io"
	"math"
	"strings"

	"platform.example/vm-migration/pkg/untrusted"
)

// What a terminal shows. Status holds text that neither the controller
// nor the user wrote: what a guest says of itself (its OS name, its
// interfaces, virt-v2v's reading of its files), what vSphere names, what
// the cluster answered. A terminal acts on some characters instead of
// showing them: C0 and C1 controls (an escape or CSI sequence moves the
// cursor, rewrites the title, clears the screen; a backspace or a
// carriage return overwrites what came before); format characters hide
// or reorder text (a right-to-left override shows "exe.txt" for
// "txt.exe", a zero-width space hides a difference). The views show
// every such character, and every byte that is not UTF-8, as U+FFFD:
// visible, one cell wide, as the controller's untrusted.Clean keeps
// them out of status. Two places do it:
//
//   - clean, for each string a view takes from the API: it also folds
//     line breaks and tabs, so that a string is one line (it cannot
//     forge one) and one table cell;
//   - terminalWriter, the writer every human view prints through: the
//     layout's own newlines and tabs pass, any other character clean
//     refuses is replaced, so that a string a view did not clean still
//     cannot drive the terminal.
//
// The machine formats (-o yaml, json, name, jsonpath, go-template; plan
// -o yaml, -o json, --domain) print the objects as stored, for readers
// that need the exact values.

// terminalWriter writes a human view to w: every rune clean would refuse
// becomes U+FFFD, but for the newlines and tabs of the layout. Each Write
// is taken whole (a rune split across two writes would show as U+FFFD
// marks); the views write whole lines, tabwriter whole cells.
type terminalWriter struct {
	w io.Writer
}

func (t terminalWriter) Write(p []byte) (int, error) {
	if plainText(p) {
		return t.w.Write(p)
	}
	var b bytes.Buffer
	for rest := p; len(rest) > 0; {
		i := bytes.IndexAny(rest, "\n\t")
		if i < 0 {
			i = len(rest)
		}
		b.WriteString(untrusted.Clean(string(rest[:i]), math.MaxInt))
		if i < len(rest) {
			b.WriteByte(rest[i])
			i++
		}
		rest = rest[i:]
	}
	if _, err := t.w.Write(b.Bytes()); err != nil {
		return 0, err
	}
	return len(p), nil
}

// plainText reports whether p is printable ASCII, newlines and tabs
// only: what most views print, passed on as it is.
func plainText(p []byte) bool {
	for _, c := range p {
		if (c < ' ' && c != '\n' && c != '\t') || c > '~' {
			return false
		}
	}
	return true
}

// clean makes a string from the API safe and single-line for a terminal:
// whitespace (line breaks and tabs included) is folded into single
// spaces, and every control or format character and every byte that is
// not UTF-8 shows as U+FFFD; printable text (accented letters, CJK) is
// kept.
func clean(s string) string {
	return untrusted.Clean(strings.Join(strings.Fields(s), " "), math.MaxInt)
}

// view is where a command prints a view for a person: its output stream
// through a terminalWriter. The machine formats print to streams.Out.
func (e *env) view() io.Writer {
	return terminalWriter{w: e.streams.Out}
}
