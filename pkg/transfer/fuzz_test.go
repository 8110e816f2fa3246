package transfer

import (
	"fmt"
	"math/big"
	"reflect"
	"strings"
	"testing"

	"platform.example/vm-migration/pkg/transfer/wire"
	"platform.example/vm-migration/pkg/vsphere"
)

// nastySeeds are what no datastore or server should send, and any may:
// empty, huge, not UTF-8, control and escape bytes, CJK, a bidi
// override, the C1 CSI.
var nastySeeds = []string{
	"", "\n", "\r\n", "\x00", "\xff\xfe", "\x1b[2J", "漢字", "\u202e", "\u009b", "\x9b", "#", "=", "RW", "RW ",
	strings.Repeat("a", MaxDescriptorSize+1), strings.Repeat("RW 1 VMFS \"x\"\n", 2000),
}

// formatDescriptor writes d as ESXi writes a flat disk's descriptor.
func formatDescriptor(d *Descriptor) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Disk DescriptorFile\nversion=1\nCID=%s\nparentCID=ffffffff\ncreateType=\"%s\"\n\n# Extent description\n", d.CID, d.CreateType)
	for _, e := range d.Extents {
		fmt.Fprintf(&b, "RW %d FLAT \"%s\" %d\n", e.Sectors, e.File, e.OffsetSectors)
	}
	b.WriteString("\nddb.adapterType = \"lsilogic\"\n")
	return b.String()
}

// FuzzParseDescriptor reads a VMDK descriptor as the datastore serves
// it: a descriptor it takes is a base disk of flat extents, each naming a
// file, of a positive size whose bytes (and the offset's) fit in an
// int64 and add up to Size without wrapping; written again, it reads back
// as itself; every refusal is one line.
func FuzzParseDescriptor(f *testing.F) {
	base := "# Disk DescriptorFile\nversion=1\nCID=1a2b3c4d\nparentCID=ffffffff\ncreateType=\"%s\"\n\n%s\n\nddb.adapterType = \"lsilogic\"\n"
	for _, s := range []string{
		fmtDesc(base, "vmfs", `RW 2048 VMFS "web-flat.vmdk"`),
		fmtDesc(base, "vmfs", `RW 8 VMFS "my disk-flat.vmdk"`),
		fmtDesc(base, "twoGbMaxExtentFlat", "RW 4 FLAT \"a-f001.vmdk\" 0\nRW 4 FLAT \"a-f002.vmdk\" 2"),
		fmtDesc(base, "vmfsSparse", `RW 2048 VMFSSPARSE "web-000001-delta.vmdk"`),
		fmtDesc(base, "seSparse", `RW 2048 SESPARSE "web-000001-sesparse.vmdk"`),
		fmtDesc(base, "vmfs", `RW 2048 VMFS "web-flat.vmdk"`) + "parentFileNameHint=\"web.vmdk\"\n",
		fmtDesc(base, "vmfsPassthroughRawDeviceMap", `RW 2048 VMFSRDM "web-rdm.vmdk"`),
		fmtDesc(base, "streamOptimized", `RW 2048 SPARSE "x.vmdk"`),
		fmtDesc(base, "monolithicFlat", `RDONLY 2048 FLAT "x-flat.vmdk" 0`),
		fmtDesc(base, "vmfs", `NOACCESS 2048 VMFS "x-flat.vmdk"`),
		fmtDesc(base, "vmfs", `RW many VMFS "x-flat.vmdk"`),
		fmtDesc(base, "vmfs", `RW 2048 VMFS "漢字 \u202e\x1b[2J-flat.vmdk"`),
		fmtDesc(base, "vmfs", "RW 2048 VMFS \"a\"b\"c\"\r"),
		fmtDesc(base, "vmfsEagerZeroedThick", `RW 9223372036854775807 VMFS "x-flat.vmdk"`),
		"version=1\nRW 8 VMFS \"x-flat.vmdk\"\n",
		"KDMV\x01\x00\x00\x00",
		"COWD",
	} {
		f.Add([]byte(s))
	}
	for _, s := range nastySeeds {
		f.Add([]byte(s))
	}
	maxBytes := big.NewInt(1<<63 - 1)
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := ParseDescriptor(data)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("the refusal of %q is not one line: %q", data, err)
			}
			return
		}
		if !flatCreateTypes[strings.ToLower(d.CreateType)] || len(d.Extents) == 0 || d.ParentFileNameHint != "" ||
			(d.ParentCID != "" && d.ParentCID != noParentCID) {
			t.Fatalf("%q reads as %+v", data, d)
		}
		total := new(big.Int)
		for _, e := range d.Extents {
			if e.Sectors <= 0 || e.OffsetSectors < 0 || e.File == "" || strings.ContainsAny(e.File, "\n\x00") {
				t.Fatalf("%q reads as extent %+v", data, e)
			}
			length := new(big.Int).Mul(big.NewInt(e.Sectors), big.NewInt(wire.SectorSize))
			fileEnd := new(big.Int).Add(length, new(big.Int).Mul(big.NewInt(e.OffsetSectors), big.NewInt(wire.SectorSize)))
			if fileEnd.Cmp(maxBytes) > 0 {
				t.Fatalf("%q reads as extent %+v, whose bytes do not fit an int64", data, e)
			}
			total.Add(total, length)
		}
		if total.Cmp(maxBytes) > 0 || d.Size() != total.Int64() {
			t.Fatalf("%q reads as %d bytes, its extents hold %s", data, d.Size(), total)
		}
		text := formatDescriptor(d)
		back, err := ParseDescriptor([]byte(text))
		if err != nil || !strings.EqualFold(back.CreateType, d.CreateType) || !reflect.DeepEqual(back.Extents, d.Extents) {
			t.Fatalf("%q reads as %+v, written again as %q it reads as %+v, %v", data, d, text, back, err)
		}
	})
}

