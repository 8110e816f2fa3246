package vsphere

import (
	"context"
	"errors"
	"fmt"

	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// AllChanges is the changeId that asks changed-block tracking for every
// area of a disk in use, rather than the changes since a point in time.
const AllChanges = "*"

// maxAreaPages bounds the calls one map takes: a server whose answers
// advance by a few bytes each cannot keep the caller asking forever.
const maxAreaPages = 1 << 16

// ErrInconsistentAreas says an answer of QueryChangedDiskAreas does not
// describe the span asked for, or lists areas out of order, overlapping or
// outside the disk: the map cannot be trusted.
var ErrInconsistentAreas = errors.New("inconsistent allocated-area map")

// DiskArea is a byte range of a virtual disk, [Start, Start+Length).
type DiskArea struct {
	// Start is the area's first byte.
	Start int64 `json:"start"`
	// Length of the area in bytes.
	Length int64 `json:"length"`
}

// End is the byte after the area.
func (a DiskArea) End() int64 { return a.Start + a.Length }

// AllocatedAreas asks vSphere which areas of a powered-off VM's disk are
// in use: QueryChangedDiskAreas with changeId "*" and no snapshot (which
// vSphere answers only for a powered-off VM, from its current state),
// called from offset 0 and again from where each answer's span ends until
// the whole capacity is mapped. Every answer must start where it was
// asked to, advance, and list its areas in order, inside its span and the
// disk; touching areas are merged. A fault (change tracking off, an
// unknown device, a powered-on VM) is returned as vSphere sent it, an
// answer that breaks these rules as ErrInconsistentAreas.
func AllocatedAreas(ctx context.Context, rt soap.RoundTripper, vm types.ManagedObjectReference, deviceKey int32, capacity int64) ([]DiskArea, error) {
	var areas []DiskArea
	for off, pages := int64(0), 0; off < capacity; pages++ {
		if pages == maxAreaPages {
			return nil, fmt.Errorf("%w: disk %d: %d answers mapped only %d of %d bytes", ErrInconsistentAreas, deviceKey, pages, off, capacity)
		}
		res, err := methods.QueryChangedDiskAreas(ctx, rt, &types.QueryChangedDiskAreas{
			This: vm, DeviceKey: deviceKey, StartOffset: off, ChangeId: AllChanges,
		})
		if err != nil {
			return nil, fmt.Errorf("querying the allocated areas of disk %d of %s from byte %d: %w", deviceKey, vm.Value, off, err)
		}
		page := res.Returnval
		if areas, err = appendPage(areas, page, off, capacity); err != nil {
			return nil, fmt.Errorf("%w: disk %d of %s: %v", ErrInconsistentAreas, deviceKey, vm.Value, err)
		}
		off = min(page.StartOffset+page.Length, capacity)
	}
	return areas, nil
}

// appendPage checks one answer, asked for from off, and appends its areas
// to those before, merging touching ones.
func appendPage(areas []DiskArea, page types.DiskChangeInfo, off, capacity int64) ([]DiskArea, error) {
	end := page.StartOffset + page.Length
	switch {
	case page.StartOffset != off:
		return nil, fmt.Errorf("asked from byte %d, the answer starts at %d", off, page.StartOffset)
	case page.Length <= 0:
		return nil, fmt.Errorf("the answer from byte %d has length %d", off, page.Length)
	}
	prev := off
	for _, a := range page.ChangedArea {
		switch {
		case a.Length <= 0:
			return nil, fmt.Errorf("an area at byte %d has length %d", a.Start, a.Length)
		case a.Start < prev:
			return nil, fmt.Errorf("the area at byte %d starts before byte %d (out of order, overlapping or before the answer's span)", a.Start, prev)
		case a.Start+a.Length > min(end, capacity):
			return nil, fmt.Errorf("the area [%d, %d) ends past the answer's span or the disk (%d, %d)", a.Start, a.Start+a.Length, end, capacity)
		}
		prev = a.Start + a.Length
		if n := len(areas); n > 0 && areas[n-1].End() == a.Start {
			areas[n-1].Length += a.Length
			continue
		}
		areas = append(areas, DiskArea{Start: a.Start, Length: a.Length})
	}
	return areas, nil
}

// AreasBytes is the total length of areas.
func AreasBytes(areas []DiskArea) int64 {
	var n int64
	for _, a := range areas {
		n += a.Length
	}
	return n
}
