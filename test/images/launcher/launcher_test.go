package launcher

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// syncBuffer is a bytes.Buffer QEMU and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// freeAddr is a local address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err, "finding a free port")
	defer ln.Close()
	return ln.Addr().String()
}

// realQEMU is the machine's qemu-system-x86_64, or skips the test.
func realQEMU(t *testing.T) string {
	t.Helper()
	q, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Skip("qemu-system-x86_64 is not installed (apt-get install qemu-system-x86 ovmf)")
	}
	if _, err := os.Stat(filepath.Join(DefaultFirmwareDir, ovmfCodeSecureBoot)); err != nil {
		t.Skip("OVMF is not installed (apt-get install ovmf)")
	}
	return q
}

// launched is a Run in the background.
type launched struct {
	addr          string
	console, log  *syncBuffer
	cancel        context.CancelFunc
	done          chan struct{}
	err           error // Run's, once done is closed
	returnedAfter time.Duration
}

// launch runs vmi with a real QEMU, its disk-0 holding image.
func launch(t *testing.T, vmi *kubevirtv1.VirtualMachineInstance, image []byte) *launched {
	t.Helper()
	qemu := realQEMU(t)
	disks := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(disks, "disk-0"), 0o755))
	img := make([]byte, 1<<20)
	copy(img, image)
	require.NoError(t, os.WriteFile(DiskImage(disks, "disk-0"), img, 0o644), "writing the disk image")
	l := &launched{addr: freeAddr(t), console: &syncBuffer{}, log: &syncBuffer{}, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	go func() {
		l.err = Run(ctx, vmi, Options{QEMU: qemu, DiskDir: disks, RunDir: filepath.Join(t.TempDir(), "run"),
			Listen: l.addr, Console: l.console, Log: l.log})
		close(l.done)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-l.done:
		case <-time.After(30 * time.Second):
			t.Error("Run did not return 30 s after its context ended")
		}
	})
	return l
}

// status reads the launcher's status.
func (l *launched) status(t *testing.T) (Status, bool) {
	resp, err := http.Get("http://" + l.addr + StatusPath)
	if err != nil {
		return Status{}, false
	}
	defer resp.Body.Close()
	var st Status
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st), "decoding the status")
	return st, true
}

// ready says what the readiness path answers.
func (l *launched) ready() int {
	resp, err := http.Get("http://" + l.addr + ReadyPath)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// stop ends Run's context and waits for it.
func (l *launched) stop(t *testing.T) error {
	t.Helper()
	start := time.Now()
	l.cancel()
	select {
	case <-l.done:
		l.returnedAfter = time.Since(start)
		return l.err
	case <-time.After(30 * time.Second):
		require.FailNow(t, "Run did not return after its context ended", "log:\n%s", l.log)
		return nil
	}
}

func TestRunBootsToTheSerialConsoleAndStops(t *testing.T) {
	const marker = "V2V-GUEST-UP firmware=bios boot-sector"
	l := launch(t, instanceWith(), BootSector(marker+"\r\n"))
	require.Eventually(t, func() bool { return bytes.Contains([]byte(l.console.String()), []byte(marker)) },
		time.Minute, 100*time.Millisecond, "the guest's line on the console; launcher log:\n%s", l.log)
	assert.Equal(t, http.StatusOK, l.ready(), "readiness once QEMU runs the guest")
	st, ok := l.status(t)
	require.True(t, ok, "the status server answers")
	assert.Equal(t, StateRunning, st.QEMU.State, "QEMU's state")
	assert.Equal(t, AccelTCG, st.QEMU.Accel, "the accelerator")
	assert.NotNil(t, st.QEMU.RunningAt, "when the guest started running")
	assert.False(t, st.Agent.Connected, "no agent in a boot sector")
	require.NoError(t, l.stop(t), "a stop asked by the context is no error")
	assert.Less(t, l.returnedAfter, 10*time.Second, "a guest without agent is stopped at once")
	assert.Contains(t, l.log.String(), "launcher: telling QEMU to quit", "how the guest was stopped")
}

func TestRunEFISecureBootReachesRunning(t *testing.T) {
	l := launch(t, instanceWith(efi(ptr.To(true), true)), nil)
	require.Eventually(t, func() bool { return l.ready() == http.StatusOK }, time.Minute, 100*time.Millisecond,
		"readiness of an EFI guest without OS (it sits in firmware); launcher log:\n%s", l.log)
	st, _ := l.status(t)
	assert.Contains(t, st.QEMU.Args, "driver=cfi.pflash01,property=secure,value=on", "secure boot's pflash setting")
	require.NoError(t, l.stop(t), "stopping")
}

func TestRunReportsQEMUFailing(t *testing.T) {
	vmi := instanceWith(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
		s.Domain.Firmware = &kubevirtv1.Firmware{UUID: "not-a-uuid"}
	})
	l := launch(t, vmi, nil)
	select {
	case <-l.done:
		require.Error(t, l.err, "QEMU refusing its arguments")
		assert.Contains(t, l.err.Error(), "qemu: exit status 1", "Run's error")
		assert.Contains(t, l.log.String(), "UUID", "QEMU's own message in the log")
	case <-time.After(time.Minute):
		require.FailNow(t, "Run did not return when QEMU failed", "log:\n%s", l.log)
	}
}

