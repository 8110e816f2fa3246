package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"
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
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if f.logging.Format != tc.wantFormat {
				t.Errorf("format %q, want %q", f.logging.Format, tc.wantFormat)
			}
		})
	}
}

// TestJSONLogs applies --log-format=json and checks that a log line comes
// out as one JSON object with the message and its key/value pairs.
func TestJSONLogs(t *testing.T) {
	f, err := parseFlags([]string{"--log-format=json"})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := logsapi.ValidateAndApplyWithOptions(f.logging, &logsapi.LoggingOptions{ErrorStream: &out, InfoStream: &out}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := logsapi.ResetForTest(nil); err != nil {
			t.Error(err)
		}
	})
	klog.Background().Info("phase changed", "migration", "apps/web-01", "to", "Converting")
	klog.Flush()
	var line map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &line); err != nil {
		t.Fatalf("log output is not one JSON object: %v\n%s", err, out.String())
	}
	if line["msg"] != "phase changed" || line["migration"] != "apps/web-01" || line["to"] != "Converting" {
		t.Errorf("log line %v lacks the message or its values", line)
	}
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
