package v1alpha1

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// listWithDurations is a LIST answer as the API server sends it: one
// migration per namespace, the first with the durations given.
func listWithDurations(stall, start, shutdown, deadline string) []byte {
	return []byte(`{"apiVersion":"migration.platform.example/v1alpha1","kind":"VirtualMachineMigrationList","metadata":{},"items":[
  {"metadata":{"name":"bad","namespace":"tenant-a"},"spec":{"source":{"url":"https://vc/sdk","credentialsSecretRef":{"name":"c"},"vm":{"name":"x"}},
   "policy":{"stallTimeout":"` + stall + `","startTimeout":"` + start + `","shutdown":{"timeout":"` + shutdown + `"},"retry":{"deadline":"` + deadline + `"}}}},
  {"metadata":{"name":"good","namespace":"tenant-b"},"spec":{"source":{"url":"https://vc/sdk","credentialsSecretRef":{"name":"c"},"vm":{"name":"y"}},
   "policy":{"stallTimeout":"30m","retry":{"deadline":"24h"}}}}]}`)
}

// TestListDecodesWhateverDurationsAreStored: one stored duration that Go's
// parser cannot read (it overflows) must not fail decoding the LIST an
// informer reads, which would freeze the cache of every namespace.
func TestListDecodesWhateverDurationsAreStored(t *testing.T) {
	for name, tc := range map[string]struct{ stall, start, shutdown, deadline string }{
		"overflowing hours":   {"9999999999h", "2562048h", "9223372036854775808ns", "99999999999999999999s"},
		"beyond the maximum":  {"8761h", "8760h0m0.000000001s", "1000000h", "525601m"},
		"not a duration":      {"soon", "", "1x", "-5m"},
		"fractions and zeros": {"0.5h", "000000000000000000000001h", "1.000000000000000000001s", "0s"},
	} {
		t.Run(name, func(t *testing.T) {
			var list VirtualMachineMigrationList
			require.NoError(t, json.Unmarshal(listWithDurations(tc.stall, tc.start, tc.shutdown, tc.deadline), &list),
				"one migration's durations must not fail the list")
			require.Len(t, list.Items, 2)
			good := list.Items[1].Spec.Policy
			assert.Equal(t, 30*time.Minute, good.StallAfter())
			assert.Equal(t, 24*time.Hour, good.RetryDeadline())
		})
	}
}

// TestDurationValues: what the accessors give for each stored value, and
// which values are reported out of range.
func TestDurationValues(t *testing.T) {
	for _, tc := range []struct {
		stored  string
		want    time.Duration
		invalid bool
	}{
		{"90s", 90 * time.Second, false},
		{"1h30m", 90 * time.Minute, false},
		{"8760h", MaxDuration, false},
		{"0.5h", 30 * time.Minute, false},
		{"000000000000000000000001h", time.Hour, false},
		{"8761h", MaxDuration, true},
		{"9999999999h", MaxDuration, true},
		{"99999999999999999999s", MaxDuration, true},
		{"2562048h", MaxDuration, true},
		{"soon", DefaultStallTimeout, true},
		{"-5m", DefaultStallTimeout, true},
		{"0s", DefaultStallTimeout, true},
	} {
		t.Run(tc.stored, func(t *testing.T) {
			var d Duration
			require.NoError(t, json.Unmarshal([]byte(`"`+tc.stored+`"`), &d))
			p := PolicySpec{StallTimeout: &d}
			assert.Equal(t, tc.want, p.StallAfter())
			problems := p.DurationProblems()
			if tc.invalid {
				require.Len(t, problems, 1)
				assert.Contains(t, problems[0], "spec.policy.stallTimeout")
				assert.Contains(t, problems[0], tc.stored)
			} else {
				assert.Empty(t, problems)
			}
			// A value too long is written as the value in force, so that a
			// copy (status.appliedSpec) passes the schema; other text as it was.
			out, err := json.Marshal(&d)
			require.NoError(t, err)
			var again Duration
			require.NoError(t, json.Unmarshal(out, &again))
			switch {
			case !tc.invalid:
				assert.Equal(t, tc.want, again.Duration)
			case tc.want == MaxDuration:
				assert.JSONEq(t, `"8760h0m0s"`, string(out))
				assert.Equal(t, Duration{Duration: MaxDuration}, again)
			default:
				assert.JSONEq(t, `"`+tc.stored+`"`, string(out))
			}
		})
	}
}
