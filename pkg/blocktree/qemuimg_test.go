package blocktree

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParseQemuImgMapRealOutput reads what qemu-img 7.2 wrote
// (testdata/qemu-img-map) for overlays made as the conversion makes them
// (qemu-img create -f qcow2 -F raw -b disk.img) and written with qemu-io.
func TestParseQemuImgMapRealOutput(t *testing.T) {
	const mib = 1 << 20
	tests := map[string]struct {
		size int64
		want []Range
	}{
		// write -P 0xab 1M 64k; write -z 3M 128k; write -P 1 7M 1M over an 8 MiB raw image.
		"overlay-over-raw.json": {size: 8 * mib, want: []Range{{mib, 65536}, {3 * mib, 131072}, {7 * mib, mib}}},
		// An 8 MiB overlay over a 4 MiB raw image: write -P 2 6M 64k; write -z 0 8k
		// (a zero cluster of 64 KiB); past the backing file, "present": false.
		"overlay-past-backing.json": {size: 8 * mib, want: []Range{{0, 65536}, {6 * mib, 65536}}},
		// An empty image: one entry of length 0.
		"empty.json": {size: 0, want: nil},
		// A qcow2 without a backing file: unallocated is depth 0, not present.
		"qcow2-no-backing.json": {size: 4 * mib, want: []Range{{mib, 65536}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "qemu-img-map", name))
			require.NoError(t, err)
			got, err := ParseQemuImgMap(data, tc.size)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestParseQemuImgMap(t *testing.T) {
	entry := func(start, length, depth string) string {
		return `{ "start": ` + start + `, "length": ` + length + `, "depth": ` + depth + `, "present": true, "zero": false, "data": true}`
	}
	arr := func(entries ...string) []byte { return []byte("[" + strings.Join(entries, ",\n") + "]\n") }
	tests := map[string]struct {
		data []byte
		size int64
		want []Range
		err  string
	}{
		"touching entries merge": {data: arr(entry("0", "4096", "0"), entry("4096", "4096", "0"), entry("8192", "100", "1"), entry("8292", "8", "0")), size: 1 << 20,
			want: []Range{{0, 8192}, {8292, 8}}},
		"cut at the size":         {data: arr(entry("0", "100", "1"), entry("100", "1000", "0")), size: 600, want: []Range{{100, 500}}},
		"deeper entries skipped":  {data: arr(entry("0", "100", "2"), entry("100", "100", "1")), size: 200, want: nil},
		"old qemu: no present":    {data: []byte(`[{"start": 0, "length": 512, "depth": 0, "zero": false, "data": true, "offset": 327680}]`), size: 512, want: []Range{{0, 512}}},
		"an empty array":          {data: []byte("[]"), size: 10, want: nil},
		"not an array":            {data: []byte(`{"start": 0}`), size: 10, err: "not a JSON array"},
		"null":                    {data: []byte("null"), size: 10, err: "not a JSON array"},
		"empty input":             {data: nil, size: 10, err: "not a JSON array"},
		"text":                    {data: []byte("qemu-img: Could not open 'x': No such file"), size: 10, err: "not a JSON array"},
		"cut short":               {data: []byte(`[{"start": 0, "length": 5, "depth": 0},`), size: 10, err: "entry 1"},
		"trailing garbage":        {data: append(arr(entry("0", "5", "0")), "[]"...), size: 10, err: "something follows"},
		"an entry not an object":  {data: []byte(`[5]`), size: 10, err: "entry 0"},
		"no start":                {data: []byte(`[{"length": 5, "depth": 0}]`), size: 10, err: "entry 0 has no start"},
		"no length":               {data: []byte(`[{"start": 0, "depth": 0}]`), size: 10, err: "entry 0 has no length"},
		"no depth":                {data: []byte(`[{"start": 0, "length": 5}]`), size: 10, err: "entry 0 has no depth"},
		"a null start":            {data: []byte(`[{"start": null, "length": 5, "depth": 0}]`), size: 10, err: "has no start"},
		"a negative start":        {data: arr(entry("-1", "5", "0")), size: 10, err: "start -1 is not a whole number"},
		"a fraction":              {data: arr(entry("0", "5.5", "0")), size: 10, err: "length 5.5 is not a whole number"},
		"an exponent":             {data: arr(entry("1e3", "5", "0")), size: 10000, err: "start 1e3"},
		"past int64":              {data: arr(entry("9223372036854775808", "5", "0")), size: 10, err: "not a whole number"},
		"an end past 2^63":        {data: arr(entry("9223372036854775000", "1000", "1")), size: 10, err: "end past 2^63"},
		"a negative depth":        {data: arr(entry("0", "5", "-1")), size: 10, err: "depth -1"},
		"overlapping entries":     {data: arr(entry("0", "100", "0"), entry("50", "100", "0")), size: 1000, err: "entry 1: starts at 50, before the end of the one before (100)"},
		"out of order":            {data: arr(entry("100", "100", "1"), entry("0", "100", "0")), size: 1000, err: "entry 1: starts at 0"},
		"kept entry past the end": {data: arr(entry("0", "100", "1"), entry("100", "100", "0")), size: 100, err: "past the disk's 100 bytes"},
		"a negative size":         {data: []byte("[]"), size: -1, err: "negative"},
		"a string number":         {data: []byte(`[{"start": "x", "length": 5, "depth": 0}]`), size: 10, err: "entry 0"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseQemuImgMap(tc.data, tc.size)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				assert.NotContains(t, err.Error(), "\n")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
