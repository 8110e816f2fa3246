package standins

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"platform.example/vm-migration/test/framework"
)

// DefaultLibguestfsCacheDir keeps libguestfs' appliance between real
// conversions (Config.LibguestfsCacheDir). It is outside any home
// directory so that the conversion's non-root user can reach it.
const DefaultLibguestfsCacheDir = "/var/tmp/vm-migration-libguestfs"

// conversionTools are the commands a real conversion needs on the
// machine: virt-v2v-in-place, the nbdkit it runs for -i libvirtxml (the
// virt-v2v package does not pull it in), the qemu of libguestfs'
// appliance, and setpriv to drop to the pod's user.
var conversionTools = []string{"virt-v2v-in-place", "nbdkit", "qemu-system-x86_64", "setpriv"}

// MissingConversionTools lists the commands of conversionTools that are
// not installed; when any is, conversion pods are simulated.
func MissingConversionTools() []string {
	var missing []string
	for _, t := range conversionTools {
		if _, err := exec.LookPath(t); err != nil {
			missing = append(missing, t)
		}
	}
	return missing
}

// conversionSlot lets one real conversion run at a time in this process;
// a lock file does the same across processes. libguestfs' helper VM takes
// 2 vCPUs and 2.5 GiB under TCG: two at once only slow each other down.
var conversionSlot sync.Mutex

// runConversion runs a conversion pod: for real when its image is
// Config.RealConversionImage and the tools are installed, simulated
// otherwise (and the log says which).
func (k *Kubelet) runConversion(ctx context.Context, pod *corev1.Pod, mounts map[string]string) (int32, string) {
	logger := klog.FromContext(ctx).WithValues("pod", klog.KObj(pod))
	image := pod.Spec.Containers[0].Image
	if !k.realConversionImage(pod) {
		logger.Info("SIMULATED conversion: the image is not the real conversion image", "image", image)
		return simulateConversion(ctx, k.cfg.ConversionDuration)
	}
	if missing := MissingConversionTools(); len(missing) > 0 {
		logger.Info("SIMULATED conversion: the tools of a real conversion are not installed (hack/install-conversion-deps.sh installs them)",
			"missing", strings.Join(missing, ","))
		return simulateConversion(ctx, k.cfg.ConversionDuration)
	}
	return k.runRealConversion(ctx, pod, mounts)
}

// runRealConversion runs the pod's own script (its ConfigMap's convert.sh
// and domain XML, paths rewritten to the pod's volume directories) with the
// real virt-v2v-in-place, as the pod's user, one conversion at a time.
func (k *Kubelet) runRealConversion(ctx context.Context, pod *corev1.Pod, mounts map[string]string) (int32, string) {
	logger := klog.FromContext(ctx).WithValues("pod", klog.KObj(pod))
	id, err := podIdentity(pod)
	if err != nil {
		return 128, "simulated kubelet: " + err.Error()
	}
	cacheDir := k.cfg.LibguestfsCacheDir
	if cacheDir == "" {
		cacheDir = DefaultLibguestfsCacheDir
	}
	if err := prepareConversion(pod, mounts, id, cacheDir); err != nil {
		return 128, "simulated kubelet: preparing the real conversion: " + err.Error()
	}
	unlock, err := takeConversionSlot(ctx, cacheDir)
	if err != nil {
		return 137, "simulated kubelet: waiting for the conversion slot: " + err.Error()
	}
	defer unlock()
	logger.Info("REAL conversion: running the pod's script with virt-v2v-in-place", "uid", id.uid, "gid", id.gid)
	start := time.Now()
	code, msg := k.execConversion(ctx, pod, mounts, id, cacheDir)
	logger.Info("REAL conversion ended", "exitCode", code, "seconds", int(time.Since(start).Seconds()))
	return code, msg
}

// identity is the user a pod's container runs as.
type identity struct {
	uid, gid, fsGroup int64
	kvm               bool
}

// podIdentity reads runAsUser, runAsGroup and fsGroup (container over pod)
// and whether the pod asks for /dev/kvm. A conversion pod without a
// non-root user is refused: ours always has one.
func podIdentity(pod *corev1.Pod) (identity, error) {
	c := pod.Spec.Containers[0]
	var uid, gid, fsGroup *int64
	if psc := pod.Spec.SecurityContext; psc != nil {
		uid, gid, fsGroup = psc.RunAsUser, psc.RunAsGroup, psc.FSGroup
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			uid = sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			gid = sc.RunAsGroup
		}
	}
	if uid == nil || *uid == 0 {
		return identity{}, errors.New("the conversion pod sets no non-root runAsUser: the stand-in runs conversions only as a non-root user")
	}
	id := identity{uid: *uid, gid: *uid}
	if gid != nil {
		id.gid = *gid
	}
	id.fsGroup = -1
	if fsGroup != nil {
		id.fsGroup = *fsGroup
	}
	_, id.kvm = c.Resources.Limits["devices.kubevirt.io/kvm"]
	return id, nil
}

