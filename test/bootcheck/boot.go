package bootcheck

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"platform.example/vm-migration/test/images/launcher"
)

// Defaults of Options.
const (
	// DefaultMarker starts the line the test guests print once up.
	DefaultMarker = "V2V-GUEST-UP"
	// DefaultTimeout bounds a boot: several minutes under TCG on a busy
	// machine.
	DefaultTimeout = 10 * time.Minute
)

// Options configure Boot.
type Options struct {
	// Images gives each volume's raw image file, by volume name.
	Images map[string]string
	// WorkDir receives the serial log, the EFI variable store and the
	// sockets.
	WorkDir string
	// Marker starts the line to wait for; empty means DefaultMarker.
	Marker string
	// Timeout of the boot; 0 means DefaultTimeout.
	Timeout time.Duration
	// QEMU and FirmwareDir; empty means the machine's
	// (qemu-system-x86_64 on the PATH, /usr/share/OVMF).
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
}

// Boot runs vm's template in QEMU as the launcher does (package launcher,
// under TCG, the disks read and written in place) and waits until the
// guest prints a line starting with the marker on its first serial port;
// then it stops QEMU. A boot that ends or times out before the marker is
// an error quoting the end of the serial log.
func Boot(ctx context.Context, vm *kubevirtv1.VirtualMachine, opts Options) (*Result, error) {
	opts.defaults()
	if vm.Spec.Template == nil {
		return nil, fmt.Errorf("virtual machine %s has no template", vm.Name)
	}
	vmi := &kubevirtv1.VirtualMachineInstance{Spec: vm.Spec.Template.Spec}
	vmi.Name, vmi.Namespace, vmi.UID = vm.Name, vm.Namespace, vm.UID
	disks := filepath.Join(opts.WorkDir, "disks")
	if err := linkImages(disks, opts.Images); err != nil {
		return nil, fmt.Errorf("bootcheck: %w", err)
	}
	serialLog := filepath.Join(opts.WorkDir, "serial.log")
	serial, err := os.Create(serialLog)
	if err != nil {
		return nil, fmt.Errorf("bootcheck: %w", err)
	}
	defer serial.Close()
	w := &markerWriter{file: serial, marker: opts.Marker, found: make(chan struct{})}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		done <- launcher.Run(runCtx, vmi, launcher.Options{QEMU: opts.QEMU, FirmwareDir: opts.FirmwareDir, DiskDir: disks,
			RunDir: filepath.Join(opts.WorkDir, "run"), Listen: "127.0.0.1:0", Console: w, Log: serial})
	}()
	select {
	case <-w.found:
		elapsed := time.Since(start)
		stop()
		<-done
		return &Result{Line: w.line, Fields: ParseMarker(w.line, opts.Marker), Elapsed: elapsed, SerialLog: serialLog}, nil
	case err := <-done:
		return nil, fmt.Errorf("bootcheck: %s: QEMU ended before the guest printed %s (%v)\nend of the serial console:\n%s", vm.Name, opts.Marker, err, tailFile(serialLog, 2048))
	case <-time.After(opts.Timeout):
		stop()
		<-done
		return nil, fmt.Errorf("bootcheck: %s: no %s line on the serial console within %s\nend of the serial console:\n%s", vm.Name, opts.Marker, opts.Timeout, tailFile(serialLog, 2048))
	}
}

func (o *Options) defaults() {
	if o.Marker == "" {
		o.Marker = DefaultMarker
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.QEMU == "" {
		o.QEMU = "qemu-system-x86_64"
	}
}

// linkImages lays the images out as the launcher finds its volumes.
func linkImages(dir string, images map[string]string) error {
	for volume, image := range images {
		abs, err := filepath.Abs(image)
		if err != nil {
			return err
		}
		link := launcher.DiskImage(dir, volume)
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			return err
		}
		if err := os.Symlink(abs, link); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
	}
	return nil
}

// markerWriter writes the serial console to a file and watches it for the
// marker's first line.
type markerWriter struct {
	file   *os.File
	marker string

	mu      sync.Mutex
	partial string
	line    string
	found   chan struct{}
}

func (w *markerWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.line == "" {
		w.partial += string(p)
		for {
			l, rest, ok := strings.Cut(w.partial, "\n")
			if !ok {
				break
			}
			w.partial = rest
			if i := strings.Index(l, w.marker); i >= 0 {
				w.line = strings.TrimRight(l[i:], "\r")
				close(w.found)
				break
			}
		}
	}
	return w.file.Write(p)
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

// tailFile is the last n bytes of a file, or why there are none.
func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(data) > n {
		data = data[len(data)-n:]
	}
	return string(data)
}
