package cli

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// figure is the overall progress a view shows beside the phase.
var figure = regexp.MustCompile(`^(\d+)%$`)

// TestWatchedProgressNeverGoesBack: a migration watched from its transfer
// to its end (its statuses as the controller writes them, in the order
// it writes them) never shows a smaller figure than it showed (issue 50
// item 7: --watch showed Converting 100%, then Importing 0%, then
// CreatingVM 100%): not in get's view, its --watch line, nor list's
// PROGRESS column.
func TestWatchedProgressNeverGoesBack(t *testing.T) {
	all := fixtures()
	sequence := []string{"transfer-early", "transferring", "converting", "import-start", "importing", "starting", "succeeded"}
	views := map[string]func(name string) string{
		"get": func(name string) string {
			var buf bytes.Buffer
			require.NoError(t, printProgress(&buf, all[name], testNow))
			head, _, _ := strings.Cut(buf.String(), "\n")
			_, p, _ := strings.Cut(head, ", ")
			return p
		},
		"--watch line": func(name string) string {
			fields := strings.Fields(progressLine(all[name]))
			return fields[2]
		},
		"list": func(name string) string {
			return cell(t, tableRow(all[name], tableOptions{wide: true}, testNow), "PROGRESS")
		},
	}
	for view, shown := range views {
		t.Run(view, func(t *testing.T) {
			var seen []string
			last := -1
			for _, name := range sequence {
				p := shown(name)
				seen = append(seen, string(phaseOf(all[name]))+" "+p)
				m := figure.FindStringSubmatch(p)
				require.NotNil(t, m, "%s: no figure (%q): %v", name, p, seen)
				pct, _ := strconv.Atoi(m[1])
				assert.GreaterOrEqual(t, pct, last, "the figure went back: %v", seen)
				last = max(last, pct)
			}
			assert.Equal(t, 100, last, "%v", seen)
		})
	}
}