// TestParseDescriptorSizesDoNotWrap keeps what FuzzParseDescriptor's
// seed found: sizes and offsets in sectors were multiplied by 512 and
// added up without a bound, so a descriptor's figures wrapped around
// int64. One extent of 2^63-1 sectors read as a disk of -512 bytes; two
// of 2^54 and 2^54+2048 sectors as a disk of 1 MiB, which passed the
// check against a 1 MiB disk's capacity with extents of negative length.
func TestParseDescriptorSizesDoNotWrap(t *testing.T) {
	base := "# Disk DescriptorFile\nversion=1\nCID=1a2b3c4d\nparentCID=ffffffff\ncreateType=\"%s\"\n\n%s\n"
	for name, extents := range map[string]string{
		"an extent of 2^63-1 sectors":         `RW 9223372036854775807 VMFS "x-flat.vmdk"`,
		"two extents adding up to 1 MiB":      "RW 18014398509481984 FLAT \"a-f001.vmdk\" 0\nRW 18014398509484032 FLAT \"a-f002.vmdk\" 0",
		"an offset of 2^54 sectors":           `RW 2048 FLAT "a-f001.vmdk" 18014398509481984`,
		"extents past 2^63 bytes, none alone": "RW 18014398509481983 FLAT \"a-f001.vmdk\" 0\nRW 1 FLAT \"a-f002.vmdk\" 0",
	} {
		d, err := ParseDescriptor([]byte(fmtDesc(base, "twoGbMaxExtentFlat", extents)))
		if err == nil {
			t.Errorf("%s: read as %d bytes: %+v", name, d.Size(), d.Extents)
		}
	}
	d, err := ParseDescriptor([]byte(fmtDesc(base, "vmfs", `RW 18014398509481983 VMFS "x-flat.vmdk"`)))
	if err != nil || d.Size() != 18014398509481983*wire.SectorSize {
		t.Errorf("the largest disk an int64 counts: %v", err)
	}
}

// FuzzParseContentRange reads a server's Content-Range as the copy does:
// a range it takes starts at 0 or later, ends at or after its start and
// inside the size, and reads back from its own form.
func FuzzParseContentRange(f *testing.F) {
	for _, s := range []string{"bytes 0-99/100", "bytes 5-9/*", "bytes 0-100/100", "bytes 9-5/100", "items 0-1/2", "bytes x-y/z",
		"bytes -1-5/10", "bytes 0-9223372036854775807/*", "bytes 0-0/9223372036854775808", "bytes 1-2", "bytes 12/34", "bytes +1-+2/+3"} {
		f.Add(s)
	}
	for _, s := range nastySeeds[:len(nastySeeds)-2] {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		first, last, size, err := parseContentRange(s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("the refusal of %q is not one line: %q", s, err)
			}
			return
		}
		if first < 0 || last < first || size < -1 || (size >= 0 && last >= size) {
			t.Fatalf("%q reads as %d-%d/%d", s, first, last, size)
		}
		total := "*"
		if size >= 0 {
			total = fmt.Sprint(size)
		}
		form := fmt.Sprintf("bytes %d-%d/%s", first, last, total)
		f2, l2, s2, err := parseContentRange(form)
		if err != nil || f2 != first || l2 != last || s2 != size {
			t.Fatalf("%q reads as %s, which reads as %d-%d/%d, %v", s, form, f2, l2, s2, err)
		}
	})
}

