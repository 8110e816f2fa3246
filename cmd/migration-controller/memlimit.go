package main

import (
	"math"
	"os"
	"path"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	"k8s.io/klog/v2"
)

// memoryLimitShare is the part of the container's memory limit the Go
// runtime is asked to stay under: the controller's resident memory is
// about three times its live heap under the default GC target (a heap
// profile at 1,000 migrations: 39 MB live, 118 MiB resident), so without a
// soft limit a large install meets its hard limit (OOMKilled) long before
// its live data fills it.
const memoryLimitShare = 0.9

// The files the memory limit is read from: which cgroup the process is
// in, and where each cgroup hierarchy is mounted.
const (
	procSelfCgroup    = "/proc/self/cgroup"
	procSelfMountinfo = "/proc/self/mountinfo"
)

// softMemoryLimit is the soft memory limit to give the Go runtime:
// memoryLimitShare of the memory limit of the cgroup the process is in,
// or 0 when GOMEMLIMIT is set (the operator chose) or there is no limit
// to read (see cgroupMemoryLimit).
func softMemoryLimit(getenv func(string) string, readFile func(string) ([]byte, error)) int64 {
	if getenv("GOMEMLIMIT") != "" {
		return 0
	}
	limit := cgroupMemoryLimit(readFile)
	if limit <= 0 {
		return 0
	}
	return int64(float64(limit) * memoryLimitShare)
}

// cgroupMemoryLimit is the memory limit that applies to the process: the
// lowest limit of its own cgroup and of that cgroup's ancestors up to the
// hierarchy's mount (a parent's limit binds its children), from cgroup v2
// when the process's v2 cgroup has the memory controller, else from v1's
// memory hierarchy. It reads the process's cgroup in /proc/self/cgroup, so
// it is right in a container (whose cgroup namespace shows its own cgroup
// as the root) and outside one (a process put in a cgroup of its own,
// as bench-scale does). 0 means no limit: none set ("max", or v1's
// "unlimited", a value near MaxInt64), or nothing readable.
func cgroupMemoryLimit(readFile func(string) ([]byte, error)) int64 {
	cgroups, err := readFile(procSelfCgroup)
	if err != nil {
		return 0
	}
	mountinfo, err := readFile(procSelfMountinfo)
	if err != nil {
		return 0
	}
	mounts := cgroupMounts(string(mountinfo))
	v2, v1 := ownCgroups(string(cgroups))
	if m, ok := mounts["v2"]; ok && v2 != "" {
		if limit, found := lowestLimit(readFile, m, v2, "memory.max"); found {
			return limit
		}
	}
	if m, ok := mounts["memory"]; ok && v1 != "" {
		if limit, found := lowestLimit(readFile, m, v1, "memory.limit_in_bytes"); found {
			return limit
		}
	}
	return 0
}

// cgroupMount is where a cgroup hierarchy is mounted: the cgroup shown at
// the mount point (root) and the mount point.
type cgroupMount struct{ root, point string }

// cgroupMounts reads /proc/self/mountinfo: the cgroup v2 mount ("v2") and
// the cgroup v1 mount of the memory controller ("memory").
func cgroupMounts(mountinfo string) map[string]cgroupMount {
	out := map[string]cgroupMount{}
	for _, line := range strings.Split(mountinfo, "\n") {
		fields := strings.Fields(line)
		sep := slices.Index(fields, "-")
		if sep < 5 || len(fields) < sep+4 {
			continue
		}
		m := cgroupMount{root: unescapeMount(fields[3]), point: unescapeMount(fields[4])}
		switch fstype := fields[sep+1]; {
		case fstype == "cgroup2":
			out["v2"] = m
		case fstype == "cgroup" && slices.Contains(strings.Split(fields[sep+3], ","), "memory"):
			out["memory"] = m
		}
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ownCgroups reads /proc/self/cgroup: the process's cgroup v2 path and
// its cgroup v1 memory path ("" when absent).
func ownCgroups(content string) (v2, memory string) {
	for _, line := range strings.Split(content, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2 = parts[2]
		case slices.Contains(strings.Split(parts[1], ","), "memory"):
			memory = parts[2]
		}
	}
	return v2, memory
}

// lowestLimit reads file in the directory of cgroup under mount and in
// each parent up to the mount point, and returns the lowest limit set.
// found is false when the cgroup's own file is missing (this hierarchy
// does not hold the memory controller for it).
func lowestLimit(readFile func(string) ([]byte, error), mount cgroupMount, cgroup, file string) (limit int64, found bool) {
	rel, ok := strings.CutPrefix(path.Clean(cgroup), path.Clean(mount.root))
	if !ok {
		// The mount shows another part of the tree: only its top is ours to read.
		rel = ""
	}
	dir := path.Join(mount.point, rel)
	for {
		data, err := readFile(path.Join(dir, file))
		if err != nil && !found {
			return 0, false
		}
		found = true
		if v, set := parseLimit(data); err == nil && set && (limit == 0 || v < limit) {
			limit = v
		}
		if dir == path.Clean(mount.point) || dir == "/" {
			return limit, true
		}
		dir = path.Dir(dir)
	}
}

// parseLimit reads a memory limit file: set is false for "max", cgroup
// v1's "unlimited" (a value near MaxInt64) and anything unreadable.
func parseLimit(data []byte) (int64, bool) {
	v, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil || v <= 0 || v >= math.MaxInt64/2 {
		return 0, false
	}
	return v, true
}

// applySoftMemoryLimit sets the runtime's soft memory limit from the
// container's, when there is one and GOMEMLIMIT does not say otherwise.
func applySoftMemoryLimit() {
	if limit := softMemoryLimit(os.Getenv, os.ReadFile); limit > 0 {
		debug.SetMemoryLimit(limit)
		klog.InfoS("soft memory limit from the container's", "bytes", limit, "share", memoryLimitShare)
	}
}
