package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"

	"platform.example/vm-migration/pkg/statemachine"
)

func TestLogFormatFlag(t *testing.T) {
	cases := map[string]struct {
		args       []string
		wantFormat string
		wantErr    string
	}{
		"text by default":     {wantFormat: "text"},
		"json":                {args: []string{"--log-format=json"}, wantFormat: "json"},
		"component-base name": {args: []string{"--logging-format=json"}, wantFormat: "json"},
		"unknown format":      {args: []string{"--log-format=xml"}, wantErr: `Unsupported log format`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f, err := parseFlags(tc.args)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr, "parsing %v", tc.args)
				return
			}
			require.NoError(t, err, "parsing %v", tc.args)
			assert.Equal(t, tc.wantFormat, f.logging.Format, "log format")
		})
	}
}

// TestJSONLogs applies --log-format=json and checks that a log line comes
// out as one JSON object with the message and its key/value pairs.
func TestJSONLogs(t *testing.T) {
	f, err := parseFlags([]string{"--log-format=json"})
	require.NoError(t, err, "parsing --log-format=json")
	var out bytes.Buffer
	err = logsapi.ValidateAndApplyWithOptions(f.logging, &logsapi.LoggingOptions{ErrorStream: &out, InfoStream: &out}, nil)
	require.NoError(t, err, "applying the logging options")
	t.Cleanup(func() {
		assert.NoError(t, logsapi.ResetForTest(nil), "resetting the logging")
	})
	klog.Background().Info("phase changed", "migration", "apps/web-01", "to", "Converting")
	klog.Flush()
	var line map[string]any
	require.NoError(t, json.Unmarshal(bytes.TrimSpace(out.Bytes()), &line), "log output is not one JSON object:\n%s", out.String())
	assert.Equal(t, "phase changed", line["msg"], "the message of log line %v", line)
	assert.Equal(t, "apps/web-01", line["migration"], "the migration value of log line %v", line)
	assert.Equal(t, "Converting", line["to"], "the to value of log line %v", line)
}

func TestClientRateLimitFlags(t *testing.T) {
	cases := map[string]struct {
		args      []string
		wantQPS   float32
		wantBurst int
		wantErr   string
	}{
		"defaults":       {wantQPS: defaultAPIQPS, wantBurst: defaultAPIBurst},
		"set":            {args: []string{"--kube-api-qps=200", "--kube-api-burst=400"}, wantQPS: 200, wantBurst: 400},
		"fractional qps": {args: []string{"--kube-api-qps=0.5", "--kube-api-burst=1"}, wantQPS: 0.5, wantBurst: 1},
		"zero qps":       {args: []string{"--kube-api-qps=0"}, wantErr: "--kube-api-qps must be positive"},
		"zero burst":     {args: []string{"--kube-api-burst=0"}, wantErr: "--kube-api-burst at least 1"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f, err := parseFlags(tc.args)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			cfg := &rest.Config{}
			f.limitClients(cfg)
			assert.Equal(t, tc.wantQPS, cfg.QPS)
			assert.Equal(t, tc.wantBurst, cfg.Burst)
		})
	}
}

func TestProfilingOnlyWhenAsked(t *testing.T) {
	for _, profiling := range []bool{false, true} {
		srv := httptest.NewServer(metricsMux(prometheus.NewRegistry(), profiling))
		for path, wantOn := range map[string]int{"/metrics": http.StatusOK, "/debug/pprof/heap": http.StatusOK, "/debug/pprof/": http.StatusOK} {
			resp, err := http.Get(srv.URL + path)
			require.NoError(t, err, "GET %s", path)
			_ = resp.Body.Close()
			want := wantOn
			if !profiling && path != "/metrics" {
				want = http.StatusNotFound
			}
			assert.Equal(t, want, resp.StatusCode, "GET %s with --profiling=%v", path, profiling)
		}
		srv.Close()
	}
	f, err := parseFlags(nil)
	require.NoError(t, err)
	assert.False(t, f.profiling, "profiling is on by default")
}

func TestDefaultTTLFlag(t *testing.T) {
	cases := map[string]durationFlagCase{
		"off unless set": {},
		"set":            {args: []string{"--default-ttl-after-finished=720h"}, want: 720 * time.Hour},
		"negative":       {args: []string{"--default-ttl-after-finished=-1s"}, wantErr: "--default-ttl-after-finished must not be negative"},
	}
	testDurationFlag(t, cases, func(f *flags) time.Duration { return f.opts.DefaultTTLAfterFinished })
}

// TestVerificationMaxAgeFlag: how long before the start the target disks
// may have been read back (10m by default).
func TestVerificationMaxAgeFlag(t *testing.T) {
	cases := map[string]durationFlagCase{
		"10m by default": {want: statemachine.DefaultVerificationMaxAge},
		"set":            {args: []string{"--verification-max-age=30m"}, want: 30 * time.Minute},
		"too short":      {args: []string{"--verification-max-age=10s"}, wantErr: "--verification-max-age must be at least 1m"},
	}
	testDurationFlag(t, cases, func(f *flags) time.Duration { return f.opts.Decisions.VerificationMaxAge })
}

// durationFlagCase is one case of a duration flag: its arguments, and the
// value parsed or the error's words.
type durationFlagCase struct {
	args    []string
	want    time.Duration
	wantErr string
}

// testDurationFlag parses each case's arguments and checks the value get
// reads from the flags, or the error.
func testDurationFlag(t *testing.T, cases map[string]durationFlagCase, get func(*flags) time.Duration) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f, err := parseFlags(tc.args)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, get(f))
		})
	}
}