// prepareConversion makes the pod's files what the container would see:
// its ConfigMaps' files (the script, the domain XML) with their paths on
// the pod's directories, volumes group-owned by the fsGroup and
// group-writable (as a kubelet applies fsGroup), a writable
// termination-message file, and the libguestfs cache owned by the pod's
// user. Every directory the user must reach has to be reachable: the
// stand-in's root among them.
func prepareConversion(pod *corev1.Pod, mounts map[string]string, id identity, cacheDir string) error {
	configMaps := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		configMaps[v.Name] = v.ConfigMap != nil
	}
	c := pod.Spec.Containers[0]
	for _, m := range c.VolumeMounts {
		dir := mounts[filepath.Clean(m.MountPath)]
		if configMaps[m.Name] {
			if err := rewriteVolume(dir, mounts); err != nil {
				return err
			}
		}
		if m.ReadOnly || dir == "" {
			continue
		}
		if err := applyFSGroup(dir, id); err != nil {
			return err
		}
		if err := reachable(dir, id); err != nil {
			return err
		}
	}
	term := mounts[filepath.Clean(orDefault(c.TerminationMessagePath, corev1.TerminationMessagePathDefault))]
	if err := os.Chmod(term, 0o666); err != nil {
		return err
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return err
	}
	return os.Chown(cacheDir, int(id.uid), int(id.gid))
}

// pathToken matches an absolute path in a script or an XML document: after
// the start of a line, a blank, a quote, "=" or ">".
var pathToken = regexp.MustCompile(`(^|[\s"'=>])(/[^\s"'<>;|&()]+)`)

// rewriteVolume rewrites, in the pod's own copy of a ConfigMap volume,
// the container paths that lie on a volume to the volume's directory.
func rewriteVolume(dir string, mounts map[string]string) error {
	return filepath.Walk(dir, func(path string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out := translateText(mounts, string(data))
		if out == string(data) {
			return nil
		}
		if err := os.Chmod(path, 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			return err
		}
		return os.Chmod(path, fi.Mode().Perm())
	})
}

// translateText rewrites the absolute paths of text that lie under a mount.
func translateText(mounts map[string]string, text string) string {
	return pathToken.ReplaceAllStringFunc(text, func(m string) string {
		sub := pathToken.FindStringSubmatch(m)
		if t, ok := translate(mounts, sub[2]); ok {
			return sub[1] + t
		}
		return m
	})
}

// applyFSGroup does what a kubelet does for a pod's fsGroup on a volume:
// every file group-owned by it and group-writable, directories setgid.
func applyFSGroup(dir string, id identity) error {
	if id.fsGroup < 0 {
		return nil
	}
	return filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(p, -1, int(id.fsGroup)); err != nil {
			return err
		}
		mode := fi.Mode().Perm() | 0o060
		if fi.IsDir() {
			return os.Chmod(p, mode|0o010|os.ModeSetgid)
		}
		if fi.Mode().IsRegular() {
			return os.Chmod(p, mode)
		}
		return nil
	})
}

