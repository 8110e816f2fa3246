package transfer

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"platform.example/vm-migration/pkg/transfer/wire"
)

// MaxDescriptorSize bounds the text descriptor read: real ones are well under 4 KiB.
const MaxDescriptorSize = 64 << 10

// maxSectors is the most sectors whose bytes an int64 counts: an extent,
// its offset in its file and the disk are each at most that long, so no
// size or offset taken from a descriptor wraps around.
const maxSectors = math.MaxInt64 / wire.SectorSize

// noParentCID is the parentCID of a disk that is not a snapshot delta.
const noParentCID = "ffffffff"

// ErrSnapshotDelta says the disk's current backing is a snapshot delta:
// its data is spread over a chain of files, not in one flat extent.
var ErrSnapshotDelta = errors.New("disk is a snapshot delta: consolidate or remove the VM's snapshots first")

// ErrUnsupportedDisk says the disk's layout cannot be copied as flat extents.
var ErrUnsupportedDisk = errors.New("unsupported disk layout")

// Descriptor is what the copy needs from a VMDK text descriptor.
type Descriptor struct {
	// CreateType is the descriptor's createType, for example "vmfs".
	CreateType string
	// CID is the content ID.
	CID string
	// ParentCID is the parent's content ID, ffffffff for a base disk.
	ParentCID string
	// ParentFileNameHint names the parent of a delta disk.
	ParentFileNameHint string
	// Extents in image order.
	Extents []Extent
}

// Extent is one flat data extent of a disk.
type Extent struct {
	// File is the extent's file name, relative to the descriptor.
	File string
	// Sectors is the extent's size in 512-byte sectors.
	Sectors int64
	// OffsetSectors is where the extent's data starts in its file (FLAT only).
	OffsetSectors int64
}

// flatCreateTypes are the layouts whose extents hold the raw disk bytes.
var flatCreateTypes = map[string]bool{
	"vmfs":                 true,
	"vmfsthin":             true,
	"vmfspreallocated":     true,
	"vmfseagerzeroedthick": true,
	"monolithicflat":       true,
	"twogbmaxextentflat":   true,
}

// deltaCreateTypes are the layouts of snapshot deltas.
var deltaCreateTypes = map[string]bool{
	"vmfssparse":           true,
	"sesparse":             true,
	"monolithicsparse":     true,
	"twogbmaxextentsparse": true,
}

