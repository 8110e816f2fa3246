package transfer

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"platform.example/vm-migration/pkg/blocktree"
	"platform.example/vm-migration/pkg/transfer/wire"
	"platform.example/vm-migration/pkg/vsphere"
)

// DefaultTerminationLog is where Kubernetes reads a container's termination message.
const DefaultTerminationLog = "/dev/termination-log"

// keepAliveInterval is how often a running transfer touches its session.
const keepAliveInterval = 5 * time.Minute

// Exit codes of the command.
const (
	// ExitOK: every disk copied and verified.
	ExitOK = 0
	// ExitFailed: the transfer failed; the result says why.
	ExitFailed = 1
	// ExitUsage: the command line is wrong.
	ExitUsage = 2
)

// commandFlags are the command line of vm-transfer.
type commandFlags struct {
	spec              string
	credentialsDir    string
	parallel          int
	chunkMiB          int
	streams           int
	retries           int
	progressInterval  time.Duration
	progressFile      string
	progressConfigMap string
	terminationLog    string
	allowPoweredOn    bool
	bufferedIO        bool
	version           bool
}

// parseFlags reads the command line.
func parseFlags(args []string, stderr io.Writer) (*commandFlags, error) {
	fs := flag.NewFlagSet("vm-transfer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := &commandFlags{}
	fs.StringVar(&f.spec, "spec", "", "job spec file (JSON or YAML): endpoint, VM moRef, disks and destinations")
	fs.StringVar(&f.credentialsDir, "credentials-dir", "", "directory of the mounted credentials Secret (username, password, optional ca.crt, thumbprint)")
	fs.IntVar(&f.parallel, "parallel", DefaultParallel, "disks copied at once")
	fs.IntVar(&f.chunkMiB, "chunk-mib", DefaultChunkSize>>20, "chunk size in MiB: the most a crash makes one stream fetch again (each request reads half a chunk)")
	fs.IntVar(&f.streams, "streams", DefaultStreams, fmt.Sprintf("Range connections reading each disk at once (1 to %d; memory is parallel x (streams + 1/2) x chunk)", MaxStreams))
	fs.IntVar(&f.retries, "retries", DefaultRetries, "in-process retries of a failed read without progress in between (0: none)")
	fs.DurationVar(&f.progressInterval, "progress-interval", DefaultProgressInterval, "time between progress reports")
	fs.StringVar(&f.progressFile, "progress-file", "", "file rewritten atomically with the latest progress (JSON)")
	fs.StringVar(&f.progressConfigMap, "progress-configmap", "", "NAMESPACE/NAME of a ConfigMap to patch with progress and the result (in-cluster credentials)")
	fs.StringVar(&f.terminationLog, "termination-log", DefaultTerminationLog, "file the final result is written to (the container's termination message)")
	fs.BoolVar(&f.bufferedIO, "buffered-io", false, "write through the page cache even where direct I/O works")
	fs.BoolVar(&f.allowPoweredOn, "allow-powered-on", false, "copy the disks of a running VM (inconsistent copy: by hand, knowingly)")
	fs.BoolVar(&f.version, "version", false, "print the command's version and the job spec format it reads as one JSON line (also to --termination-log), and exit")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if f.version {
		return f, nil
	}
	var missing []string
	if f.spec == "" {
		missing = append(missing, "--spec")
	}
	if f.credentialsDir == "" {
		missing = append(missing, "--credentials-dir")
	}
	switch {
	case fs.NArg() > 0:
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	case len(missing) > 0:
		return nil, fmt.Errorf("missing %s", strings.Join(missing, " and "))
	case f.parallel < 1 || f.chunkMiB < 1 || f.chunkMiB > 256 || f.retries < 0 || f.progressInterval < 100*time.Millisecond:
		return nil, errors.New("--parallel and --chunk-mib (at most 256) must be positive, --retries not negative, --progress-interval at least 100ms")
	case f.streams < 1 || f.streams > MaxStreams:
		return nil, fmt.Errorf("--streams must be between 1 and %d", MaxStreams)
	}
	return f, nil
}

// Main runs the vm-transfer command and returns its exit code. The final
// result goes to stdout and the termination log, progress to stdout (and
// the progress file and ConfigMap when asked), and a failure as one line
// to stderr.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "vm-transfer: %v\n", err)
		return ExitUsage
	}
	if f.version {
		return printVersion(f, stdout, stderr)
	}
	var mu sync.Mutex
	logf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(stderr, "vm-transfer: "+format+"\n", args...)
	}
	var cmSink *ConfigMapSink
	if f.progressConfigMap != "" {
		if cmSink, err = NewInClusterConfigMapSink(f.progressConfigMap); err != nil {
			fmt.Fprintf(stderr, "vm-transfer: %v\n", err)
			return ExitUsage
		}
	}
	res := execute(ctx, f, stdout, logf, cmSink)
	report(ctx, f, res, stdout, logf, cmSink)
	if !res.Succeeded {
		fmt.Fprintf(stderr, "vm-transfer: %s\n", oneLine(res.Error))
		return ExitFailed
	}
	return ExitOK
}

