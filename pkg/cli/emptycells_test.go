package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestEmptyCellsOneWay: a cell of list and get's table with nothing to
// show reads "-", whichever column and whatever status holds: not
// "<none>" in one column, "-" in the next and blank in a third (issue 50
// item 7), nor "<unknown>". (DOWNTIME's "unknown" is not empty: an
// outage goes on, since a time status does not hold.)
func TestEmptyCellsOneWay(t *testing.T) {
	opts := tableOptions{wide: true, withNamespace: true}
	header := tableHeader(opts)
	seen := map[string]bool{} // column and value, each reported once
	for _, v := range statusVariants() {
		row := tableRow(v.m, opts, testNow)
		for i, c := range row {
			switch c {
			case "", none, "<unknown>", "<nil>":
				if key := header[i] + " " + c; !seen[key] {
					seen[key] = true
					assert.Failf(t, "an empty cell not written as -", "%s is %q (%s)", header[i], c, v.name)
				}
			}
		}
	}
	// The fixtures have cells of every column with nothing in them.
	dashes := map[string]bool{}
	for _, m := range allFixtures() {
		for i, c := range tableRow(&m, opts, testNow) {
			if c == "-" {
				dashes[header[i]] = true
			}
		}
	}
	for _, col := range []string{"PROGRESS", "TARGET", "REASON", "DISKS", "WAITING FOR", "RATE", "ETA", "DOWNTIME", "LAST ERROR"} {
		assert.True(t, dashes[col], "no fixture shows an empty %s", col)
	}
}
