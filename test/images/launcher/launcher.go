package launcher

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"
)

// Defaults of Options, as the launcher image lays things out.
const (
	DefaultQEMU        = "/usr/bin/qemu-system-x86_64"
	DefaultFirmwareDir = "/usr/share/OVMF"
	// DefaultDiskDir is where the launcher pod mounts each volume's claim
	// (KubeVirt's path for them).
	DefaultDiskDir = "/var/run/kubevirt-private/vmi-disks"
	// DefaultRunDir holds the sockets and the EFI variable store (an
	// emptyDir of the pod).
	DefaultRunDir = "/var/run/kubevirt"
	// DefaultShutdownTimeout bounds a guest's ACPI shutdown before QEMU is
	// told to quit.
	DefaultShutdownTimeout = 25 * time.Second
	// DefaultAgentInterval is how often the guest agent is asked.
	DefaultAgentInterval = 2 * time.Second
)

// Options configure Run.
type Options struct {
	QEMU, FirmwareDir, DiskDir, RunDir string
	// Accel is AccelTCG (default) or AccelKVM.
	Accel string
	// Listen is the status server's address; empty means ":<Port>".
	Listen string
	// ShutdownTimeout bounds the guest's own shutdown when Run's context
	// ends with the guest agent connected.
	ShutdownTimeout time.Duration
	// AgentInterval is how often the guest agent is asked.
	AgentInterval time.Duration
	// Console receives QEMU's standard output: the guest's serial
	// console. Log receives QEMU's messages and the launcher's.
	Console, Log io.Writer
}

func (o *Options) defaults() {
	for _, d := range []struct {
		v   *string
		def string
	}{{&o.QEMU, DefaultQEMU}, {&o.FirmwareDir, DefaultFirmwareDir}, {&o.DiskDir, DefaultDiskDir},
		{&o.RunDir, DefaultRunDir}, {&o.Accel, AccelTCG}, {&o.Listen, ":" + strconv.Itoa(Port)}} {
		if *d.v == "" {
			*d.v = d.def
		}
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = DefaultShutdownTimeout
	}
	if o.AgentInterval <= 0 {
		o.AgentInterval = DefaultAgentInterval
	}
	if o.Console == nil {
		o.Console = os.Stdout
	}
	if o.Log == nil {
		o.Log = os.Stderr
	}
}

// Run runs the instance's guest in QEMU until QEMU exits or ctx ends (the
// pod is deleted): then a guest whose agent is connected is asked to shut
// down (ACPI) for up to ShutdownTimeout; QEMU is told to quit after that,
// or at once when no agent ever answered (nothing in the guest would
// honour the request: firmware, or an OS without agent). It serves Status
// on Listen meanwhile. A guest that powered off, or a stop asked by ctx,
// is nil; QEMU failing or killed is an error.
func Run(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, o Options) error {
	o.defaults()
	h, stop, err := serve(o.Listen)
	if err != nil {
		return err
	}
	defer stop()
	return run(ctx, vmi, o, h)
}

// RunGiven is Run for a launcher pod that KubeVirt's virt-controller
// rendered, which carries no instance: it serves Status (StateWaiting)
// on Listen until the instance of uid is put to InstancePath, as
// virt-handler hands virt-launcher its domain, then runs it as Run does.
// ctx ending first is nil: the pod was deleted before it was given a
// guest.
func RunGiven(ctx context.Context, uid string, o Options) error {
	o.defaults()
	h, stop, err := serve(o.Listen)
	if err != nil {
		return err
	}
	defer stop()
	given := make(chan *kubevirtv1.VirtualMachineInstance, 1)
	h.set(waitingHandler(uid, given))
	fmt.Fprintf(o.Log, "launcher: waiting for instance %s on %s%s\n", uid, o.Listen, InstancePath)
	select {
	case <-ctx.Done():
		return nil
	case vmi := <-given:
		return run(ctx, vmi, o, h)
	}
}

// run runs the instance, its state served through h.
func run(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, o Options, h *switchHandler) error {
	m, err := FromInstance(vmi, o.DiskDir)
	if err != nil {
		return err
	}
	l := m.NewLayout(o.FirmwareDir, o.RunDir)
	if err := prepare(m, l, o); err != nil {
		return err
	}
	s := newState(o.Accel, m.NICs)
	h.set(s.handler(string(vmi.UID)))
	return s.runQEMU(ctx, m.QEMUArgs(o.Accel, l), l, o)
}

// serve starts the status server on addr; stop closes it.
func serve(addr string) (*switchHandler, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("status server: %w", err)
	}
	h := &switchHandler{}
	h.set(http.NotFoundHandler())
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return h, func() { _ = srv.Close() }, nil
}