// TestParseContentRangeRefusesANegativeSize keeps what
// FuzzParseContentRange found (make test-fuzz, its crasher
// "bytes 0-0/-2"): a size below 0 other than "*" read as a size not
// known, so that a server's inconsistent Content-Range passed the check
// of a range read against the file's size.
func TestParseContentRangeRefusesANegativeSize(t *testing.T) {
	for _, s := range []string{"bytes 0-0/-2", "bytes 0-99/-1", "bytes 5-9/-9223372036854775808"} {
		if f, l, n, err := parseContentRange(s); err == nil {
			t.Errorf("%q reads as %d-%d/%d", s, f, l, n)
		}
	}
	if _, _, n, err := parseContentRange("bytes 0-0/*"); err != nil || n != -1 {
		t.Errorf(`"bytes 0-0/*": size %d, %v`, n, err)
	}
}

// layoutOf builds a disk plan from fuzz bytes: extents (one byte each, of
// 1 to 64 units, at most 16) covering the image, and areas in the image
// (two bytes each: the gap before, the length), in order, not touching,
// as vsphere.AllocatedAreas returns them; no areas is a full copy. A unit
// is 512 bytes shifted left by scale, so images run from 512 bytes to
// 2^62; pieces are 1 to 16 units and a few bytes.
func layoutOf(extents, areas []byte, scale, piece uint8) pieceLayout {
	unit := int64(wire.SectorSize) << (scale % 44)
	plan := &DiskPlan{}
	var start int64
	for i, b := range extents {
		if i == 16 {
			break
		}
		length := int64(b%64+1) * unit
		plan.Extents = append(plan.Extents, ExtentPlan{Start: start, Length: length})
		start += length
	}
	if len(plan.Extents) == 0 {
		plan.Extents = []ExtentPlan{{Start: 0, Length: unit}}
		start = unit
	}
	plan.Spec.CapacityBytes = start
	if len(areas) > 0 {
		plan.Areas = []vsphere.DiskArea{}
	}
	step := max(unit/4, 1)
	at := int64(0)
	for i := 0; i+1 < len(areas) && at < start; i += 2 {
		gap := int64(areas[i]%16)*step + int64(areas[i]>>4)
		if len(plan.Areas) > 0 {
			gap = max(gap, 1)
		}
		a := vsphere.DiskArea{Start: at + gap, Length: int64(areas[i+1]%32+1)*step - int64(areas[i+1]>>5)}
		if a.Start >= start {
			break
		}
		a.Length = min(a.Length, start-a.Start)
		plan.Areas = append(plan.Areas, a)
		at = a.End()
	}
	size := int64(piece%16+1)*unit + int64(piece>>4)
	return newPieceLayout(plan, size)
}

