package podcheck

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// effectiveSecurity is the container's security context with the pod's
// filling what the container leaves unset (as the kubelet merges them).
func effectiveSecurity(pod corev1.PodSpec, c corev1.Container) corev1.SecurityContext {
	var sc corev1.SecurityContext
	if c.SecurityContext != nil {
		sc = *c.SecurityContext.DeepCopy()
	}
	if psc := pod.SecurityContext; psc != nil {
		if sc.RunAsUser == nil {
			sc.RunAsUser = psc.RunAsUser
		}
		if sc.RunAsGroup == nil {
			sc.RunAsGroup = psc.RunAsGroup
		}
		if sc.RunAsNonRoot == nil {
			sc.RunAsNonRoot = psc.RunAsNonRoot
		}
		if sc.SeccompProfile == nil {
			sc.SeccompProfile = psc.SeccompProfile
		}
	}
	return sc
}

// containerUser is the uid, gid and supplementary groups (fsGroup and the
// pod's supplemental groups) the process runs with; runAsNonRoot is
// enforced as the kubelet does.
func containerUser(o Options, sc corev1.SecurityContext) (user, error) {
	var u user
	imageUID, imageGID, _ := strings.Cut(o.Image.User, ":")
	switch {
	case sc.RunAsUser != nil:
		u.UID = *sc.RunAsUser
	case imageUID != "":
		n, err := strconv.ParseInt(imageUID, 10, 64)
		if err != nil {
			return u, fmt.Errorf("podcheck: the image's user %q is not numeric, which runAsNonRoot cannot verify", o.Image.User)
		}
		u.UID = n
	}
	u.GID = u.UID
	if sc.RunAsGroup != nil {
		u.GID = *sc.RunAsGroup
	} else if n, err := strconv.ParseInt(imageGID, 10, 64); err == nil {
		u.GID = n
	}
	if sc.RunAsNonRoot != nil && *sc.RunAsNonRoot && u.UID == 0 {
		return u, errors.New("podcheck: runAsNonRoot and the container would run as root")
	}
	if psc := o.Pod.SecurityContext; psc != nil {
		if psc.FSGroup != nil {
			u.AdditionalGids = append(u.AdditionalGids, *psc.FSGroup)
		}
		u.AdditionalGids = append(u.AdditionalGids, psc.SupplementalGroups...)
	}
	return u, nil
}

// containerEnv is the image's environment with the container's over it.
func containerEnv(image []string, env []corev1.EnvVar) []string {
	out := append([]string{}, image...)
	index := map[string]int{}
	for i, e := range out {
		k, _, _ := strings.Cut(e, "=")
		index[k] = i
	}
	for _, e := range env {
		if i, ok := index[e.Name]; ok {
			out[i] = e.Name + "=" + e.Value
			continue
		}
		index[e.Name] = len(out)
		out = append(out, e.Name+"="+e.Value)
	}
	return out
}

// defaultCapabilities are containerd's for a container that drops none.
var defaultCapabilities = []string{
	"CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID", "SETUID",
	"SETFCAP", "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL", "AUDIT_WRITE",
}

// capabilitiesOf is what is left of containerd's default capabilities
// after the container's drop and add.
func capabilitiesOf(sc corev1.SecurityContext) capabilities {
	keep := map[string]bool{}
	for _, c := range defaultCapabilities {
		keep[c] = true
	}
	if sc.Capabilities != nil {
		for _, c := range sc.Capabilities.Drop {
			if c == "ALL" {
				clear(keep)
			}
			delete(keep, string(c))
		}
		for _, c := range sc.Capabilities.Add {
			keep[string(c)] = true
		}
	}
	set := []string{}
	for c := range keep {
		set = append(set, "CAP_"+c)
	}
	sort.Strings(set)
	return capabilities{Bounding: set, Effective: set, Permitted: set, Inheritable: []string{}, Ambient: []string{}}
}

// containerMounts are the runtime's own file systems, the pod's volume
// mounts and the termination-message file.
func containerMounts(o Options, b *Bundle, c corev1.Container) ([]mount, error) {
	mounts := []mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
		{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
	}
	for _, m := range c.VolumeMounts {
		dir, ok := b.Volumes[m.Name]
		if !ok {
			return nil, fmt.Errorf("podcheck: mount of an unknown volume %s", m.Name)
		}
		opts := []string{"rbind", "rw"}
		if m.ReadOnly {
			opts = []string{"rbind", "ro"}
		}
		mounts = append(mounts, mount{Destination: filepath.Clean(m.MountPath), Type: "bind", Source: filepath.Join(dir, m.SubPath), Options: opts})
	}
	term := c.TerminationMessagePath
	if term == "" {
		term = corev1.TerminationMessagePathDefault
	}
	return append(mounts, mount{Destination: term, Type: "bind", Source: b.TerminationLog, Options: []string{"rbind", "rw"}}), nil
}

// containerLinux are the namespaces, cgroup limits, devices and seccomp
// filter of the container.
func containerLinux(o Options, c corev1.Container, sc corev1.SecurityContext) linux {
	l := linux{
		Namespaces:    []namespace{{"pid"}, {"network"}, {"ipc"}, {"uts"}, {"mount"}},
		Resources:     resources{Devices: []deviceRule{{Allow: false, Access: "rwm"}}},
		MaskedPaths:   defaultMaskedPaths,
		ReadonlyPaths: defaultReadonlyPaths,
	}
	if o.CgroupParent != "" {
		l.CgroupsPath = filepath.Join("/", o.CgroupParent, "container")
	}
	if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		l.Resources.Memory = &memory{Limit: q.Value()}
	}
	if q, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
		l.Resources.CPU = &cpu{Quota: q.MilliValue() * 100, Period: 100000}
	}
	if o.KVM {
		major, minor := int64(kvmMajor), int64(kvmMinor)
		l.Devices = []device{{Path: "/dev/kvm", Type: "c", Major: kvmMajor, Minor: kvmMinor, FileMode: 0o666}}
		l.Resources.Devices = append(l.Resources.Devices, deviceRule{Allow: true, Type: "c", Major: &major, Minor: &minor, Access: "rwm"})
	}
	if sc.SeccompProfile == nil || sc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault {
		eperm := uint(1)
		l.Seccomp = &seccomp{
			DefaultAction: "SCMP_ACT_ALLOW", Architectures: []string{"SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"},
			Syscalls: []seccompSyscall{{Names: refusedSyscalls, Action: "SCMP_ACT_ERRNO", ErrnoRet: &eperm}},
		}
	}
	return l
}
