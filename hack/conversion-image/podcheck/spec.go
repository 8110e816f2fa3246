package podcheck

// The part of the OCI runtime specification (runc's config.json) a pod's
// container becomes here.

type runtimeSpec struct {
	OCIVersion string  `json:"ociVersion"`
	Process    process `json:"process"`
	Root       root    `json:"root"`
	Hostname   string  `json:"hostname"`
	Mounts     []mount `json:"mounts"`
	Linux      linux   `json:"linux"`
}

type process struct {
	User            user         `json:"user"`
	Args            []string     `json:"args"`
	Env             []string     `json:"env"`
	Cwd             string       `json:"cwd"`
	Capabilities    capabilities `json:"capabilities"`
	NoNewPrivileges bool         `json:"noNewPrivileges"`
}

type user struct {
	UID            int64   `json:"uid"`
	GID            int64   `json:"gid"`
	AdditionalGids []int64 `json:"additionalGids,omitempty"`
}

// capabilities are all empty for a container that drops ALL.
type capabilities struct {
	Bounding    []string `json:"bounding"`
	Effective   []string `json:"effective"`
	Permitted   []string `json:"permitted"`
	Inheritable []string `json:"inheritable"`
	Ambient     []string `json:"ambient"`
}

type root struct {
	Path     string `json:"path"`
	Readonly bool   `json:"readonly"`
}

type mount struct {
	Destination string   `json:"destination"`
	Type        string   `json:"type"`
	Source      string   `json:"source"`
	Options     []string `json:"options,omitempty"`
}

type linux struct {
	Namespaces    []namespace `json:"namespaces"`
	Resources     resources   `json:"resources"`
	CgroupsPath   string      `json:"cgroupsPath,omitempty"`
	Devices       []device    `json:"devices,omitempty"`
	MaskedPaths   []string    `json:"maskedPaths"`
	ReadonlyPaths []string    `json:"readonlyPaths"`
	Seccomp       *seccomp    `json:"seccomp,omitempty"`
}

type namespace struct {
	Type string `json:"type"`
}

type resources struct {
	Devices []deviceRule `json:"devices"`
	Memory  *memory      `json:"memory,omitempty"`
	CPU     *cpu         `json:"cpu,omitempty"`
}

type deviceRule struct {
	Allow  bool   `json:"allow"`
	Type   string `json:"type,omitempty"`
	Major  *int64 `json:"major,omitempty"`
	Minor  *int64 `json:"minor,omitempty"`
	Access string `json:"access"`
}

type memory struct {
	Limit int64 `json:"limit"`
}

type cpu struct {
	Quota  int64  `json:"quota"`
	Period uint64 `json:"period"`
}

type device struct {
	Path     string `json:"path"`
	Type     string `json:"type"`
	Major    int64  `json:"major"`
	Minor    int64  `json:"minor"`
	FileMode uint32 `json:"fileMode"`
	UID      uint32 `json:"uid"`
	GID      uint32 `json:"gid"`
}

type seccomp struct {
	DefaultAction string           `json:"defaultAction"`
	Architectures []string         `json:"architectures"`
	Syscalls      []seccompSyscall `json:"syscalls"`
}

type seccompSyscall struct {
	Names    []string `json:"names"`
	Action   string   `json:"action"`
	ErrnoRet *uint    `json:"errnoRet,omitempty"`
}

// refusedSyscalls are system calls containerd's RuntimeDefault profile
// refuses to a container without capabilities that a conversion could
// reach: new namespaces (passt's unshare(CLONE_NEWUSER) among them),
// mounts, keyrings, BPF, tracing, kernel modules and clocks.
var refusedSyscalls = []string{
	"unshare", "setns", "mount", "umount2", "pivot_root", "open_by_handle_at", "name_to_handle_at",
	"keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd", "ptrace", "process_vm_readv",
	"process_vm_writev", "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	"reboot", "swapon", "swapoff", "acct", "iopl", "ioperm", "quotactl", "clock_settime", "settimeofday",
	"lookup_dcookie", "vhangup", "syslog", "fanotify_init", "move_pages", "mbind", "set_mempolicy", "uselib",
}

// defaultMaskedPaths and defaultReadonlyPaths are containerd's.
var (
	defaultMaskedPaths = []string{
		"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
		"/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap",
	}
	defaultReadonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)
