package framework

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The node's addresses come from 198.18.0.0/15, the range set aside for
// network device testing (RFC 2544): slot i gives the link 198.18.i.0/30
// (host side .1, node side .2) and the pods 198.19.i.0/24. Nothing of it
// is routed off the machine: the node's namespace has no default route.
const (
	linkBase      = "198.18"
	podBase       = "198.19"
	netSlots      = 256
	linkPrefixLen = 30
)

// networkLock serializes the choice of network slots between the stacks
// of a machine. Its path is fixed, not under TMPDIR, so that every process
// takes the same lock.
const networkLock = "/tmp/vmm-testnode-network.lock"

// nodeNetwork is the node's network: a veth pair between the machine's
// namespace (hostIface, hostIP) and the node's (eth0, nodeIP), and the pod
// subnet behind the node.
type nodeNetwork struct {
	slot      int
	hostIface string
	hostIP    net.IP
	nodeIP    net.IP
	podCIDR   *net.IPNet
}

func slotNetwork(id string, slot int) *nodeNetwork {
	_, pods, _ := net.ParseCIDR(fmt.Sprintf("%s.%d.0/24", podBase, slot))
	return &nodeNetwork{
		slot:      slot,
		hostIface: "vmmh-" + id,
		hostIP:    net.ParseIP(fmt.Sprintf("%s.%d.1", linkBase, slot)),
		nodeIP:    net.ParseIP(fmt.Sprintf("%s.%d.2", linkBase, slot)),
		podCIDR:   pods,
	}
}

// gatewayIP is the pod bridge's address, the pods' default gateway.
func (n *nodeNetwork) gatewayIP() net.IP {
	ip := n.podCIDR.IP.To4()
	return net.IPv4(ip[0], ip[1], ip[2], 1)
}

// namespaceHolder starts process 1 of the node's namespaces: unshare makes
// a network, mount and PID namespace (with its own /proc) and runs the
// sandbox binary in them, which only waits and reaps. When it ends, by
// Stop, by the test binary's death (parent-death signal, then unshare's
// --kill-child) or otherwise, the kernel kills every process of the PID
// namespace (containerd, its shims, the pods) and the network and mount
// namespaces, with their veth end and mounts, go with the last of them.
func (e *Environment) namespaceHolder(sandboxBinary string) (*process, error) {
	args := []string{"--pid", "--fork", "--kill-child", "--net", "--mount", "--mount-proc", "--propagation", "private", "--", sandboxBinary}
	p, err := startProcess(e.spawner, "node-namespaces", "unshare", args, e.dir)
	if err != nil {
		return nil, err
	}
	if err := p.findInner(sandboxBinary); err != nil {
		p.stop(time.Second)
		return nil, err
	}
	return p, nil
}

// setupNetwork chooses a free slot, creates the veth pair and configures
// both ends. The choice and the creation hold a lock, so stacks started at
// the same time on one machine take different slots.
func (e *Environment) setupNetwork(id string, holder int) (*nodeNetwork, error) {
	unlock, err := lockFile(networkLock)
	if err != nil {
		return nil, err
	}
	defer unlock()
	used, err := usedPrefixes()
	if err != nil {
		return nil, err
	}
	for _, slot := range rand.Perm(netSlots) {
		n := slotNetwork(id, slot)
		if overlapsAny(used, n) {
			continue
		}
		return n, n.create(holder)
	}
	return nil, errors.New("no free node network slot in 198.18.0.0/15")
}

func (n *nodeNetwork) create(holder int) error {
	pid := strconv.Itoa(holder)
	host := n.hostIP.String() + "/" + strconv.Itoa(linkPrefixLen)
	node := n.nodeIP.String() + "/" + strconv.Itoa(linkPrefixLen)
	steps := [][]string{
		{"ip", "link", "add", n.hostIface, "type", "veth", "peer", "name", "eth0", "netns", pid},
		{"ip", "addr", "add", host, "dev", n.hostIface},
		{"ip", "link", "set", n.hostIface, "up"},
		// The machine reaches the pods through the node.
		{"ip", "route", "add", n.podCIDR.String(), "via", n.nodeIP.String(), "dev", n.hostIface},
		inNode(holder, false, "ip", "link", "set", "lo", "up"),
		inNode(holder, false, "ip", "addr", "add", node, "dev", "eth0"),
		inNode(holder, false, "ip", "link", "set", "eth0", "up"),
		// Service IPs have a route so that the node's own processes can
		// reach them (kube-proxy rewrites them before they leave); there is
		// no default route, so nothing else leaves the node.
		inNode(holder, false, "ip", "route", "add", serviceCIDR, "dev", "eth0"),
	}
	for _, s := range steps {
		if err := runCommand(s...); err != nil {
			return fmt.Errorf("setting up the node network: %w", err)
		}
	}
	return nil
}

// inNode returns the command line that runs args in the node's network and
// mount namespaces (and PID namespace when pid is true; nsenter then forks).
// nsenter, not ip netns exec: the latter remounts /sys and hides the cgroup
// hierarchies.
func inNode(holder int, pid bool, args ...string) []string {
	cmd := []string{"nsenter", "--target", strconv.Itoa(holder), "--net", "--mount"}
	if pid {
		cmd = append(cmd, "--pid")
	}
	return append(append(cmd, "--"), args...)
}

// usedPrefixes are the IPv4 prefixes of the machine's addresses and routes.
func usedPrefixes() ([]*net.IPNet, error) {
	out, err := exec.Command("ip", "-4", "route", "show", "table", "all").Output()
	if err != nil {
		return nil, fmt.Errorf("listing routes: %w", err)
	}
	var used []*net.IPNet
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		dst := f[0]
		if dst == "local" || dst == "broadcast" || dst == "unreachable" || dst == "blackhole" || dst == "prohibit" {
			if len(f) < 2 {
				continue
			}
			dst = f[1]
		}
		if !strings.Contains(dst, "/") {
			dst += "/32"
		}
		if _, p, err := net.ParseCIDR(dst); err == nil {
			used = append(used, p)
		}
	}
	return used, nil
}

func overlapsAny(used []*net.IPNet, n *nodeNetwork) bool {
	_, link, _ := net.ParseCIDR(fmt.Sprintf("%s.%d.0/24", linkBase, n.slot))
	for _, u := range used {
		for _, mine := range []*net.IPNet{link, n.podCIDR} {
			if u.Contains(mine.IP) || mine.Contains(u.IP) {
				return true
			}
		}
	}
	return false
}

// lockFile takes an exclusive flock on path, creating it.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

// runCommand runs a command, returning its output in the error when it fails.
func runCommand(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}
