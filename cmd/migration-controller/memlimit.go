package main

import (
	"math"
	"os"
	"runtime/debug"
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

// cgroupMemoryLimits are where a container's memory limit is read from:
// cgroup v2, then v1.
var cgroupMemoryLimits = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// softMemoryLimit is the soft memory limit to give the Go runtime:
// memoryLimitShare of the container's limit, or 0 when GOMEMLIMIT is set
// (the operator chose) or there is no limit to read ("max", a missing
// file, or cgroup v1's "unlimited", a value near MaxInt64).
func softMemoryLimit(getenv func(string) string, readFile func(string) ([]byte, error)) int64 {
	if getenv("GOMEMLIMIT") != "" {
		return 0
	}
	for _, path := range cgroupMemoryLimits {
		data, err := readFile(path)
		if err != nil {
			continue
		}
		limit, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		if err != nil || limit <= 0 || limit >= math.MaxInt64/2 {
			return 0
		}
		return int64(float64(limit) * memoryLimitShare)
	}
	return 0
}

// applySoftMemoryLimit sets the runtime's soft memory limit from the
// container's, when there is one and GOMEMLIMIT does not say otherwise.
func applySoftMemoryLimit() {
	if limit := softMemoryLimit(os.Getenv, os.ReadFile); limit > 0 {
		debug.SetMemoryLimit(limit)
		klog.InfoS("soft memory limit from the container's", "bytes", limit, "share", memoryLimitShare)
	}
}
