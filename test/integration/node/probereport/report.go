// Package probereport is the report podprobe writes as its termination
// message, shared by the probe and the tests that read it.
package probereport

// Report is what the probe saw of itself.
type Report struct {
	// Status holds lines of /proc/self/status: Uid, Gid, Groups, CapEff,
	// CapPrm, CapBnd, NoNewPrivs, Seccomp.
	Status map[string]string `json:"status"`
	// RootWrite, EmptyDirWrite and VolumeWrite are "ok" or the error of a
	// write to /, to $EMPTYDIR and to $VOLUME.
	RootWrite     string `json:"rootWrite"`
	EmptyDirWrite string `json:"emptyDirWrite"`
	VolumeWrite   string `json:"volumeWrite"`
	// VolumeGID and VolumeMode are the group and mode of $VOLUME.
	VolumeGID  uint32 `json:"volumeGID"`
	VolumeMode string `json:"volumeMode"`
	// ConfigMaps are the names the probe listed in its namespace through
	// the kubernetes Service; APIError says why it could not.
	ConfigMaps []string `json:"configMaps"`
	APIError   string   `json:"apiError,omitempty"`
	// HostAnswer is the body $HOST_URL answered, or the error.
	HostAnswer string `json:"hostAnswer"`
	// KVM, when $KVM is set, is "api <n>" (KVM_GET_API_VERSION on
	// /dev/kvm) or the error.
	KVM string `json:"kvm,omitempty"`
	// ResolvConf is the pod's /etc/resolv.conf, as the kubelet wrote it.
	ResolvConf string `json:"resolvConf,omitempty"`
	// Lookups are the answers to the names of $LOOKUP, in order.
	Lookups []Lookup `json:"lookups,omitempty"`
	// ServiceAnswer is the body $SERVICE_URL answered, or the error of
	// the last try.
	ServiceAnswer string `json:"serviceAnswer,omitempty"`
}

// Lookup is the answer of the pod's resolver (Go's, reading
// /etc/resolv.conf: its nameserver, search domains and ndots) to one name.
type Lookup struct {
	Name      string   `json:"name"`
	Addresses []string `json:"addresses,omitempty"`
	// Error is the lookup's error; NotFound is true when the server
	// said the name does not exist (NXDOMAIN).
	Error    string `json:"error,omitempty"`
	NotFound bool   `json:"notFound,omitempty"`
	// Millis is how long the lookup took.
	Millis int64 `json:"millis"`
}
