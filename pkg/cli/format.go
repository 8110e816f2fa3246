package cli

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"platform.example/vm-migration/pkg/naming"
)

// none is what a table cell shows for a value that is not known.
const none = "<none>"

// humanBytes formats a byte count with binary units: "512 B", "8.0 MiB".
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// humanRate formats bytes per second, or "-" when nothing moves.
func humanRate(bytesPerSecond int64) string {
	if bytesPerSecond <= 0 {
		return "-"
	}
	return humanBytes(bytesPerSecond) + "/s"
}

// humanETA formats an estimate in seconds, or "-" when there is none.
func humanETA(seconds *int64) string {
	if seconds == nil || *seconds < 0 {
		return "-"
	}
	return duration.HumanDuration(time.Duration(*seconds) * time.Second)
}

// age formats how long ago t was, as kubectl does; "<unknown>" for no time.
func age(t *metav1.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// timestamp formats a time in UTC, RFC 3339, or "-" for no time.
func timestamp(t *metav1.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// orNone returns s, or "<none>" when it is empty.
func orNone(s string) string {
	if s == "" {
		return none
	}
	return s
}

// parsePercent reads "45%" or CDI's "45.20%"; ok is false for anything
// else ("NaN%" too).
func parsePercent(s string) (float64, bool) {
	v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), "%"), 64)
	if err != nil || math.IsNaN(v) || !strings.HasSuffix(strings.TrimSpace(s), "%") {
		return 0, false
	}
	return min(max(v, 0), 100), true
}

// bar draws a progress bar of width cells for a fraction in [0, 1] (NaN
// draws as 0).
func bar(fraction float64, width int) string {
	if math.IsNaN(fraction) {
		fraction = 0
	}
	fraction = min(max(fraction, 0), 1)
	filled := int(fraction * float64(width))
	var b strings.Builder
	b.WriteByte('[')
	b.WriteString(strings.Repeat("=", filled))
	if filled < width {
		b.WriteByte('>')
		b.WriteString(strings.Repeat(" ", width-filled-1))
	}
	b.WriteByte(']')
	return b.String()
}

// humanDuration formats a duration without trailing zero units, as the
// controller writes status.downtime.duration: "30m", "24h", "1h30m",
// "90s" as "1m30s".
func humanDuration(d time.Duration) string {
	return naming.Duration(d)
}
