package launcher

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// qmpMessage is any message of QEMU's monitor: a greeting, a reply or an
// event.
type qmpMessage struct {
	QMP    json.RawMessage `json:"QMP,omitempty"`
	ID     uint64          `json:"id,omitempty"`
	Return json.RawMessage `json:"return,omitempty"`
	Error  *struct {
		Class string `json:"class"`
		Desc  string `json:"desc"`
	} `json:"error,omitempty"`
	Event string          `json:"event,omitempty"`
	Data  json.RawMessage `json:"data,omitempty"`
}

// QMPEvent is an event of QEMU's monitor.
type QMPEvent struct {
	Name string
	Data json.RawMessage
}

// qmp is a client of QEMU's monitor (QMP): one command at a time, events
// handed to onEvent as they come.
type qmp struct {
	conn    net.Conn
	onEvent func(QMPEvent)

	mu      sync.Mutex // one command at a time
	nextID  uint64
	replies chan qmpMessage
	done    chan struct{}
	err     error // why the connection ended, once done is closed
}

// dialQMP connects to the monitor's socket, retrying while QEMU has not
// created it yet (until ctx ends), and negotiates capabilities.
func dialQMP(ctx context.Context, socket string, onEvent func(QMPEvent)) (*qmp, error) {
	var conn net.Conn
	for {
		c, err := (&net.Dialer{}).DialContext(ctx, "unix", socket)
		if err == nil {
			conn = c
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connecting to QEMU's monitor %s: %w (last error: %v)", socket, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	q := &qmp{conn: conn, onEvent: onEvent, replies: make(chan qmpMessage, 1), done: make(chan struct{})}
	greeting := make(chan error, 1)
	go q.read(greeting)
	select {
	case err := <-greeting:
		if err != nil {
			conn.Close()
			return nil, err
		}
	case <-ctx.Done():
		conn.Close()
		return nil, fmt.Errorf("waiting for QEMU's monitor greeting: %w", ctx.Err())
	}
	if _, err := q.execute(ctx, "qmp_capabilities", nil); err != nil {
		conn.Close()
		return nil, err
	}
	return q, nil
}

// read reads messages until the connection ends: the greeting first (its
// outcome sent on greeting), then replies to commands and events.
func (q *qmp) read(greeting chan<- error) {
	dec := json.NewDecoder(bufio.NewReader(q.conn))
	first := true
	for {
		var msg qmpMessage
		if err := dec.Decode(&msg); err != nil {
			q.err = fmt.Errorf("reading QEMU's monitor: %w", err)
			if first {
				greeting <- q.err
			}
			close(q.done)
			return
		}
		switch {
		case first:
			first = false
			if msg.QMP == nil {
				greeting <- errors.New("QEMU's monitor did not greet")
				continue
			}
			greeting <- nil
		case msg.Event != "":
			if q.onEvent != nil {
				q.onEvent(QMPEvent{Name: msg.Event, Data: msg.Data})
			}
		default:
			select {
			case q.replies <- msg:
			default: // a reply nobody waits for any more
			}
		}
	}
}

// execute runs a command and returns its reply's "return".
func (q *qmp) execute(ctx context.Context, command string, args any) (json.RawMessage, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.nextID++
	id := q.nextID
	req := map[string]any{"execute": command, "id": id}
	if args != nil {
		req["arguments"] = args
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if _, err := q.conn.Write(append(b, '\n')); err != nil {
		return nil, fmt.Errorf("QMP %s: %w", command, err)
	}
	for {
		select {
		case msg := <-q.replies:
			if msg.ID != id {
				continue // the late reply of a command given up on
			}
			if msg.Error != nil {
				return nil, fmt.Errorf("QMP %s: %s: %s", command, msg.Error.Class, msg.Error.Desc)
			}
			return msg.Return, nil
		case <-q.done:
			return nil, fmt.Errorf("QMP %s: %w", command, q.err)
		case <-ctx.Done():
			return nil, fmt.Errorf("QMP %s: %w", command, ctx.Err())
		}
	}
}

// running asks whether the guest runs (query-status).
func (q *qmp) running(ctx context.Context) (bool, error) {
	ret, err := q.execute(ctx, "query-status", nil)
	if err != nil {
		return false, err
	}
	var st struct {
		Running bool   `json:"running"`
		Status  string `json:"status"`
	}
	if err := json.Unmarshal(ret, &st); err != nil {
		return false, fmt.Errorf("QMP query-status: %w", err)
	}
	return st.Running, nil
}

func (q *qmp) close() error { return q.conn.Close() }