// ParseDescriptor reads a VMDK text descriptor and checks that it describes
// a base disk made of flat extents. A snapshot delta is refused with
// ErrSnapshotDelta, any other layout (sparse, RDM, stream-optimized) with
// ErrUnsupportedDisk.
func ParseDescriptor(data []byte) (*Descriptor, error) {
	if len(data) > MaxDescriptorSize {
		return nil, fmt.Errorf("%w: descriptor is %d bytes, more than a text descriptor can be", ErrUnsupportedDisk, len(data))
	}
	if bytes.HasPrefix(data, []byte("KDMV")) || bytes.HasPrefix(data, []byte("COWD")) {
		return nil, fmt.Errorf("%w: the .vmdk is a binary sparse disk, not a text descriptor", ErrUnsupportedDisk)
	}
	if bytes.IndexByte(data, 0) >= 0 {
		return nil, fmt.Errorf("%w: the .vmdk is binary, not a text descriptor", ErrUnsupportedDisk)
	}
	d := &Descriptor{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	lineNo := 0
	for sc.Scan() {
		lineNo++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if ext, ok, err := parseExtentLine(line); ok {
			if err != nil {
				return nil, fmt.Errorf("descriptor line %d: %w", lineNo, err)
			}
			d.Extents = append(d.Extents, ext)
			continue
		}
		key, val, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		key = strings.ToLower(strings.TrimSpace(key))
		val = strings.Trim(strings.TrimSpace(val), `"`)
		switch key {
		case "createtype":
			d.CreateType = val
		case "cid":
			d.CID = strings.ToLower(val)
		case "parentcid":
			d.ParentCID = strings.ToLower(val)
		case "parentfilenamehint":
			d.ParentFileNameHint = val
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading descriptor: %w", err)
	}
	if err := d.check(); err != nil {
		return nil, err
	}
	return d, nil
}

// check refuses what cannot be copied as a chain of flat extents.
func (d *Descriptor) check() error {
	ct := strings.ToLower(d.CreateType)
	switch {
	case ct == "":
		return fmt.Errorf("%w: descriptor has no createType", ErrUnsupportedDisk)
	case deltaCreateTypes[ct]:
		return fmt.Errorf("%w (createType %q)", ErrSnapshotDelta, d.CreateType)
	case d.ParentFileNameHint != "":
		return fmt.Errorf("%w (parentFileNameHint %q)", ErrSnapshotDelta, d.ParentFileNameHint)
	case d.ParentCID != "" && d.ParentCID != noParentCID:
		return fmt.Errorf("%w (parentCID %s)", ErrSnapshotDelta, d.ParentCID)
	case !flatCreateTypes[ct]:
		return fmt.Errorf("%w: createType %q", ErrUnsupportedDisk, d.CreateType)
	case len(d.Extents) == 0:
		return fmt.Errorf("%w: descriptor names no extent", ErrUnsupportedDisk)
	}
	var sectors int64
	for _, e := range d.Extents {
		if e.Sectors > maxSectors-sectors {
			return fmt.Errorf("%w: the descriptor's extents hold more than %d sectors", ErrUnsupportedDisk, int64(maxSectors))
		}
		sectors += e.Sectors
	}
	return nil
}

// Size is the disk's size in bytes, the sum of its extents.
func (d *Descriptor) Size() int64 {
	var n int64
	for _, e := range d.Extents {
		n += e.Sectors * wire.SectorSize
	}
	return n
}

// parseExtentLine parses `RW 20971520 VMFS "vm-flat.vmdk"` (and FLAT extents
// with an offset). ok says the line is an extent line at all.
func parseExtentLine(line string) (ext Extent, ok bool, err error) {
	access, rest, found := strings.Cut(line, " ")
	switch access {
	case "RW", "RDONLY", "NOACCESS":
	default:
		return Extent{}, false, nil
	}
	if !found {
		return Extent{}, true, fmt.Errorf("extent line %q is incomplete", line)
	}
	if access == "NOACCESS" {
		return Extent{}, true, fmt.Errorf("%w: extent line %q has no access", ErrUnsupportedDisk, line)
	}
	fields := strings.Fields(rest)
	if len(fields) < 2 {
		return Extent{}, true, fmt.Errorf("extent line %q is incomplete", line)
	}
	sectors, perr := strconv.ParseInt(fields[0], 10, 64)
	if perr != nil || sectors <= 0 || sectors > maxSectors {
		return Extent{}, true, fmt.Errorf("extent line %q has no valid size", line)
	}
	kind := strings.ToUpper(fields[1])
	q1 := strings.IndexByte(rest, '"')
	q2 := strings.LastIndexByte(rest, '"')
	if q1 < 0 || q2 <= q1 {
		return Extent{}, true, fmt.Errorf("extent line %q names no file", line)
	}
	ext = Extent{File: rest[q1+1 : q2], Sectors: sectors}
	switch kind {
	case "VMFS":
	case "FLAT":
		if tail := strings.Fields(rest[q2+1:]); len(tail) > 0 {
			off, perr := strconv.ParseInt(tail[0], 10, 64)
			if perr != nil || off < 0 || off > maxSectors-sectors {
				return Extent{}, true, fmt.Errorf("extent line %q has no valid offset", line)
			}
			ext.OffsetSectors = off
		}
	case "VMFSSPARSE", "SESPARSE", "SPARSE":
		return Extent{}, true, fmt.Errorf("%w (extent type %s)", ErrSnapshotDelta, kind)
	case "VMFSRDM", "VMFSRAW":
		return Extent{}, true, fmt.Errorf("%w: raw device mapping (extent type %s)", ErrUnsupportedDisk, kind)
	default:
		return Extent{}, true, fmt.Errorf("%w: extent type %s", ErrUnsupportedDisk, kind)
	}
	if ext.File == "" {
		return Extent{}, true, fmt.Errorf("extent line %q names no file", line)
	}
	return ext, true, nil
}
