package main

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSoftMemoryLimit(t *testing.T) {
	cases := map[string]struct {
		env   string
		files map[string]string
		want  int64
	}{
		"cgroup v2 limit":         {files: map[string]string{"/sys/fs/cgroup/memory.max": "536870912\n"}, want: 483183820},
		"cgroup v2 without limit": {files: map[string]string{"/sys/fs/cgroup/memory.max": "max\n"}},
		"cgroup v1 limit":         {files: map[string]string{"/sys/fs/cgroup/memory/memory.limit_in_bytes": "268435456\n"}, want: 241591910},
		"cgroup v1 unlimited":     {files: map[string]string{"/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"}},
		"no cgroup files":         {},
		"GOMEMLIMIT set by hand":  {env: "300MiB", files: map[string]string{"/sys/fs/cgroup/memory.max": "536870912"}},
		"unreadable limit":        {files: map[string]string{"/sys/fs/cgroup/memory.max": "lots"}},
		"v2 read before v1":       {files: map[string]string{"/sys/fs/cgroup/memory.max": "1000", "/sys/fs/cgroup/memory/memory.limit_in_bytes": "2000"}, want: 900},
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
