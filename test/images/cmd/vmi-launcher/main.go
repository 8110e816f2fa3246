// Command vmi-launcher runs a VirtualMachineInstance's guest in QEMU: the
// KubeVirt stand-in's virt-launcher (package launcher), the entrypoint of
// the launcher image (package images). The stand-in gives it the instance
// as JSON in the environment variable VMI:
//
//	vmi-launcher [--accel tcg|kvm] [--shutdown-timeout 25s] [--listen :9090]
//
// Started as virt-launcher-monitor (the image's link to it), it takes the
// command line KubeVirt's virt-controller gives virt-launcher in the pods
// it renders (--uid, --grace-period-seconds; the rest is KubeVirt's own
// and unused here) and waits for the instance to be put to its status
// server (launcher.RunGiven), as virt-handler hands virt-launcher its
// domain: the stand-in's virt-handler does.
//
// It exits 0 when the guest powered off or the pod was deleted (SIGTERM),
// and 1 with one line on standard error (and in /dev/termination-log, the
// pod's termination message) when the instance cannot run or QEMU failed.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"platform.example/vm-migration/test/images/launcher"
)

// EnvInstance holds the instance as JSON.
const EnvInstance = "VMI"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "vmi-launcher:", err)
		_ = os.WriteFile("/dev/termination-log", []byte(err.Error()), 0o644)
		os.Exit(1)
	}
}

// MonitorName is the name KubeVirt's launcher pods run it by.
const MonitorName = "virt-launcher-monitor"

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if filepath.Base(os.Args[0]) == MonitorName {
		o, uid, err := monitorOptions(os.Args[1:])
		if err != nil {
			return err
		}
		return launcher.RunGiven(ctx, uid, o)
	}
	var o launcher.Options
	fs := flag.NewFlagSet("vmi-launcher", flag.ContinueOnError)
	fs.StringVar(&o.Accel, "accel", launcher.AccelTCG, "accelerator: tcg, or kvm (needs /dev/kvm)")
	fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", launcher.DefaultShutdownTimeout, "how long a guest with an agent may take to shut down when the pod is deleted")
	fs.StringVar(&o.Listen, "listen", "", "address of the status server (default :9090)")
	fs.StringVar(&o.QEMU, "qemu", launcher.DefaultQEMU, "QEMU binary")
	fs.StringVar(&o.FirmwareDir, "firmware-dir", launcher.DefaultFirmwareDir, "folder of OVMF's files")
	fs.StringVar(&o.DiskDir, "disk-dir", launcher.DefaultDiskDir, "folder where each volume's claim is mounted")
	fs.StringVar(&o.RunDir, "run-dir", launcher.DefaultRunDir, "writable folder for the sockets and the EFI variable store")
	fs.DurationVar(&o.AgentInterval, "agent-interval", launcher.DefaultAgentInterval, "how often the guest agent is asked")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	raw := os.Getenv(EnvInstance)
	if raw == "" {
		return fmt.Errorf("no instance: the environment variable %s is empty", EnvInstance)
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := json.Unmarshal([]byte(raw), vmi); err != nil {
		return fmt.Errorf("the instance in %s: %w", EnvInstance, err)
	}
	return launcher.Run(ctx, vmi, o)
}

// monitorOptions reads virt-controller's command line of virt-launcher-
// monitor: the instance's UID and its grace period (the guest's shutdown
// timeout); every other flag, with its value, is KubeVirt's and skipped.
func monitorOptions(args []string) (launcher.Options, string, error) {
	var o launcher.Options
	uid := ""
	for i := 0; i < len(args); i++ {
		flagName, value, inline := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if !inline && i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") {
			value = args[i+1]
			i++
		}
		switch flagName {
		case "uid":
			uid = value
		case "grace-period-seconds":
			n, err := strconv.Atoi(value)
			if err != nil || n < 0 {
				return o, "", fmt.Errorf("--grace-period-seconds %q: want a number of seconds", value)
			}
			o.ShutdownTimeout = time.Duration(n) * time.Second
		}
	}
	if uid == "" {
		return o, "", fmt.Errorf("%s: no --uid: the instance cannot be told apart", MonitorName)
	}
	return o, uid, nil
}
