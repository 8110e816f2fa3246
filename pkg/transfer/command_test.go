package transfer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"platform.example/vm-migration/pkg/transfer"
	"platform.example/vm-migration/pkg/transfer/wire"
)

// cli runs the command against the sim with a spec and credentials on disk.
type cli struct {
	dir, spec, creds, term, progress string
}

func newCLI(t *testing.T, e *simEnv, spec *wire.JobSpec, password, thumbprint string) *cli {
	t.Helper()
	dir := t.TempDir()
	c := &cli{dir: dir, spec: filepath.Join(dir, "job.json"), creds: filepath.Join(dir, "creds"),
		term: filepath.Join(dir, "termination-log"), progress: filepath.Join(dir, "progress.json")}
	data, err := json.Marshal(spec)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(c.spec, data, 0o600))
	require.NoError(t, os.Mkdir(c.creds, 0o700))
	for k, v := range map[string]string{"username": testUser + "\n", "password": password + "\n", "thumbprint": thumbprint} {
		require.NoError(t, os.WriteFile(filepath.Join(c.creds, k), []byte(v), 0o600))
	}
	return c
}

func (c *cli) run(t *testing.T, extra ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	args := append([]string{"--spec", c.spec, "--credentials-dir", c.creds, "--termination-log", c.term,
		"--progress-file", c.progress, "--progress-interval", "100ms", "--chunk-mib", "1"}, extra...)
	code := transfer.Main(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestCommand(t *testing.T) {
	e := newSim(t)
	data, d := e.stagedDisk(t, "cli", testSize, 11)
	c := newCLI(t, e, e.jobSpec(d), testPassword, e.creds.Thumbprint)

	code, stdout, stderr := c.run(t)
	require.Equal(t, transfer.ExitOK, code, stderr)
	require.Empty(t, stderr)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	require.GreaterOrEqual(t, len(lines), 2, "progress lines and the result")
	var p wire.Progress
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &p))
	require.Equal(t, wire.KindProgress, p.Kind)
	res, err := wire.ParseResult([]byte(lines[len(lines)-1]))
	require.NoError(t, err)
	require.True(t, res.Succeeded)
	require.Equal(t, treeRoot(data), res.Disks[0].SHA256)

	term, err := os.ReadFile(c.term)
	require.NoError(t, err)
	require.LessOrEqual(t, len(term), wire.MaxTerminationMessage)
	fromTerm, err := wire.ParseResult(term)
	require.NoError(t, err)
	require.Equal(t, res.Disks[0].SHA256, fromTerm.Disks[0].SHA256)

	prog, err := os.ReadFile(c.progress)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(prog, &p))
	require.Equal(t, wire.StateDone, p.Disks[0].State)
	checkImage(t, d.Destination, data)
	require.NotContains(t, stdout+stderr+string(term), testPassword)
}

func TestCommandFailures(t *testing.T) {
	e := newSim(t)
	good := e.testDisk(t, "f", diskData(12*mib, 12))
	good.Destination = filepath.Join(t.TempDir(), "disk.img")
	tests := map[string]struct {
		password   string
		thumbprint string
		mutate     func(*wire.JobSpec)
		reason     string
		msg        string
	}{
		"wrong password":      {password: "not-the-password", reason: wire.ReasonNotAuthorized, msg: "refused the credentials"},
		"thumbprint mismatch": {thumbprint: strings.Repeat("AB:", 31) + "AB", reason: wire.ReasonConnectionFailed, msg: "thumbprint"},
		"unknown disk key":    {mutate: func(s *wire.JobSpec) { s.Disks[0].Key = 9999 }, reason: wire.ReasonInvalidSource, msg: "no disk with key 9999"},
		"destination directory missing": {mutate: func(s *wire.JobSpec) { s.Disks[0].Destination = "/nonexistent/staging/disk.img" },
			reason: wire.ReasonDestinationUnusable, msg: "does not exist"},
		"destination is a directory": {mutate: func(s *wire.JobSpec) { s.Disks[0].Destination = os.TempDir() },
			reason: wire.ReasonDestinationUnusable, msg: "neither a regular file nor a block device"},
		"invalid spec": {mutate: func(s *wire.JobSpec) { s.Disks[0].Destination = "relative/disk.img" }, reason: wire.ReasonInvalidSpec, msg: "not an absolute path"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			spec := e.jobSpec(good)
			if tc.mutate != nil {
				tc.mutate(spec)
			}
			pw, tp := testPassword, e.creds.Thumbprint
			if tc.password != "" {
				pw = tc.password
			}
			if tc.thumbprint != "" {
				tp = tc.thumbprint
			}
			c := newCLI(t, e, spec, pw, tp)
			code, stdout, stderr := c.run(t)
			require.Equal(t, transfer.ExitFailed, code)
			require.Equal(t, 1, strings.Count(stderr, "\n"), "one line on stderr: %q", stderr)
			require.Contains(t, stderr, tc.msg)
			term, err := os.ReadFile(c.term)
			require.NoError(t, err)
			res, err := wire.ParseResult(term)
			require.NoError(t, err)
			require.False(t, res.Succeeded)
			require.Equal(t, tc.reason, res.Reason, res.Error)
			require.NotContains(t, stdout+stderr+string(term), pw, "the password leaked")
			_, err = os.Stat(filepath.Join(filepath.Dir(good.Destination), "disk.img"))
			require.True(t, os.IsNotExist(err), "nothing may be written on failure before the copy")
			t.Log(strings.TrimSpace(stderr))
		})
	}
}

func TestCommandUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, transfer.ExitUsage, transfer.Main(context.Background(), []string{"--spec", "x"}, &stdout, &stderr))
	require.Contains(t, stderr.String(), "missing --credentials-dir")
}

// TestCommandVersion: --version prints one JSON line naming the job spec
// format the command reads, also into the termination log, and needs no
// spec or credentials (the image proof pod runs it so).
func TestCommandVersion(t *testing.T) {
	term := filepath.Join(t.TempDir(), "termination-log")
	var stdout, stderr bytes.Buffer
	code := transfer.Main(context.Background(), []string{"--version", "--termination-log=" + term}, &stdout, &stderr)
	require.Equal(t, transfer.ExitOK, code, "stderr: %s", stderr.String())
	v, err := wire.ParseVersion(stdout.String())
	require.NoError(t, err)
	require.Equal(t, wire.SpecVersion, v.SpecVersion)
	require.Equal(t, wire.CommandName, v.Command)
	written, err := os.ReadFile(term)
	require.NoError(t, err)
	require.Equal(t, stdout.String(), string(written), "the termination log holds the same line")
	_, err = wire.ParseVersion(`{"command":"other"}`)
	require.Error(t, err)
	_, err = wire.ParseVersion("vm-transfer 1.0")
	require.Error(t, err)
}
