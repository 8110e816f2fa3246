package launcher

import "time"

// Port is where the launcher serves its status (plain HTTP on the pod's
// IP; the KubeVirt stand-in reads it through the API server's pod proxy).
const Port = 9090

// Paths the launcher serves.
const (
	// StatusPath answers Status as JSON.
	StatusPath = "/status"
	// ReadyPath answers 200 once QEMU runs the guest (the pod's readiness
	// probe), 503 before and after.
	ReadyPath = "/readyz"
	// InstancePath takes the instance (PUT, JSON) in a launcher started
	// without one (RunGiven): what virt-handler gives virt-launcher.
	InstancePath = "/instance"
)

// QEMU states in Status.
const (
	// StateWaiting: no instance given yet (RunGiven).
	StateWaiting  = "waiting"
	StateStarting = "starting"
	StateRunning  = "running"
	StateStopping = "stopping"
	StateExited   = "exited"
)

// Status is what the launcher knows of its QEMU and of the guest agent.
type Status struct {
	QEMU  QEMUStatus  `json:"qemu"`
	Agent AgentStatus `json:"agent"`
}

// QEMUStatus is the QEMU process.
type QEMUStatus struct {
	// State is one of the State* constants.
	State string `json:"state"`
	// PID of QEMU inside the pod.
	PID int `json:"pid,omitempty"`
	// StartedAt is when QEMU started; RunningAt when its monitor first
	// said the guest runs.
	StartedAt *time.Time `json:"startedAt,omitempty"`
	RunningAt *time.Time `json:"runningAt,omitempty"`
	// Accel is the accelerator (AccelTCG or AccelKVM).
	Accel string `json:"accel"`
	// Args are QEMU's arguments.
	Args []string `json:"args,omitempty"`
	// Interfaces are the machine's NICs as QEMU has them (what libvirt's
	// domain says of them).
	Interfaces []DomainInterface `json:"interfaces,omitempty"`
	// Exit says how QEMU ended, once it did.
	Exit string `json:"exit,omitempty"`
}

// DomainInterface is one NIC of the machine.
type DomainInterface struct {
	// Name is the instance's name of the interface.
	Name string `json:"name"`
	// MAC is its MAC address, lower case.
	MAC string `json:"mac"`
}

// AgentStatus is what QEMU's guest agent answered, in its own terms.
type AgentStatus struct {
	// Connected is true while the guest holds the agent's virtio-serial
	// port open (QEMU's VSERPORT_CHANGE events, which libvirt, and so
	// virt-handler's AgentConnected condition, follow).
	Connected bool `json:"connected"`
	// OSInfo is guest-get-osinfo's answer.
	OSInfo *GuestOSInfo `json:"osInfo,omitempty"`
	// Interfaces is guest-network-get-interfaces' answer.
	Interfaces []GuestInterface `json:"interfaces,omitempty"`
	// UpdatedAt is when the agent last answered.
	UpdatedAt *time.Time `json:"updatedAt,omitempty"`
}

// GuestOSInfo is the QEMU guest agent's GuestOSInfo (qga/qapi-schema.json).
type GuestOSInfo struct {
	ID            string `json:"id,omitempty"`
	Name          string `json:"name,omitempty"`
	PrettyName    string `json:"pretty-name,omitempty"`
	Version       string `json:"version,omitempty"`
	VersionID     string `json:"version-id,omitempty"`
	KernelRelease string `json:"kernel-release,omitempty"`
	KernelVersion string `json:"kernel-version,omitempty"`
	Machine       string `json:"machine,omitempty"`
}

// GuestInterface is the QEMU guest agent's GuestNetworkInterface.
type GuestInterface struct {
	Name            string           `json:"name"`
	HardwareAddress string           `json:"hardware-address,omitempty"`
	IPAddresses     []GuestIPAddress `json:"ip-addresses,omitempty"`
}

// GuestIPAddress is the QEMU guest agent's GuestIpAddress.
type GuestIPAddress struct {
	// Type is "ipv4" or "ipv6".
	Type    string `json:"ip-address-type"`
	Address string `json:"ip-address"`
	Prefix  int    `json:"prefix"`
}
