package launcher

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"time"
)

// delimiter is the byte the guest agent sends before its answer to
// guest-sync-delimited, so that a client can skip what an earlier
// session left in the channel.
const delimiter = 0xFF

// qga is a client of QEMU's guest agent over the channel's unix socket
// (QEMU listens; the agent in the guest is at the other end of the
// virtio-serial port). Each answer is one JSON line.
type qga struct {
	conn   net.Conn
	r      *bufio.Reader
	nextID int64
}

// dialQGA connects to the guest agent channel's socket.
func dialQGA(ctx context.Context, socket string) (*qga, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, fmt.Errorf("connecting to the guest agent channel %s: %w", socket, err)
	}
	return &qga{conn: c, r: bufio.NewReader(c), nextID: time.Now().UnixNano() & 0x7fffffff}, nil
}

func (g *qga) close() error { return g.conn.Close() }

// sync resynchronises with the agent (guest-sync-delimited): everything up
// to the delimiter and the answer carrying this call's id is skipped.
func (g *qga) sync(deadline time.Time) error {
	g.nextID++
	id := g.nextID
	if err := g.send(deadline, "guest-sync-delimited", map[string]int64{"id": id}); err != nil {
		return err
	}
	for {
		line, err := g.r.ReadBytes('\n')
		if err != nil {
			return fmt.Errorf("guest agent sync: %w", err)
		}
		if i := bytes.LastIndexByte(line, delimiter); i >= 0 {
			line = line[i+1:]
		}
		var ans struct {
			Return *int64 `json:"return"`
		}
		if json.Unmarshal(line, &ans) == nil && ans.Return != nil && *ans.Return == id {
			return nil
		}
	}
}

// call runs a command and decodes its answer's "return" into out.
func (g *qga) call(deadline time.Time, command string, out any) error {
	if err := g.send(deadline, command, nil); err != nil {
		return err
	}
	line, err := g.r.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("guest agent %s: %w", command, err)
	}
	var ans struct {
		Return json.RawMessage `json:"return"`
		Error  *struct {
			Class string `json:"class"`
			Desc  string `json:"desc"`
		} `json:"error"`
	}
	if err := json.Unmarshal(line, &ans); err != nil {
		return fmt.Errorf("guest agent %s: %w (answer %q)", command, err, line)
	}
	if ans.Error != nil {
		return fmt.Errorf("guest agent %s: %s: %s", command, ans.Error.Class, ans.Error.Desc)
	}
	if err := json.Unmarshal(ans.Return, out); err != nil {
		return fmt.Errorf("guest agent %s: %w", command, err)
	}
	return nil
}

// send writes one command; the deadline bounds the whole exchange.
func (g *qga) send(deadline time.Time, command string, args any) error {
	if err := g.conn.SetDeadline(deadline); err != nil {
		return err
	}
	req := map[string]any{"execute": command}
	if args != nil {
		req["arguments"] = args
	}
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if _, err := g.conn.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("guest agent %s: %w", command, err)
	}
	return nil
}

// guestInfo is one round of the questions virt-launcher's agent poller
// asks: the OS and the network interfaces.
func (g *qga) guestInfo(timeout time.Duration) (*GuestOSInfo, []GuestInterface, error) {
	deadline := time.Now().Add(timeout)
	if err := g.sync(deadline); err != nil {
		return nil, nil, err
	}
	var osInfo GuestOSInfo
	if err := g.call(deadline, "guest-get-osinfo", &osInfo); err != nil {
		return nil, nil, err
	}
	var ifaces []GuestInterface
	if err := g.call(deadline, "guest-network-get-interfaces", &ifaces); err != nil {
		return nil, nil, err
	}
	return &osInfo, ifaces, nil
}
