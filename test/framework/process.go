package framework

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// stopGrace is how long a process may take to exit after SIGTERM before its
// process group is killed.
const stopGrace = 10 * time.Second

// spawner starts child processes from one goroutine locked to its own OS
// thread. The kernel delivers the parent-death signal (Pdeathsig) when the
// thread that forked a child exits, not when the process does; a thread that
// lives exactly as long as the environment makes that signal mean "the
// environment or the whole test binary is gone".
type spawner struct {
	requests chan spawnRequest
}

type spawnRequest struct {
	cmd    *exec.Cmd
	result chan error
}

func newSpawner() *spawner {
	s := &spawner{requests: make(chan spawnRequest)}
	go func() {
		// Never unlocked: when this goroutine returns, the runtime ends the
		// thread, and every child still alive receives SIGKILL.
		runtime.LockOSThread()
		for r := range s.requests {
			r.result <- r.cmd.Start()
		}
	}()
	return s
}

func (s *spawner) start(cmd *exec.Cmd) error {
	r := spawnRequest{cmd: cmd, result: make(chan error, 1)}
	s.requests <- r
	return <-r.result
}

// close ends the spawner's thread. Children still running receive SIGKILL.
func (s *spawner) close() {
	close(s.requests)
}

// process is one control-plane binary running in its own process group.
type process struct {
	name string
	cmd  *exec.Cmd
	// inner is the process a wrapper (nsenter, unshare) forked and that
	// does the work, 0 when the command itself does. Signals go to it.
	inner   int
	logPath string
	logFile *os.File
	done    chan struct{}
	waitErr error
}

// startProcess starts binary with args, its output going to
// <logDir>/<name>.log.
func startProcess(s *spawner, name, binary string, args []string, logDir string) (*process, error) {
	return startProcessEnv(s, name, binary, args, logDir, nil)
}

// startProcessEnv is startProcess with variables added to the
// environment.
func startProcessEnv(s *spawner, name, binary string, args []string, logDir string, env []string) (*process, error) {
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating log file for %s: %w", name, err)
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,
		Pdeathsig: syscall.SIGKILL,
	}
	if err := s.start(cmd); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, logFile: logFile, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// pid is the id of the process doing the work: the wrapper's child when
// there is one, else the command's.
func (p *process) pid() int {
	if p.inner > 0 {
		return p.inner
	}
	return p.cmd.Process.Pid
}

// pgid is the process group of the command and everything it started.
func (p *process) pgid() int {
	return p.cmd.Process.Pid
}

// findInner waits until the wrapper's child has executed binary, and
// records its pid.
func (p *process) findInner(binary string) error {
	want, err := filepath.EvalSymlinks(binary)
	if err != nil {
		return fmt.Errorf("resolving %s: %w", binary, err)
	}
	children := fmt.Sprintf("/proc/%d/task/%d/children", p.pgid(), p.pgid())
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if exited, why := p.exited(); exited {
			return fmt.Errorf("%s %v; log %s:\n%s", p.name, why, p.logPath, p.tail(30))
		}
		b, _ := os.ReadFile(children)
		for _, f := range strings.Fields(string(b)) {
			if exe, err := os.Readlink("/proc/" + f + "/exe"); err == nil && exe == want {
				p.inner, _ = strconv.Atoi(f)
				return nil
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("%s: no child running %s after 10s", p.name, binary)
}

// exited reports whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		if p.waitErr == nil {
			return true, errors.New("exited with status 0")
		}
		return true, p.waitErr
	default:
		return false, nil
	}
}

// stop sends SIGTERM to the process group, and SIGKILL when it has not
// exited after grace. It returns once the process has been reaped.
//
// With a wrapper, SIGTERM goes to the inner process alone (the wrapper
// would die of it at once and end the wait); the wrapper exits with it.
func (p *process) stop(grace time.Duration) {
	if ok, _ := p.exited(); ok {
		// The leader is gone; make sure nothing it started outlives it.
		_ = syscall.Kill(-p.pgid(), syscall.SIGKILL)
		return
	}
	if p.inner > 0 {
		_ = syscall.Kill(p.inner, syscall.SIGTERM)
	} else {
		_ = syscall.Kill(-p.pgid(), syscall.SIGTERM)
	}
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.pgid(), syscall.SIGKILL)
		<-p.done
	}
	_ = syscall.Kill(-p.pgid(), syscall.SIGKILL)
}

// tail returns the last n lines of the process's log.
func (p *process) tail(n int) string {
	return tailFile(p.logPath, n)
}

// TailBytes is the last n bytes of a file; empty when it cannot be read.
func TailBytes(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if len(data) > n {
		data = data[len(data)-n:]
	}
	return string(data)
}

func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", path, err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}
