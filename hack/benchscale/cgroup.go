package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"platform.example/vm-migration/test/framework"
)

// The controller runs as its Deployment would bound it: in a memory
// cgroup of its own whose limit is the Deployment's memory limit, from
// its first instruction, so that the soft memory limit it derives from
// its cgroup (cmd/migration-controller/memlimit.go) applies. The cgroup is
// made below the benchmark's own (a child of the cgroup the benchmark
// runs in, so whatever bounds the benchmark bounds it too) and removed at
// the end.

// deploymentManifest is the Deployment whose memory limit is the default.
const deploymentManifest = "manifests/base/deployment.yaml"

// memoryLimit is the --memory-limit flag's value in bytes: "deployment"
// (the Deployment's), "0" (none: no cgroup) or a quantity (512Mi).
func memoryLimit(value string) (int64, error) {
	switch value {
	case "0", "":
		return 0, nil
	case "deployment":
		return deploymentMemoryLimit(framework.RepoPath(deploymentManifest))
	}
	q, err := resource.ParseQuantity(value)
	if err != nil {
		return 0, fmt.Errorf("--memory-limit %q: want deployment, 0 or a quantity such as 512Mi: %w", value, err)
	}
	return q.Value(), nil
}

// deploymentMemoryLimit reads the memory limit of the Deployment's
// controller container.
func deploymentMemoryLimit(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("reading the Deployment: %w", err)
	}
	var d appsv1.Deployment
	if err := yaml.Unmarshal(data, &d); err != nil {
		return 0, fmt.Errorf("parsing %s: %w", path, err)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if q, ok := c.Resources.Limits["memory"]; ok {
			return q.Value(), nil
		}
	}
	return 0, fmt.Errorf("%s sets no memory limit", path)
}

// memoryCgroup is the controller's memory cgroup.
type memoryCgroup struct {
	dir   string
	v2    bool
	limit int64
}

// newMemoryCgroup makes a memory cgroup below the benchmark's own with
// that limit.
func newMemoryCgroup(limit int64) (*memoryCgroup, error) {
	parent, v2, err := ownMemoryCgroupDir()
	if err != nil {
		return nil, err
	}
	c := &memoryCgroup{dir: filepath.Join(parent, fmt.Sprintf("vm-migration-bench-scale-%d", os.Getpid())), v2: v2, limit: limit}
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		return nil, fmt.Errorf("making the controller's memory cgroup (MEMLIMIT=0 runs without one): %w", err)
	}
	file := "memory.limit_in_bytes"
	if v2 {
		file = "memory.max"
	}
	if err := os.WriteFile(filepath.Join(c.dir, file), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		_ = c.remove()
		return nil, fmt.Errorf("setting the memory limit of %s: %w", c.dir, err)
	}
	return c, nil
}

// ownMemoryCgroupDir is the directory of the benchmark's own memory
// cgroup: in the cgroup v1 memory hierarchy, else in cgroup v2 when its
// cgroup there has the memory controller.
func ownMemoryCgroupDir() (string, bool, error) {
	cgroups, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", false, fmt.Errorf("reading /proc/self/cgroup: %w", err)
	}
	mountinfo, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", false, fmt.Errorf("reading /proc/self/mountinfo: %w", err)
	}
	var v1Path, v2Path string
	for _, line := range strings.Split(string(cgroups), "\n") {
		parts := strings.SplitN(line, ":", 3)
		switch {
		case len(parts) != 3:
		case parts[0] == "0" && parts[1] == "":
			v2Path = parts[2]
		case slices.Contains(strings.Split(parts[1], ","), "memory"):
			v1Path = parts[2]
		}
	}
	for _, line := range strings.Split(string(mountinfo), "\n") {
		fields := strings.Fields(line)
		sep := slices.Index(fields, "-")
		if sep < 5 || len(fields) < sep+4 {
			continue
		}
		root, point, fstype := fields[3], fields[4], fields[sep+1]
		if fstype == "cgroup" && v1Path != "" && slices.Contains(strings.Split(fields[sep+3], ","), "memory") {
			return filepath.Join(point, strings.TrimPrefix(v1Path, root)), false, nil
		}
		if fstype == "cgroup2" && v2Path != "" {
			dir := filepath.Join(point, strings.TrimPrefix(v2Path, root))
			if controllers, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control")); err == nil && slices.Contains(strings.Fields(string(controllers)), "memory") {
				return dir, true, nil
			}
		}
	}
	return "", false, errors.New("no cgroup v1 memory hierarchy, and no cgroup v2 subtree with the memory controller delegated to the benchmark: run with MEMLIMIT=0")
}

// command runs binary with args inside the cgroup from its first
// instruction: a shell moves itself into the cgroup, then executes it.
func (c *memoryCgroup) command(binary string, args ...string) *exec.Cmd {
	script := `echo $$ > "$0" && exec "$@"`
	return exec.Command("/bin/sh", append([]string{"-c", script, filepath.Join(c.dir, "cgroup.procs"), binary}, args...)...)
}

// cgroupStats are what the kernel says of the cgroup's memory.
type cgroupStats struct {
	maxUsage, failures, oomKills int64
}

// stats reads the cgroup's peak usage, how often it met its limit, and
// how many processes were killed in it for memory (cgroup v1's files; v2's
// memory.peak and memory.events).
func (c *memoryCgroup) stats() cgroupStats {
	var s cgroupStats
	if c.v2 {
		s.maxUsage = readInt(filepath.Join(c.dir, "memory.peak"))
		s.failures = readKey(filepath.Join(c.dir, "memory.events"), "max")
		s.oomKills = readKey(filepath.Join(c.dir, "memory.events"), "oom_kill")
		return s
	}
	s.maxUsage = readInt(filepath.Join(c.dir, "memory.max_usage_in_bytes"))
	s.failures = readInt(filepath.Join(c.dir, "memory.failcnt"))
	s.oomKills = readKey(filepath.Join(c.dir, "memory.oom_control"), "oom_kill")
	return s
}

// remove removes the cgroup once the controller left it (it takes a moment
// after the process ended).
func (c *memoryCgroup) remove() error {
	var err error
	for range 50 {
		if err = os.Remove(c.dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("removing the controller's cgroup %s: %w", c.dir, err)
}

// readInt reads a file holding one integer; -1 when it cannot.
func readInt(path string) int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return -1
	}
	return v
}

// readKey reads the integer after key in a "key value" file; -1 when it
// cannot.
func readKey(path, key string) int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
}
