package vsphere

import (
	"context"
	"errors"
	"fmt"
	"math"

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
// called from offset 0 and again from where each answer's span ends (cut
// at the disk's end) until the whole capacity is mapped. Every answer
// must start where it was asked to, advance, and list its areas in order,
// not overlapping, each starting inside its span and ending within it and
// the disk; touching areas are merged. The sums are taken only once they
// are known to fit, so no answer, however large its figures, can wrap an
// area around or send the query back to map again what it mapped: the
// areas returned lie inside [0, capacity) in order and add up to at most
// the capacity (checkAreas). A fault (change tracking off, an unknown
// device, a powered-on VM) is returned as vSphere sent it, an answer that
// breaks these rules as ErrInconsistentAreas.
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
		off = spanEnd(page, off, capacity)
	}
	if err := checkAreas(areas, capacity); err != nil {
		return nil, fmt.Errorf("%w: disk %d of %s: %v", ErrInconsistentAreas, deviceKey, vm.Value, err)
	}
	return areas, nil
}

// spanEnd is where an answer asked for from off, inside the disk, stops
// mapping: its span cut at the disk's end. Its length is positive
// (appendPage checked), and capacity-off cannot overflow, nor their sum.
func spanEnd(page types.DiskChangeInfo, off, capacity int64) int64 {
	return off + min(page.Length, capacity-off)
}

// appendPage checks one answer, asked for from off (0 <= off < capacity),
// and appends its areas to those before, merging touching ones. No sum
// is taken before it is known not to overflow: every area must start at
// or after the end of the one before (and off), before the end of the
// span (cut at the disk's end), and its length fit in what remains.
func appendPage(areas []DiskArea, page types.DiskChangeInfo, off, capacity int64) ([]DiskArea, error) {
	switch {
	case off < 0 || off >= capacity:
		return nil, fmt.Errorf("asked from byte %d, outside the disk (%d bytes)", off, capacity)
	case page.StartOffset != off:
		return nil, fmt.Errorf("asked from byte %d, the answer starts at %d", off, page.StartOffset)
	case page.Length <= 0:
		return nil, fmt.Errorf("the answer from byte %d has length %d", off, page.Length)
	}
	end := spanEnd(page, off, capacity)
	prev := off
	for _, a := range page.ChangedArea {
		switch {
		case a.Length <= 0:
			return nil, fmt.Errorf("an area at byte %d has length %d", a.Start, a.Length)
		case a.Start < prev:
			return nil, fmt.Errorf("the area at byte %d starts before byte %d (out of order, overlapping or before the answer's span)", a.Start, prev)
		case a.Start >= end:
			return nil, fmt.Errorf("the area at byte %d (length %d) starts at or past byte %d, the end of the answer's span or the disk", a.Start, a.Length, end)
		case a.Length > end-a.Start:
			return nil, fmt.Errorf("the area at byte %d of length %d ends past the answer's span or the disk (byte %d)", a.Start, a.Length, end)
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

// checkAreas says why areas cannot be the map of a disk of capacity
// bytes, or nil: each must have a positive length, start inside the disk
// and end within it, after the end of the one before (in order, not
// overlapping), so that together they add up to at most the capacity.
// No sum is taken before it is known to fit.
func checkAreas(areas []DiskArea, capacity int64) error {
	var prev, total int64
	for _, a := range areas {
		switch {
		case a.Length <= 0:
			return fmt.Errorf("the area at byte %d has length %d", a.Start, a.Length)
		case a.Start < prev:
			return fmt.Errorf("the area at byte %d starts before byte %d (out of order, overlapping or before the disk)", a.Start, prev)
		case a.Start >= capacity:
			return fmt.Errorf("the area at byte %d starts at or past the disk's end (byte %d)", a.Start, capacity)
		case a.Length > capacity-a.Start:
			return fmt.Errorf("the area at byte %d of length %d ends past the disk's end (byte %d)", a.Start, a.Length, capacity)
		}
		prev, total = a.Start+a.Length, total+a.Length
	}
	if total > capacity {
		return fmt.Errorf("the areas add up to %d bytes, more than the disk's %d", total, capacity)
	}
	return nil
}

// AreasBytes is the total length of areas. For areas checkAreas accepts
// it is at most the capacity; for any others it stops at the largest
// int64 rather than wrap around.
func AreasBytes(areas []DiskArea) int64 {
	var n int64
	for _, a := range areas {
		if a.Length > math.MaxInt64-n {
			return math.MaxInt64
		}
		n += max(a.Length, 0)
	}
	return n
}