// execute does the transfer: spec, credentials, connection, plan, copy.
func execute(ctx context.Context, f *commandFlags, stdout io.Writer, logf func(string, ...any), cmSink *ConfigMapSink) *wire.Result {
	spec, err := wire.LoadJobSpec(f.spec)
	if err != nil {
		return failed(nil, err, wire.ReasonInvalidSpec)
	}
	creds, err := vsphere.LoadCredentialsDir(f.credentialsDir)
	if err != nil {
		return failed(spec, err, wire.ReasonInvalidSpec)
	}
	ep := vsphere.Endpoint{URL: spec.Endpoint.URL, Datacenter: spec.Endpoint.Datacenter, InsecureSkipVerify: spec.Endpoint.InsecureSkipVerify}
	if ep.InsecureSkipVerify {
		logf("TLS verification of %s is off (insecureSkipVerify)", spec.Endpoint.URL)
	}
	sess, err := vsphere.Connect(ctx, ep, creds)
	if err != nil {
		return failed(spec, connectError(err), "")
	}
	defer func() {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = sess.Logout(lctx)
	}()
	dc, err := sess.Datacenter(ctx)
	if err != nil {
		return failed(spec, fmt.Errorf("%w: %w", ErrInvalidSource, err), "")
	}
	planner := &Planner{Client: sess.Client(), DatacenterPath: strings.TrimPrefix(dc.InventoryPath, "/"), AllowPoweredOn: f.allowPoweredOn}
	plans, err := planner.Plan(ctx, spec)
	if err != nil {
		return failed(spec, err, "")
	}
	// Keep a connection per stream of every disk copied at once (and one
	// for SOAP calls) instead of closing all but two after each request.
	sess.Client().DefaultTransport().MaxIdleConnsPerHost = f.streams*f.parallel + 1
	kctx, stopKeepAlive := context.WithCancel(ctx)
	defer stopKeepAlive()
	go KeepAlive(kctx, sess.Client(), keepAliveInterval, logf)

	return Run(ctx, plans, f.options(sess, stdout, logf, cmSink))
}

// options are the copy's options from the flags, with the progress sinks.
func (f *commandFlags) options(sess *vsphere.Session, stdout io.Writer, logf func(string, ...any), cmSink *ConfigMapSink) Options {
	sinks := []ProgressSink{&JSONLinesSink{W: stdout}}
	if f.progressFile != "" {
		sinks = append(sinks, FileSink{Path: f.progressFile})
	}
	if cmSink != nil {
		sinks = append(sinks, cmSink)
	}
	retries := f.retries
	if retries == 0 {
		retries = -1 // in Options, zero means the default and negative means none
	}
	return Options{
		ChunkSize:  f.chunkMiB << 20,
		Streams:    f.streams,
		Parallel:   f.parallel,
		Retries:    retries,
		BufferedIO: f.bufferedIO,
		// A SOAP call on an expired session logs in again (vsphere.Session).
		RefreshSession:   func(ctx context.Context) error { return Touch(ctx, sess.Client()) },
		ProgressInterval: f.progressInterval,
		ProgressSinks:    sinks,
		Logf:             logf,
	}
}

// connectError classifies a failed login.
func connectError(err error) error {
	switch vsphere.Classify(err) {
	case vsphere.ClassAuth:
		return fmt.Errorf("%w: %w", ErrNotAuthorized, err)
	default:
		return fmt.Errorf("%w: %w", ErrConnection, err)
	}
}

// failed is the result of a run that stopped before copying.
func failed(spec *wire.JobSpec, err error, reason string) *wire.Result {
	if reason == "" {
		reason = Reason(err)
	}
	res := &wire.Result{Kind: wire.KindResult, Error: err.Error(), Reason: reason, Scheme: blocktree.Scheme, Disks: []wire.DiskResult{}}
	if spec != nil {
		for _, d := range spec.Disks {
			res.Disks = append(res.Disks, wire.DiskResult{Key: d.Key})
		}
	}
	return res
}

// report writes the result: a JSON line on stdout, the termination log,
// and the progress ConfigMap when there is one.
func report(ctx context.Context, f *commandFlags, res *wire.Result, stdout io.Writer, logf func(string, ...any), cmSink *ConfigMapSink) {
	// The reporter has stopped: nothing else writes to stdout now.
	if err := writeJSONLine(stdout, res); err != nil {
		logf("writing the result to stdout: %v", err)
	}
	if f.terminationLog != "" {
		if err := os.WriteFile(f.terminationLog, wire.TerminationMessage(res), 0o644); err != nil {
			// By hand, /dev/termination-log does not exist: only say so when asked for another path.
			if f.terminationLog != DefaultTerminationLog || !errors.Is(err, os.ErrNotExist) {
				logf("writing the termination log: %v", err)
			}
		}
	}
	if cmSink != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		if err := cmSink.ReportResult(rctx, res); err != nil {
			logf("writing the result to the progress ConfigMap: %v", err)
		}
	}
}

// oneLine keeps an error message on a single line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// printVersion prints the version line to stdout and, when a termination
// log is named, into it (the image proof pod reads it there).
func printVersion(f *commandFlags, stdout, stderr io.Writer) int {
	line, err := json.Marshal(wire.BuildVersion())
	if err != nil {
		fmt.Fprintf(stderr, "vm-transfer: %v\n", err)
		return ExitFailed
	}
	fmt.Fprintf(stdout, "%s\n", line)
	if f.terminationLog == "" {
		return ExitOK
	}
	if err := os.WriteFile(f.terminationLog, append(line, '\n'), 0o644); err != nil && !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(stderr, "vm-transfer: writing %s: %v\n", f.terminationLog, err)
		return ExitFailed
	}
	return ExitOK
}
