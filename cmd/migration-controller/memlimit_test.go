package main

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Mount tables of the kinds of machines the controller runs on.
const (
	// v2Container: a container with its own cgroup namespace on cgroup v2.
	v2Container = "30 25 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup rw,nsdelegate\n"
	// v1Host: a host (or a container without a cgroup namespace) with
	// cgroup v1 hierarchies and an unused v2 one (hybrid), as this
	// machine has.
	v1Host = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n" +
		"32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n" +
		"35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n" +
		"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
	// v1Docker: a container without a cgroup namespace: the memory
	// hierarchy's mount shows the container's own cgroup.
	v1Docker = "35 31 0:32 /docker/abc /sys/fs/cgroup/memory ro,nosuid - cgroup cgroup rw,memory\n"
)

func TestSoftMemoryLimit(t *testing.T) {
	cases := map[string]struct {
		env   string
		files map[string]string
		want  int64
	}{
		"v2 container with a limit": {files: map[string]string{
			procSelfMountinfo: v2Container, procSelfCgroup: "0::/\n",
			"/sys/fs/cgroup/memory.max": "536870912\n",
		}, want: 483183820},
		"v2 container without a limit": {files: map[string]string{
			procSelfMountinfo: v2Container, procSelfCgroup: "0::/\n",
			"/sys/fs/cgroup/memory.max": "max\n",
		}},
		"v1: the cgroup the process was put in, not the root's": {files: map[string]string{
			procSelfMountinfo: v1Host,
			procSelfCgroup:    "4:memory:/process_api/session/bench-scale-42\n1:cpu:/\n0::/\n",
			"/sys/fs/cgroup/memory/memory.limit_in_bytes":                                    "9223372036854771712\n",
			"/sys/fs/cgroup/memory/process_api/memory.limit_in_bytes":                        "9223372036854771712\n",
			"/sys/fs/cgroup/memory/process_api/session/memory.limit_in_bytes":                "9223372036854771712\n",
			"/sys/fs/cgroup/memory/process_api/session/bench-scale-42/memory.limit_in_bytes": "536870912\n",
		}, want: 483183820},
		"v1: a parent's lower limit binds": {files: map[string]string{
			procSelfMountinfo: v1Host, procSelfCgroup: "4:memory:/a/b\n",
			"/sys/fs/cgroup/memory/memory.limit_in_bytes":     "9223372036854771712\n",
			"/sys/fs/cgroup/memory/a/memory.limit_in_bytes":   "268435456\n",
			"/sys/fs/cgroup/memory/a/b/memory.limit_in_bytes": "536870912\n",
		}, want: 241591910},
		"v1 unlimited everywhere": {files: map[string]string{
			procSelfMountinfo: v1Host, procSelfCgroup: "4:memory:/a\n",
			"/sys/fs/cgroup/memory/memory.limit_in_bytes":   "9223372036854771712\n",
			"/sys/fs/cgroup/memory/a/memory.limit_in_bytes": "9223372036854771712\n",
		}},
		"hybrid: v2 mounted without the memory controller, v1 read": {files: map[string]string{
			procSelfMountinfo: v1Host, procSelfCgroup: "4:memory:/\n0::/\n",
			"/sys/fs/cgroup/memory/memory.limit_in_bytes": "1000\n",
		}, want: 900},
		"v1 container without a cgroup namespace": {files: map[string]string{
			procSelfMountinfo: v1Docker, procSelfCgroup: "4:memory:/docker/abc\n",
			"/sys/fs/cgroup/memory/memory.limit_in_bytes": "268435456\n",
		}, want: 241591910},
		"v2 nested cgroup": {files: map[string]string{
			procSelfMountinfo: v2Container, procSelfCgroup: "0::/kubepods/pod1/ctr\n",
			"/sys/fs/cgroup/memory.max":                   "max\n",
			"/sys/fs/cgroup/kubepods/memory.max":          "max\n",
			"/sys/fs/cgroup/kubepods/pod1/memory.max":     "2000\n",
			"/sys/fs/cgroup/kubepods/pod1/ctr/memory.max": "max\n",
		}, want: 1800},
		"no cgroup files": {},
		"GOMEMLIMIT set by hand": {env: "300MiB", files: map[string]string{
			procSelfMountinfo: v2Container, procSelfCgroup: "0::/\n", "/sys/fs/cgroup/memory.max": "536870912",
		}},
		"unreadable limit": {files: map[string]string{
			procSelfMountinfo: v2Container, procSelfCgroup: "0::/\n", "/sys/fs/cgroup/memory.max": "lots",
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == "GOMEMLIMIT" {
					return tc.env
				}
				return ""
			}
			readFile := func(path string) ([]byte, error) {
				if v, ok := tc.files[path]; ok {
					return []byte(v), nil
				}
				return nil, os.ErrNotExist
			}
			assert.Equal(t, tc.want, softMemoryLimit(getenv, readFile))
		})
	}
}

func TestUnescapeMount(t *testing.T) {
	assert.Equal(t, "/mnt/with space", unescapeMount(`/mnt/with\040space`))
	assert.Equal(t, "/plain", unescapeMount("/plain"))
}
