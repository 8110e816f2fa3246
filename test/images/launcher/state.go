package launcher

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"
)

// state is the launcher's Status, shared by the QEMU follower, the agent
// poller and the status server.
type state struct {
	mu          sync.Mutex
	st          Status
	everAgent   bool
	agentChange chan struct{} // signalled when the agent's port opens
}

func newState(accel string, nics []NIC) *state {
	s := &state{st: Status{QEMU: QEMUStatus{State: StateStarting, Accel: accel}}, agentChange: make(chan struct{}, 1)}
	for _, n := range nics {
		s.st.QEMU.Interfaces = append(s.st.QEMU.Interfaces, DomainInterface{Name: n.Name, MAC: n.MAC})
	}
	return s
}

func now() *time.Time {
	t := time.Now().UTC()
	return &t
}

func (s *state) started(pid int, args []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.QEMU.PID, s.st.QEMU.StartedAt, s.st.QEMU.Args = pid, now(), slices.Clone(args)
}

func (s *state) running() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st.QEMU.State == StateStarting {
		s.st.QEMU.State, s.st.QEMU.RunningAt = StateRunning, now()
	}
}

func (s *state) stopping() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st.QEMU.State != StateExited {
		s.st.QEMU.State = StateStopping
	}
}

func (s *state) exited(how string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.QEMU.State, s.st.QEMU.Exit = StateExited, how
	s.st.Agent.Connected = false
}

func (s *state) agentEverConnected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.everAgent
}

// snapshot is a copy of the status.
func (s *state) snapshot() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.st
	out.QEMU.Args = slices.Clone(s.st.QEMU.Args)
	out.QEMU.Interfaces = slices.Clone(s.st.QEMU.Interfaces)
	out.Agent.Interfaces = slices.Clone(s.st.Agent.Interfaces)
	return out
}

// event follows QEMU's monitor events: the guest agent's port opened or
// closed (the guest's agent started or stopped).
func (s *state) event(ev QMPEvent, log io.Writer) {
	if ev.Name != "VSERPORT_CHANGE" {
		return
	}
	var data struct {
		ID   string `json:"id"`
		Open bool   `json:"open"`
	}
	if json.Unmarshal(ev.Data, &data) != nil || data.ID != agentPortID {
		return
	}
	s.mu.Lock()
	changed := s.st.Agent.Connected != data.Open
	s.st.Agent.Connected = data.Open
	s.mu.Unlock()
	if changed {
		fmt.Fprintf(log, "launcher: guest agent channel open=%t\n", data.Open)
	}
	select {
	case s.agentChange <- struct{}{}:
	default:
	}
}

func (s *state) agentPortOpen() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.Agent.Connected
}

// setAgent records an answer of the guest agent.
func (s *state) setAgent(osInfo *GuestOSInfo, ifaces []GuestInterface) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.everAgent = true
	s.st.Agent.OSInfo, s.st.Agent.Interfaces, s.st.Agent.UpdatedAt = osInfo, ifaces, now()
}

// pollAgent asks the guest agent for the OS and the interfaces every
// AgentInterval while its port is open, until ctx ends.
func (s *state) pollAgent(ctx context.Context, socket string, o Options) {
	var conn *qga
	defer func() {
		if conn != nil {
			conn.close()
		}
	}()
	t := time.NewTicker(o.AgentInterval)
	defer t.Stop()
	var lastErr string
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.agentChange:
		}
		if !s.agentPortOpen() {
			continue
		}
		if conn == nil {
			c, err := dialQGA(ctx, socket)
			if err != nil {
				continue
			}
			conn = c
		}
		osInfo, ifaces, err := conn.guestInfo(5 * time.Second)
		if err != nil {
			if err.Error() != lastErr {
				fmt.Fprintf(o.Log, "launcher: guest agent: %v\n", err)
				lastErr = err.Error()
			}
			conn.close()
			conn = nil
			continue
		}
		first := !s.agentEverConnected()
		s.setAgent(osInfo, ifaces)
		if first {
			fmt.Fprintf(o.Log, "launcher: guest agent answered: %s (%s)\n", osInfo.PrettyName, osInfo.KernelRelease)
		}
	}
}

// handler serves StatusPath and ReadyPath, and answers InstancePath for
// the instance of uid it runs (the instance given again).
func (s *state) handler(uid string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("PUT "+InstancePath, func(w http.ResponseWriter, r *http.Request) {
		if got, err := readInstance(r); err != nil || string(got.UID) != uid {
			http.Error(w, "this launcher runs instance "+uid, http.StatusConflict)
			return
		}
		_, _ = io.WriteString(w, "running\n")
	})
	mux.HandleFunc("GET "+StatusPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.snapshot())
	})
	mux.HandleFunc("GET "+ReadyPath, func(w http.ResponseWriter, _ *http.Request) {
		if st := s.snapshot(); st.QEMU.State != StateRunning {
			http.Error(w, "qemu "+st.QEMU.State, http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	return mux
}