func TestRunRefusesAMissingDisk(t *testing.T) {
	err := Run(context.Background(), instanceWith(), Options{QEMU: "/bin/false", DiskDir: t.TempDir(), RunDir: t.TempDir(), Listen: freeAddr(t)})
	require.Error(t, err, "a disk whose claim is not mounted")
	assert.Contains(t, err.Error(), "disk disk-0: open", "the error names the disk")
}

// fakeAgent answers as QEMU's guest agent on a unix socket: a stale line
// before each sync answer, as a channel holding an old session's output.
func fakeAgent(t *testing.T) string {
	t.Helper()
	socket := filepath.Join(t.TempDir(), "qga.sock")
	ln, err := net.Listen("unix", socket)
	require.NoError(t, err, "listening as the agent")
	t.Cleanup(func() { ln.Close() })
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		r := bufio.NewReader(conn)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return
			}
			var req struct {
				Execute   string `json:"execute"`
				Arguments struct {
					ID int64 `json:"id"`
				} `json:"arguments"`
			}
			_ = json.Unmarshal(line, &req)
			switch req.Execute {
			case "guest-sync-delimited":
				fmt.Fprintf(conn, "{\"return\": {\"stale\": 1}}\n\xff{\"return\": %d}\n", req.Arguments.ID)
			case "guest-get-osinfo":
				io.WriteString(conn, `{"return": {"id": "debian", "name": "Debian GNU/Linux", "pretty-name": "Debian GNU/Linux 12 (bookworm)", "version": "12 (bookworm)", "version-id": "12", "kernel-release": "6.1.0-41-amd64", "machine": "x86_64"}}`+"\n")
			case "guest-network-get-interfaces":
				io.WriteString(conn, `{"return": [{"name": "lo", "hardware-address": "00:00:00:00:00:00", "ip-addresses": [{"ip-address-type": "ipv4", "ip-address": "127.0.0.1", "prefix": 8}]}, {"name": "ens192", "hardware-address": "00:50:56:2a:0b:0c", "ip-addresses": [{"ip-address-type": "ipv4", "ip-address": "192.168.122.10", "prefix": 24}]}]}`+"\n")
			default:
				io.WriteString(conn, `{"error": {"class": "CommandNotFound", "desc": "no"}}`+"\n")
			}
		}
	}()
	return socket
}

func TestGuestAgentClient(t *testing.T) {
	g, err := dialQGA(context.Background(), fakeAgent(t))
	require.NoError(t, err, "connecting to the agent")
	defer g.close()
	for range 2 {
		osInfo, ifaces, err := g.guestInfo(5 * time.Second)
		require.NoError(t, err, "asking the agent")
		assert.Equal(t, "Debian GNU/Linux 12 (bookworm)", osInfo.PrettyName, "the OS")
		assert.Equal(t, "12", osInfo.VersionID, "the OS version")
		require.Len(t, ifaces, 2, "the interfaces")
		assert.Equal(t, GuestInterface{Name: "ens192", HardwareAddress: "00:50:56:2a:0b:0c",
			IPAddresses: []GuestIPAddress{{Type: "ipv4", Address: "192.168.122.10", Prefix: 24}}}, ifaces[1], "the second interface")
	}
	err = g.call(time.Now().Add(time.Second), "guest-nonsense", new(any))
	assert.ErrorContains(t, err, "guest agent guest-nonsense: CommandNotFound: no", "an error answer")
}
