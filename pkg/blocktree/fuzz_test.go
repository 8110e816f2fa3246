package blocktree

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// FuzzReadTree reads a tree file as the commands do: a file it takes is
// a well-formed tree whose root is its header's, written again it is the
// same bytes, and the streaming Reader agrees leaf by leaf; every refusal
// is one line.
func FuzzReadTree(f *testing.F) {
	for _, size := range []int64{0, 1, BlockSize, 2*BlockSize + 3} {
		_, file := treeFile(f, image(size, 8))
		f.Add(file)
		f.Add(file[:len(file)-1])
		f.Add(append(bytes.Clone(file), '\n'))
	}
	root := strings.Repeat("ab", 32)
	for _, h := range []string{
		"", "\n", "vmm-block-tree", "vmm-block-tree v1 block=1048576 size=0 root=" + root + "\n",
		"vmm-block-tree v1 block=1048576 size=9223372036854775807 root=" + root + "\n",
		"vmm-block-tree v1 block=1048576 size=-0 root=" + root + "\n",
		"vmm-block-tree v2 block=1048576 size=1 root=" + root + "\n",
		"vmm-block-tree v1 block=1048576 size=1 root=" + root + "\r\n" + strings.Repeat("\x00", 32),
		strings.Repeat("\xff", 200), "漢字 \u202e\x1b[2J\n",
	} {
		f.Add([]byte(h))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tree, err := ReadTree(bytes.NewReader(data))
		if err != nil {
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("the refusal is not one line: %q", err)
			}
			if r, rerr := NewReader(bytes.NewReader(data)); rerr == nil {
				for {
					if _, err := r.Next(); err != nil {
						if err.Error() == "EOF" {
							t.Fatalf("Reader takes what ReadTree refuses: %q", data)
						}
						break
					}
				}
			}
			return
		}
		if err := tree.Check(); err != nil {
			t.Fatalf("ReadTree took a malformed tree: %v", err)
		}
		_, root, err := ReadHeader(data)
		if err != nil || root != tree.Root() {
			t.Fatalf("root %s, the header says %s (%v)", tree.Root(), root, err)
		}
		var again bytes.Buffer
		if _, err := tree.WriteTo(&again); err != nil || !bytes.Equal(again.Bytes(), data) {
			t.Fatalf("written again the tree is %q, it was %q (%v)", again.Bytes(), data, err)
		}
	})
}

// FuzzParseQemuImgMap reads qemu-img map output as tree-update does:
// the ranges it returns are sorted, apart (merged), of a positive length,
// within the size, and are exactly the bytes of the entries of depth 0
// (not marked absent) within the size; every refusal is one line.
func FuzzParseQemuImgMap(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "qemu-img-map", "*.json"))
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, int64(8<<20))
		f.Add(data, int64(3<<20))
	}
	for _, s := range []string{
		"[]", "null", "{}", `[{"start":0,"length":5,"depth":0}]`, `[{"start":0,"length":5,"depth":0},{"start":5,"length":5,"depth":0}]`,
		`[{"start":9223372036854775000,"length":1000,"depth":0}]`, `[{"start":0,"length":5,"depth":0,"present":false}]`,
		`[{"start":1e2,"length":5,"depth":0}]`, `[{"start":"5","length":5,"depth":0}]`, "[" + strings.Repeat(`{"start":0,"length":0,"depth":0},`, 50) + "{}]",
		"\xff\xfe", "漢字",
	} {
		f.Add([]byte(s), int64(100))
	}
	f.Fuzz(func(t *testing.T, data []byte, size int64) {
		ranges, err := ParseQemuImgMap(data, size)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("the refusal is not one line: %q", err)
			}
			return
		}
		for i, r := range ranges {
			if r.Length <= 0 || r.Offset < 0 || r.Offset >= size || r.Length > size-r.Offset {
				t.Fatalf("range %d %+v of a %d-byte disk", i, r, size)
			}
			if i > 0 && r.Offset <= ranges[i-1].End() {
				t.Fatalf("ranges %+v and %+v are not sorted and apart", ranges[i-1], r)
			}
		}
		// The same bytes as the kept entries, decoded another way.
		var want []Range
		for _, e := range keptEntries(t, data) {
			if e.Offset >= size {
				t.Fatalf("an entry %+v past the size was taken", e)
			}
			e.Length = min(e.Length, size-e.Offset)
			if n := len(want); n > 0 && want[n-1].End() == e.Offset {
				want[n-1].Length += e.Length
				continue
			}
			want = append(want, e)
		}
		if !slices.Equal(ranges, want) {
			t.Fatalf("ranges %+v, the kept entries are %+v", ranges, want)
		}
	})
}

// keptEntries decodes qemu-img map output with encoding/json alone and
// returns its entries of depth 0, not absent, of a positive length.
func keptEntries(t *testing.T, data []byte) []Range {
	t.Helper()
	var entries []struct {
		Start, Length, Depth int64
		Present              *bool
	}
	if err := json.Unmarshal(data, &entries); err != nil {
		t.Fatalf("ParseQemuImgMap took %q, which encoding/json refuses: %v", data, err)
	}
	var out []Range
	for _, e := range entries {
		if e.Depth == 0 && e.Length > 0 && (e.Present == nil || *e.Present) {
			out = append(out, Range{e.Start, e.Length})
		}
	}
	return out
}
