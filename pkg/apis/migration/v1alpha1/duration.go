package v1alpha1

import (
	"encoding/json"
	"fmt"
	"regexp"
	"time"
)

// MaxDuration is the longest duration any field of the API admits (a
// year): far below what Go's time.Duration can hold (about 292 years), so
// that adding one to a time or to another never overflows.
const MaxDuration = 8760 * time.Hour

// Duration is a length of time written as Go writes it ("90s", "5m",
// "1h30m"). The schema admits positive durations of at most MaxDuration,
// each unit at most once, in the order h, m, s, ms, and with few enough
// digits that the rule can never fail to evaluate: a rule that fails on a
// stored value (duration() overflowing) is not ratcheted by the API
// server, so every later write of that object, its status included, would
// be refused; a rule that is false for it is.
//
// Unlike metav1.Duration, decoding never fails: a value the schema of an
// older release admitted but Go cannot read (9999999999h overflows) is
// kept as Raw, and the accessors give the closest value in range instead
// (see PolicySpec.DurationProblems). One bad value would otherwise fail
// the decoding of every LIST that holds it, freezing the controller's
// cache for every namespace.
//
// +kubebuilder:validation:Type=string
// +kubebuilder:validation:MaxLength=64
// +kubebuilder:validation:XValidation:rule="self.size() > 0 && self.matches('^([0-9]{1,6}(\\\\.[0-9]{1,9})?h)?([0-9]{1,7}(\\\\.[0-9]{1,9})?m)?([0-9]{1,9}(\\\\.[0-9]{1,9})?s)?([0-9]{1,12}(\\\\.[0-9]{1,9})?ms)?$') && !self.matches('^([0]+(\\\\.[0]+)?(ms|s|m|h))+$') && duration(self) <= duration('8760h')",message="must be a positive duration of at most 8760h (a year), in hours, minutes, seconds and milliseconds in that order, such as 90s, 5m or 1h30m"
type Duration struct {
	// Duration is the value; zero when Raw is set.
	Duration time.Duration `json:"-"`
	// Raw is the stored text when it is not a positive duration of at most
	// MaxDuration (see MarshalJSON).
	Raw string `json:"-"`
}

// DurationOf is d as an API duration.
func DurationOf(d time.Duration) *Duration { return &Duration{Duration: d} }

// UnmarshalJSON reads any JSON string, and never fails on its content.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		// Not a string (the schema has always required one): keep the
		// text rather than fail the whole object.
		s = string(b)
	}
	*d = ParseDuration(s)
	return nil
}

// MarshalJSON writes the duration as Go prints it. A stored value too long
// is written as MaxDuration, the value in force, so that a copy of it
// (status.appliedSpec) passes the schema; any other stored text is
// written back as it was read.
func (d Duration) MarshalJSON() ([]byte, error) {
	switch {
	case d.Raw == "":
		return json.Marshal(d.Duration.String())
	case tooLong(d.Raw):
		return json.Marshal(MaxDuration.String())
	}
	return json.Marshal(d.Raw)
}

// ParseDuration reads s as a Duration: a positive duration of at most
// MaxDuration, or else one that keeps s as Raw.
func ParseDuration(s string) Duration {
	v, err := time.ParseDuration(s)
	if err != nil || v <= 0 || v > MaxDuration {
		return Duration{Raw: s}
	}
	return Duration{Duration: v}
}

// or is the value in force: d's own when valid; MaxDuration when d is
// stored too long (or too long for Go to read); def when d is unset, zero,
// negative or not a duration.
func (d *Duration) or(def time.Duration) time.Duration {
	switch {
	case d == nil:
		return def
	case d.Raw == "":
		if d.Duration <= 0 {
			return def
		}
		return min(d.Duration, MaxDuration)
	case tooLong(d.Raw):
		return MaxDuration
	}
	return def
}

// problem describes an out-of-range d stored at path, or "".
func (d *Duration) problem(path string, def time.Duration) string {
	if d == nil || (d.Raw == "" && d.Duration > 0 && d.Duration <= MaxDuration) {
		return ""
	}
	stored := d.Raw
	if stored == "" {
		stored = d.Duration.String()
	}
	return fmt.Sprintf("%s %q is not a positive duration of at most %s: %s is used instead", path, stored, MaxDuration, d.or(def))
}

// tooLong says s is written as a duration but is longer than MaxDuration
// (or longer than Go can hold).
func tooLong(s string) bool {
	if !durationSyntax.MatchString(s) {
		return false
	}
	v, err := time.ParseDuration(s)
	return err != nil || v > MaxDuration
}

// durationSyntax is how Go writes a positive duration, whatever its size.
var durationSyntax = regexp.MustCompile(`^([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))*$`)
