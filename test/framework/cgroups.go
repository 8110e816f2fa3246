package framework

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupRootPrefix starts the name of every node's cgroup root, which
// goes on with the pid of the process that owns the node:
// vmm-node-<pid>-<stack id>.
const cgroupRootPrefix = "vmm-node-"

// cgroupRootName is the cgroup root of the stack id owned by this process.
func cgroupRootName(id string) string {
	return fmt.Sprintf("%s%d-%s", cgroupRootPrefix, os.Getpid(), id)
}

// removeStaleCgroupRoots removes the cgroup roots whose owner process is
// gone (a test binary killed before its cleanup). The owner is read from
// the name, so a stack whose temporary folder is elsewhere (another
// TMPDIR) is judged by its process too.
func removeStaleCgroupRoots() {
	mounts, err := cgroupMounts()
	if err != nil {
		return
	}
	for _, m := range mounts {
		roots, _ := filepath.Glob(filepath.Join(m, cgroupRootPrefix+"*"))
		for _, r := range roots {
			owner, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(r), cgroupRootPrefix), "-")
			pid, err := strconv.Atoi(owner)
			if err != nil || pid <= 0 {
				continue
			}
			if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
				_ = removeCgroupTree(r)
			}
		}
	}
}

// cgroupMounts are the mount points of the machine's cgroup hierarchies
// (v1 hierarchies and a v2 one, unified or hybrid).
func cgroupMounts() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading mountinfo: %w", err)
	}
	defer f.Close()
	var mounts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID parent major:minor root mountpoint options... - fstype source superoptions
		f := strings.Fields(sc.Text())
		sep := -1
		for i, v := range f {
			if v == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+1 >= len(f) || len(f) < 5 {
			continue
		}
		if t := f[sep+1]; t == "cgroup" || t == "cgroup2" {
			mounts = append(mounts, f[4])
		}
	}
	return mounts, sc.Err()
}

// createCgroupRoot creates the kubelet's cgroupRoot, /<name>, in every
// hierarchy. A v1 cpuset folder starts empty; it gets its parent's CPUs
// and memory nodes, or no task could join it. On v2, the controllers the
// root delegates are delegated on.
func createCgroupRoot(name string) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		dir := filepath.Join(m, name)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("creating cgroup %s: %w", dir, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if b, err := os.ReadFile(filepath.Join(m, f)); err == nil {
				if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
					return fmt.Errorf("copying %s into %s: %w", f, dir, err)
				}
			}
		}
		if b, err := os.ReadFile(filepath.Join(m, "cgroup.subtree_control")); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			var enable []string
			for _, c := range strings.Fields(string(b)) {
				enable = append(enable, "+"+c)
			}
			_ = os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(strings.Join(enable, " ")), 0o644)
		}
	}
	return nil
}

// removeCgroupRoot removes /<name> and everything under it from every
// hierarchy, deepest first. A folder whose last task is still exiting is
// busy for a moment; it is retried for a few seconds.
func removeCgroupRoot(name string) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range mounts {
		if err := removeCgroupTree(filepath.Join(m, name)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func removeCgroupTree(root string) error {
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("listing cgroup %s: %w", root, err)
	}
	// Deepest first: a path sorts after its parent, so reverse order.
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	deadline := time.Now().Add(5 * time.Second)
	for _, d := range dirs {
		for {
			err := syscall.Rmdir(d)
			if err == nil || errors.Is(err, syscall.ENOENT) {
				break
			}
			if errors.Is(err, syscall.EBUSY) && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			return fmt.Errorf("removing cgroup %s: %w", d, err)
		}
	}
	return nil
}