// prepare checks what QEMU will open and makes the run folder and the
// machine's EFI variable store.
func prepare(m *Machine, l Layout, o Options) error {
	if o.Accel != AccelTCG && o.Accel != AccelKVM {
		return fmt.Errorf("accelerator %q: want %s or %s", o.Accel, AccelTCG, AccelKVM)
	}
	if o.Accel == AccelKVM {
		f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("accelerator kvm: %w (the pod needs the node's kvm RuntimeClass)", err)
		}
		f.Close()
	}
	for _, d := range m.Disks {
		f, err := os.OpenFile(d.Image, os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("disk %s: %w", d.Name, err)
		}
		f.Close()
	}
	if err := os.MkdirAll(o.RunDir, 0o700); err != nil {
		return err
	}
	if tmpl := m.VarsTemplate(o.FirmwareDir); tmpl != "" {
		data, err := os.ReadFile(tmpl)
		if err != nil {
			return fmt.Errorf("the EFI variable store: %w", err)
		}
		if err := os.WriteFile(l.FirmwareVars, data, 0o600); err != nil {
			return fmt.Errorf("the EFI variable store: %w", err)
		}
	}
	return nil
}

// process is a started QEMU: done is closed once it exited, err is then
// how.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// exitedWithin waits up to d for the process to exit.
func (p *process) exitedWithin(d time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(d):
		return false
	}
}

// runQEMU starts QEMU and follows it until it exits or ctx ends.
func (s *state) runQEMU(ctx context.Context, args []string, l Layout, o Options) error {
	cmd := exec.Command(o.QEMU, args...)
	cmd.Stdout, cmd.Stderr = o.Console, o.Log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", o.QEMU, err)
	}
	s.started(cmd.Process.Pid, args)
	fmt.Fprintf(o.Log, "launcher: qemu started (pid %d, accel %s): %s %s\n", cmd.Process.Pid, o.Accel, o.QEMU, strings.Join(args, " "))
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	alive, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		<-p.done
		stop()
	}()
	mon, err := s.monitor(alive, l.QMPSocket, o.Log)
	if err == nil {
		defer mon.close()
		go s.pollAgent(alive, l.AgentSocket, o)
	} else if !p.exitedWithin(0) {
		fmt.Fprintf(o.Log, "launcher: %v\n", err)
		_ = cmd.Process.Kill()
	}
	select {
	case <-p.done:
		return s.ended(p.err, o.Log)
	case <-ctx.Done():
	}
	s.stopping()
	s.shutdown(mon, p, o)
	<-p.done
	_ = s.ended(p.err, o.Log)
	return nil
}

// monitor connects to QEMU's monitor and waits until the guest runs.
func (s *state) monitor(ctx context.Context, socket string, log io.Writer) (*qmp, error) {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	mon, err := dialQMP(dctx, socket, func(ev QMPEvent) { s.event(ev, log) })
	if err != nil {
		return nil, err
	}
	for {
		running, err := mon.running(dctx)
		if err != nil {
			mon.close()
			return nil, err
		}
		if running {
			s.running()
			fmt.Fprintln(log, "launcher: the guest runs")
			return mon, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// shutdown stops the guest: when its agent ever answered, ACPI's power
// button (what virt-launcher sends, SignalShutdownVMI), bounded by
// ShutdownTimeout; then QMP quit, then SIGKILL.
func (s *state) shutdown(mon *qmp, p *process, o Options) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if mon != nil && s.agentEverConnected() {
		fmt.Fprintf(o.Log, "launcher: asking the guest to shut down (ACPI power button), up to %s\n", o.ShutdownTimeout)
		if _, err := mon.execute(ctx, "system_powerdown", nil); err == nil && p.exitedWithin(o.ShutdownTimeout) {
			return
		}
	}
	if mon != nil {
		fmt.Fprintln(o.Log, "launcher: telling QEMU to quit")
		qctx, qcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer qcancel()
		// QEMU may close the monitor before it answers: its exit counts.
		_, _ = mon.execute(qctx, "quit", nil)
		if p.exitedWithin(5 * time.Second) {
			return
		}
	}
	fmt.Fprintln(o.Log, "launcher: killing QEMU")
	_ = p.cmd.Process.Kill()
}

// ended records how QEMU ended and returns Run's error: nil when QEMU
// exited with status 0 (the guest powered off, or QEMU was told to quit).
func (s *state) ended(werr error, log io.Writer) error {
	what := "exit status 0"
	if werr != nil {
		what = werr.Error()
	}
	s.exited(what)
	fmt.Fprintf(log, "launcher: qemu ended: %s\n", what)
	if werr != nil {
		return fmt.Errorf("qemu: %w", werr)
	}
	return nil
}
