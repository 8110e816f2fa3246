package podcheck

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
)

// kvmMajor and kvmMinor are /dev/kvm's device numbers.
const kvmMajor, kvmMinor = 10, 232

// Options say what to run: a pod's first container on an unpacked image.
type Options struct {
	// Dir receives the bundle: config.json and the pod's volumes.
	Dir string
	// Rootfs is the image's unpacked root file system (Unpack); it is
	// mounted read-only when the container asks for it.
	Rootfs string
	// Image is the image's runtime config (environment, user, directory).
	Image v1.Config
	// Pod is the pod spec as the controller renders it.
	Pod corev1.PodSpec
	// ConfigMaps hold the data of the ConfigMaps the pod mounts, by name.
	ConfigMaps map[string]map[string]string
	// Claims are the host directories of the claims the pod mounts, by
	// claim name.
	Claims map[string]string
	// KVM offers /dev/kvm, mode 0666, as the test node's "kvm"
	// RuntimeClass does (on the pod's RuntimeClass, whatever its name).
	KVM bool
	// CgroupParent is the cgroup (in every v1 hierarchy) the container's
	// own goes under.
	CgroupParent string
	// Args replace the container's command and arguments when not empty.
	Args []string
}

// Bundle is an OCI runtime bundle made of a pod's container.
type Bundle struct {
	// Dir holds config.json.
	Dir string
	// TerminationLog is the host file of the container's
	// terminationMessagePath.
	TerminationLog string
	// Volumes are the host directories of the pod's volumes, by name.
	Volumes map[string]string
}

// Write makes the bundle: the pod's volumes (ConfigMaps written out,
// emptyDirs made, claims bound, fsGroup applied to what is writable) and
// a config.json that runs the container as the pod spec says.
func Write(o Options) (*Bundle, error) {
	if len(o.Pod.Containers) == 0 {
		return nil, errors.New("podcheck: the pod has no container")
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("podcheck: %w", err)
	}
	b := &Bundle{Dir: o.Dir, TerminationLog: filepath.Join(o.Dir, "termination-log"), Volumes: map[string]string{}}
	fsGroup := fsGroupOf(o.Pod)
	for _, v := range o.Pod.Volumes {
		dir, err := makeVolume(o, v, fsGroup)
		if err != nil {
			return nil, fmt.Errorf("podcheck: volume %s: %w", v.Name, err)
		}
		b.Volumes[v.Name] = dir
	}
	// Writable by the container's user, as the kubelet makes it.
	if err := os.WriteFile(b.TerminationLog, nil, 0o666); err != nil {
		return nil, fmt.Errorf("podcheck: %w", err)
	}
	if err := os.Chmod(b.TerminationLog, 0o666); err != nil {
		return nil, fmt.Errorf("podcheck: %w", err)
	}
	spec, err := containerSpec(o, b)
	if err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("podcheck: encoding config.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(o.Dir, "config.json"), data, 0o644); err != nil {
		return nil, fmt.Errorf("podcheck: %w", err)
	}
	return b, nil
}

// fsGroupOf is the pod's fsGroup, or -1.
func fsGroupOf(pod corev1.PodSpec) int64 {
	if pod.SecurityContext != nil && pod.SecurityContext.FSGroup != nil {
		return *pod.SecurityContext.FSGroup
	}
	return -1
}

// makeVolume makes a volume's host directory as a kubelet would.
func makeVolume(o Options, v corev1.Volume, fsGroup int64) (string, error) {
	switch {
	case v.ConfigMap != nil:
		dir := filepath.Join(o.Dir, "volumes", v.Name)
		data, ok := o.ConfigMaps[v.ConfigMap.Name]
		if !ok {
			return "", fmt.Errorf("no data for ConfigMap %s", v.ConfigMap.Name)
		}
		return dir, writeConfigMap(dir, data, v.ConfigMap.DefaultMode)
	case v.EmptyDir != nil:
		dir := filepath.Join(o.Dir, "volumes", v.Name)
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return "", err
		}
		if err := os.Chmod(dir, 0o777); err != nil {
			return "", err
		}
		return dir, applyFSGroup(dir, fsGroup)
	case v.PersistentVolumeClaim != nil:
		dir, ok := o.Claims[v.PersistentVolumeClaim.ClaimName]
		if !ok {
			return "", fmt.Errorf("no directory for claim %s", v.PersistentVolumeClaim.ClaimName)
		}
		return dir, applyFSGroup(dir, fsGroup)
	}
	return "", errors.New("only ConfigMap, emptyDir and claim volumes are supported")
}

// writeConfigMap writes a ConfigMap's keys as files of the given mode.
func writeConfigMap(dir string, data map[string]string, mode *int32) error {
	perm := os.FileMode(0o644)
	if mode != nil {
		perm = os.FileMode(*mode)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for k, v := range data {
		p := filepath.Join(dir, k)
		if err := os.WriteFile(p, []byte(v), perm); err != nil {
			return err
		}
		if err := os.Chmod(p, perm); err != nil {
			return err
		}
	}
	return nil
}

// applyFSGroup does what a kubelet does for fsGroup on a writable volume:
// everything group-owned by it and group-writable, directories setgid.
func applyFSGroup(dir string, fsGroup int64) error {
	if fsGroup < 0 {
		return nil
	}
	return filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(p, -1, int(fsGroup)); err != nil {
			return err
		}
		mode := fi.Mode().Perm() | 0o060
		switch {
		case fi.IsDir():
			return os.Chmod(p, mode|0o010|os.ModeSetgid)
		case fi.Mode().IsRegular():
			return os.Chmod(p, mode)
		}
		return nil
	})
}

// containerSpec is the runtime spec of the pod's first container.
func containerSpec(o Options, b *Bundle) (*runtimeSpec, error) {
	c := o.Pod.Containers[0]
	sc := effectiveSecurity(o.Pod, c)
	u, err := containerUser(o, sc)
	if err != nil {
		return nil, err
	}
	args := append(append([]string{}, c.Command...), c.Args...)
	if len(o.Args) > 0 {
		args = o.Args
	}
	if len(args) == 0 {
		return nil, errors.New("podcheck: the container has no command (image entrypoints are not supported)")
	}
	cwd := c.WorkingDir
	if cwd == "" {
		cwd = o.Image.WorkingDir
	}
	if cwd == "" {
		cwd = "/"
	}
	mounts, err := containerMounts(o, b, c)
	if err != nil {
		return nil, err
	}
	return &runtimeSpec{
		OCIVersion: "1.0.2-dev",
		Process: process{
			User: u, Args: args, Env: containerEnv(o.Image.Env, c.Env), Cwd: cwd,
			Capabilities:    capabilitiesOf(sc),
			NoNewPrivileges: sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation,
		},
		Root:     root{Path: o.Rootfs, Readonly: sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem},
		Hostname: "conversion-pod",
		Mounts:   mounts,
		Linux:    containerLinux(o, c, sc),
	}, nil
}
