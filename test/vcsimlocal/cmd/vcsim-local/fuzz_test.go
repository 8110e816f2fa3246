package main

import (
	"strconv"
	"testing"

	"platform.example/vm-migration/test/vcsimlocal"
)

// FuzzParseDiskSize: --disk-size accepts only a whole number of MiB or GiB
// of at least 2 MiB and at most 2^50 bytes, and the size it gives is the
// number times its unit; anything else is an error, never a panic or a
// wrapped size.
func FuzzParseDiskSize(f *testing.F) {
	for _, s := range []string{"", "512MiB", "4GiB", "1MiB", "2MiB", "0GiB", "-1GiB", "4 GiB", "4G", "1048576GiB", "9223372036854775807MiB", "MiB", "4GiBGiB", "08GiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		size, err := parseDiskSize(v)
		if err != nil {
			if size != 0 {
				t.Fatalf("%q: refused with a size %d", v, size)
			}
			return
		}
		if v == "" {
			if size != 0 {
				t.Fatalf("empty: size %d, want 0", size)
			}
			return
		}
		if size < 2*vcsimlocal.MiB || size > 1<<50 || size%vcsimlocal.MiB != 0 {
			t.Fatalf("%q: accepted as %d bytes", v, size)
		}
		for unit, bytes := range map[string]int64{"MiB": vcsimlocal.MiB, "GiB": 1 << 30} {
			if len(v) > 3 && v[len(v)-3:] == unit {
				n, err := strconv.ParseInt(v[:len(v)-3], 10, 64)
				if err != nil || n*bytes != size {
					t.Fatalf("%q: accepted as %d bytes, not %s times %d", v, size, v[:len(v)-3], bytes)
				}
			}
		}
	})
}