// FuzzPieceLayout lays an image out in pieces over the map of its
// allocated areas as the copy does: the pieces tile the image from byte
// 0, each inside one extent and at most a piece long; the dispatcher
// hands out exactly those that hold an area, in order; emptyPieces
// lists exactly the others (from any piece boundary); the parts of the
// areas the pieces read are the areas, every byte once.
func FuzzPieceLayout(f *testing.F) {
	f.Add([]byte{7}, []byte{}, uint8(0), uint8(3))
	f.Add([]byte{7}, []byte{0, 3, 5, 2, 200, 31}, uint8(0), uint8(3))
	f.Add([]byte{1, 63, 2}, []byte{17, 4, 0, 0, 255, 255}, uint8(11), uint8(0x27))
	f.Add([]byte{63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63}, []byte{0, 31, 1, 31}, uint8(43), uint8(15))
	f.Add([]byte{0}, []byte{0, 0}, uint8(255), uint8(255))
	f.Fuzz(func(t *testing.T, extents, areas []byte, scale, piece uint8) {
		l := layoutOf(extents, areas, scale, piece)
		var pieces, data, empty []byteRange
		for at := int64(0); at < l.capacity; {
			end := l.end(at)
			if end <= at || end > l.capacity || end-at > l.size || l.pieceStart(at) != at || l.extentAt(at) != l.extentAt(end-1) {
				t.Fatalf("layout %+v: the piece at %d ends at %d", l, at, end)
			}
			p := byteRange{Start: at, End: end}
			pieces = append(pieces, p)
			if got := l.areasIn(at, end); l.hasData(at, end) != (len(got) > 0) {
				t.Fatalf("layout %+v: piece %+v holds data: %v, areas in it: %+v", l, p, l.hasData(at, end), got)
			}
			if l.hasData(at, end) {
				data = append(data, p)
			} else {
				empty = append(empty, p)
			}
			at = end
		}
		d := &dispatcher{layout: l}
		var taken []byteRange
		for {
			start, end, ok := d.take()
			if !ok {
				break
			}
			if len(taken) > len(pieces) {
				t.Fatalf("layout %+v: the dispatcher hands out more than the %d pieces", l, len(pieces))
			}
			taken = append(taken, byteRange{Start: start, End: end})
		}
		if !reflect.DeepEqual(taken, data) {
			t.Fatalf("layout %+v: the dispatcher hands out %+v, the pieces with data are %+v", l, taken, data)
		}
		// The areas read, touching parts merged, are the areas.
		var read []byteRange
		for _, p := range data {
			for _, a := range l.areasIn(p.Start, p.End) {
				if a.Start < p.Start || a.End > p.End || a.End <= a.Start {
					t.Fatalf("layout %+v: piece %+v reads %+v", l, p, a)
				}
				if n := len(read); n > 0 && read[n-1].End == a.Start {
					read[n-1].End = a.End
					continue
				}
				read = append(read, a)
			}
		}
		if !reflect.DeepEqual(read, l.areas) && !(len(read) == 0 && len(l.areas) == 0) {
			t.Fatalf("layout %+v: the pieces read %+v", l, read)
		}
		// emptyPieces from any piece boundary: the runs of empty pieces past it.
		for _, from := range []int{0, len(pieces) / 2, len(pieces) - 1} {
			if from < 0 {
				continue
			}
			off := pieces[from].Start
			var want []byteRange
			for _, p := range empty {
				if p.Start < off {
					continue
				}
				if n := len(want); n > 0 && want[n-1].End == p.Start {
					want[n-1].End = p.End
					continue
				}
				want = append(want, p)
			}
			if got := l.emptyPieces(off); !reflect.DeepEqual(got, want) {
				t.Fatalf("layout %+v: emptyPieces(%d) = %+v, want %+v", l, off, got, want)
			}
		}
	})
}

// FuzzParseHashSpec reads the hash command's arguments as it does: an
// image NAME=PATH:BYTES it takes has a name without "=", a path and a
// positive size, and its form reads back as itself (a path may hold ":"
// and "=": BYTES is what follows the last ":"); a --tree NAME=TREEFILE
// it takes has a name without "=" and a file, and reads back alike;
// every refusal is one line.
func FuzzParseHashSpec(f *testing.F) {
	for _, s := range []string{"target/disk-0=/verify/target/disk-0/disk.img:42949672960", "x=/dev/vdb:512", "x=/a:b=c/d.img:1",
		"x=/a.img:0", "x=/a.img:-5", "x=/a.img:+5", "x=/a.img:9223372036854775808", "no-equals", "x=:5", "=p:5", "x=/a.img:", "x=/a.img:1e3",
		"x=/a.img:05", "漢字=/\u202e:1"} {
		f.Add(s, "target/disk-0=/verify/target/disk-0/disk.img.tree")
	}
	for _, s := range nastySeeds[:len(nastySeeds)-2] {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, arg, tree string) {
		s, err := parseHashSpec(arg)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\n\r") && !strings.ContainsAny(arg, "\n\r") {
				t.Fatalf("the refusal of %q is not one line: %q", arg, err)
			}
		} else {
			if s.name == "" || strings.Contains(s.name, "=") || s.path == "" || s.bytes <= 0 {
				t.Fatalf("%q reads as %+v", arg, s)
			}
			form := fmt.Sprintf("%s=%s:%d", s.name, s.path, s.bytes)
			if back, err := parseHashSpec(form); err != nil || back != s {
				t.Fatalf("%q reads as %+v, whose form %q reads as %+v, %v", arg, s, form, back, err)
			}
		}
		name, path, err := parseTreeFlag(tree)
		if err != nil {
			return
		}
		if name == "" || strings.Contains(name, "=") || path == "" {
			t.Fatalf("--tree %q reads as %q, %q", tree, name, path)
		}
		if n2, p2, err := parseTreeFlag(name + "=" + path); err != nil || n2 != name || p2 != path {
			t.Fatalf("--tree %q reads as %q, %q, which reads back as %q, %q, %v", tree, name, path, n2, p2, err)
		}
	})
}
