package bootcheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"
)

// Defaults of Options.
const (
	// DefaultQEMU is the QEMU binary.
	DefaultQEMU = "qemu-system-x86_64"
	// DefaultFirmwareDir holds Debian's OVMF files.
	DefaultFirmwareDir = "/usr/share/OVMF"
	// DefaultMarker starts the line the test guests print once up.
	DefaultMarker = "V2V-GUEST-UP"
	// DefaultTimeout bounds a boot: several minutes under TCG on a busy
	// machine.
	DefaultTimeout = 10 * time.Minute
)

// Options configure Boot.
type Options struct {
	// Images gives each disk's raw image file, by disk name.
	Images map[string]string
	// WorkDir receives the serial log and the EFI variable store.
	WorkDir string
	// Marker starts the line to wait for; empty means DefaultMarker.
	Marker string
	// Timeout of the boot; 0 means DefaultTimeout.
	Timeout time.Duration
	// QEMU and FirmwareDir; empty means the defaults.
	QEMU, FirmwareDir string
}

// Result is a boot that printed the marker.
type Result struct {
	// Line is the marker line as printed.
	Line string
	// Fields are its key=value pairs.
	Fields map[string]string
	// Elapsed is the time from QEMU's start to the marker.
	Elapsed time.Duration
	// SerialLog is the file holding the serial console's output.
	SerialLog string
	// Args are QEMU's arguments.
	Args []string
	// Machine is the hardware booted.
	Machine *Machine
}

// Boot starts vm's disks in QEMU with vm's hardware and waits until the
// guest prints a line starting with the marker on its first serial port.
// It stops QEMU before it returns. A boot that ends or times out before
// the marker is an error quoting the end of the serial log.
func Boot(ctx context.Context, vm *kubevirtv1.VirtualMachine, opts Options) (*Result, error) {
	opts.defaults()
	m, err := FromVM(vm, opts.Images)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.WorkDir, 0o755); err != nil {
		return nil, fmt.Errorf("bootcheck: %w", err)
	}
	serial := filepath.Join(opts.WorkDir, "serial.log")
	code, varsTemplate := m.FirmwareFiles(opts.FirmwareDir)
	vars := filepath.Join(opts.WorkDir, "efi-vars.fd")
	if varsTemplate != "" {
		if err := copyFile(varsTemplate, vars); err != nil {
			return nil, fmt.Errorf("bootcheck: the EFI variable store: %w", err)
		}
	}
	res := &Result{SerialLog: serial, Args: m.QEMUArgs(serial, code, vars), Machine: m}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	cmd := exec.Command(opts.QEMU, res.Args...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bootcheck: starting %s: %w", opts.QEMU, err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}()
	line, err := waitMarker(ctx, serial, opts.Marker, exited, func() error { return waitErr })
	if err != nil {
		return nil, fmt.Errorf("bootcheck: %s: %w (qemu: %s)\nend of the serial console:\n%s",
			vm.Name, err, strings.TrimSpace(stderr.String()), tailFile(serial, 2048))
	}
	res.Line, res.Fields, res.Elapsed = line, ParseMarker(line, opts.Marker), time.Since(start)
	return res, nil
}

func (o *Options) defaults() {
	if o.Marker == "" {
		o.Marker = DefaultMarker
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.QEMU == "" {
		o.QEMU = DefaultQEMU
	}
	if o.FirmwareDir == "" {
		o.FirmwareDir = DefaultFirmwareDir
	}
}

// waitMarker polls the serial log for the marker line until the context
// ends or QEMU exits (exited closed, exitErr its error).
func waitMarker(ctx context.Context, serial, marker string, exited <-chan struct{}, exitErr func() error) (string, error) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		if line, ok := findMarker(serial, marker); ok {
			return line, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("no %s line on the serial console: %w", marker, ctx.Err())
		case <-exited:
			if line, ok := findMarker(serial, marker); ok {
				return line, nil
			}
			return "", fmt.Errorf("qemu exited before the guest printed %s: %v", marker, exitErr())
		case <-t.C:
		}
	}
}

// findMarker is the first line of the file that holds the marker, from
// the marker on.
func findMarker(path, marker string) (string, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if i := strings.Index(line, marker); i >= 0 {
			return strings.TrimRight(line[i:], "\r"), true
		}
	}
	return "", false
}

// ParseMarker reads the key=value pairs after the marker on its line.
func ParseMarker(line, marker string) map[string]string {
	fields := map[string]string{}
	_, rest, _ := strings.Cut(line, marker)
	for f := range strings.FieldsSeq(rest) {
		if k, v, ok := strings.Cut(f, "="); ok {
			fields[k] = v
		}
	}
	return fields
}

func copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o644)
}

// tailFile is the last n bytes of a file, or why there are none.
func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "(nothing: the serial log was never written)"
	}
	if err != nil {
		return err.Error()
	}
	if len(data) > n {
		data = data[len(data)-n:]
	}
	return string(data)
}