// reachable fails when a directory above dir cannot be searched by the
// pod's user (or its groups).
func reachable(dir string, id identity) error {
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		perm := fi.Mode().Perm()
		ok := perm&0o001 != 0 ||
			(int64(st.Uid) == id.uid && perm&0o100 != 0) ||
			((int64(st.Gid) == id.gid || int64(st.Gid) == id.fsGroup) && perm&0o010 != 0)
		if !ok {
			return fmt.Errorf("uid %d cannot reach %s: %s is %s (owner %d:%d); make the stand-in's root searchable by others",
				id.uid, dir, p, perm, st.Uid, st.Gid)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// takeConversionSlot waits for this process's slot, then for the
// machine's (a lock file in cacheDir), and returns the release.
func takeConversionSlot(ctx context.Context, cacheDir string) (func(), error) {
	got := make(chan struct{})
	go func() {
		conversionSlot.Lock()
		close(got)
	}()
	select {
	case <-got:
	case <-ctx.Done():
		go func() { <-got; conversionSlot.Unlock() }()
		return nil, ctx.Err()
	}
	f, err := os.OpenFile(filepath.Join(cacheDir, ".conversion.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		conversionSlot.Unlock()
		return nil, err
	}
	for {
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
			return func() { _ = f.Close(); conversionSlot.Unlock() }, nil
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			conversionSlot.Unlock()
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// execConversion runs the pod's command as the pod's user through
// setpriv (no new privileges, no capabilities, only the fsGroup as
// supplementary group), with the pod's environment (paths rewritten) and
// what a process needs in place of the container's mounts: TMPDIR on the
// pod's /tmp, libguestfs' cache, TCG unless the pod asked for /dev/kvm.
func (k *Kubelet) execConversion(ctx context.Context, pod *corev1.Pod, mounts map[string]string, id identity, cacheDir string) (int32, string) {
	c := pod.Spec.Containers[0]
	dir := k.podDir(pod)
	groups := "--clear-groups"
	if id.fsGroup >= 0 {
		groups = "--groups=" + strconv.FormatInt(id.fsGroup, 10)
	}
	args := append([]string{
		"--reuid=" + strconv.FormatInt(id.uid, 10), "--regid=" + strconv.FormatInt(id.gid, 10), groups,
		"--no-new-privs", "--inh-caps=-all", "--bounding-set=-all", "--",
	}, translateArgs(mounts, append(append([]string{}, c.Command...), c.Args...))...)
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LIBGUESTFS_CACHEDIR=" + cacheDir}
	if tmp, ok := mounts["/tmp"]; ok {
		short, err := shortPath(pod, tmp)
		if err != nil {
			return 128, "simulated kubelet: " + err.Error()
		}
		defer os.Remove(short)
		env = append(env, "TMPDIR="+short)
	}
	if !id.kvm {
		// The pod has no /dev/kvm; this machine's may be reachable by the
		// pod's group (gid 107 is "kvm" on Debian).
		env = append(env, "LIBGUESTFS_BACKEND_SETTINGS=force_tcg")
	}
	for _, e := range c.Env {
		env = append(env, e.Name+"="+translateText(mounts, e.Value))
	}
	logPath := PodLogPath(k.cfg, pod.Namespace, pod.Name, c.Name)
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return 128, "simulated kubelet: " + err.Error()
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return 128, "simulated kubelet: " + err.Error()
	}
	defer logFile.Close()
	cmd := exec.Command("setpriv", args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return 128, "simulated kubelet: starting the conversion: " + err.Error()
	}
	code := waitStoppable(ctx, cmd, conversionStopGrace, nil)
	termFile := mounts[filepath.Clean(orDefault(c.TerminationMessagePath, corev1.TerminationMessagePathDefault))]
	msg := readCapped(termFile, maxTerminationMessage)
	if msg == "" && code != 0 && c.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError {
		msg = framework.TailBytes(logPath, 2048)
	}
	return code, msg
}

// shortPath is a short symbolic link to the pod's /tmp directory: virt-v2v
// and libguestfs put their Unix sockets under TMPDIR, and a socket's path
// may not exceed 107 bytes, which the pod's directory under a test's
// temporary directory does (the container's /tmp is short).
func shortPath(pod *corev1.Pod, dir string) (string, error) {
	uid := string(pod.UID)
	if len(uid) > 8 {
		uid = uid[:8]
	}
	link := filepath.Join(os.TempDir(), "vmm-tmp-"+uid)
	if err := os.Remove(link); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	if err := os.Symlink(dir, link); err != nil {
		return "", fmt.Errorf("linking the pod's /tmp: %w", err)
	}
	return link, nil
}

// PodLogPath is where the kubelet stand-in keeps the output of a real
// conversion pod's container, as a kubelet keeps /var/log/pods: it stays
// after the pod is gone.
func PodLogPath(cfg Config, namespace, pod, container string) string {
	return filepath.Join(cfg.Root, "logs", namespace+"_"+pod+"_"+container+".log")
}

// conversionStopGrace is how long a conversion has after SIGTERM.
var conversionStopGrace = 10 * time.Second

// waitStoppable waits for cmd and closes exited (when not nil) once it
// has. When ctx ends first (the pod deleted, the stand-in stopping) it
// sends SIGTERM to the process group, and SIGKILL to the group and every
// descendant grace later: virt-v2v does not stop on SIGTERM in a long step,
// and no helper of a pod's process may outlive it. It returns the exit
// code as a kubelet reports it (128+signal when killed).
func waitStoppable(ctx context.Context, cmd *exec.Cmd, grace time.Duration, exited chan struct{}) int32 {
	if exited == nil {
		exited = make(chan struct{})
	}
	go func() {
		select {
		case <-ctx.Done():
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(grace):
				killTree(cmd.Process.Pid)
			}
		case <-exited:
		}
	}()
	err := cmd.Wait()
	close(exited)
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return 1
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int32(ws.Signal())
	}
	return int32(ee.ExitCode())
}

// killTree sends SIGKILL to a process group and to every descendant of its
// leader that left the group.
func killTree(pid int) {
	descendants := descendantsOf(pid)
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	for _, d := range descendants {
		_ = syscall.Kill(d, syscall.SIGKILL)
	}
}

// descendantsOf lists the processes below pid, from /proc.
func descendantsOf(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The parent follows the command name, which is in parentheses.
		rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
		fields := strings.Fields(rest)
		if len(fields) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(fields[1]); err == nil {
			children[ppid] = append(children[ppid], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}
