package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ContainerPIDs returns the processes of a container of the node, as the
// machine numbers them (its PID namespace is the node's own, a child of the
// machine's): those whose cgroup path names the container's id. id is a
// container status's containerID, with or without its "containerd://"
// prefix. Tests kill a container's process with them, as a crash or the
// out-of-memory killer would.
func ContainerPIDs(id string) ([]int, error) {
	id = strings.TrimPrefix(id, "containerd://")
	if len(id) < 12 {
		return nil, fmt.Errorf("container id %q is too short", id)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cgroups, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if err != nil {
			continue // gone since the listing
		}
		if strings.Contains(string(cgroups), id) {
			pids = append(pids, pid)
		}
	}
	if len(pids) == 0 {
		return nil, fmt.Errorf("no process of container %s", id[:12])
	}
	return pids, nil
}
