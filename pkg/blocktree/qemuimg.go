package blocktree

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
)

// qemuMapEntry is one entry of `qemu-img map --output=json`: the numbers
// as JSON wrote them, checked one by one; the other fields (present,
// zero, data, compressed, offset) do not matter here but present.
type qemuMapEntry struct {
	Start  json.RawMessage `json:"start"`
	Length json.RawMessage `json:"length"`
	Depth  json.RawMessage `json:"depth"`
	// Present is false where no layer holds the bytes (past the end of
	// a shorter backing file, or a qcow2 without one): nothing is there
	// to commit. qemu-img before 6.0 does not write it.
	Present *bool `json:"present"`
}

// ParseQemuImgMap reads the output of `qemu-img map --output=json` of a
// qcow2 overlay and returns the byte ranges the overlay itself holds (the
// entries of depth 0 not marked "present": false: the clusters the
// conversion wrote, data or zeros, which qemu-img commit writes into the
// image), within the first size bytes, sorted and merged. Every entry
// must have a start, a length and a depth that are whole numbers, none
// negative, whose end does not overflow, in order and not overlapping
// (an entry of length 0, as qemu-img writes for an empty image, holds
// nothing); a kept entry must start within size (its end is cut there:
// the tree covers size bytes). Anything else is refused with an error
// that names the entry.
func ParseQemuImgMap(data []byte, size int64) ([]Range, error) {
	if size < 0 {
		return nil, fmt.Errorf("qemu-img map: size %d is negative", size)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil, errors.New("qemu-img map: not a JSON array (qemu-img map --output=json)")
	}
	var out []Range
	prevEnd := int64(0)
	for i := 0; dec.More(); i++ {
		var e qemuMapEntry
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("qemu-img map: entry %d: %v", i, oneLine(err))
		}
		start, err := mapNumber(i, "start", e.Start)
		if err != nil {
			return nil, err
		}
		length, err := mapNumber(i, "length", e.Length)
		if err != nil {
			return nil, err
		}
		depth, err := mapNumber(i, "depth", e.Depth)
		if err != nil {
			return nil, err
		}
		switch {
		case start > math.MaxInt64-length:
			return nil, fmt.Errorf("qemu-img map: entry %d: start %d and length %d end past 2^63", i, start, length)
		case start < prevEnd:
			return nil, fmt.Errorf("qemu-img map: entry %d: starts at %d, before the end of the one before (%d)", i, start, prevEnd)
		}
		prevEnd = start + length
		if depth != 0 || length == 0 || (e.Present != nil && !*e.Present) {
			continue
		}
		if start >= size {
			return nil, fmt.Errorf("qemu-img map: entry %d: the overlay holds [%d, %d), past the disk's %d bytes", i, start, start+length, size)
		}
		r := Range{Offset: start, Length: min(length, size-start)}
		if n := len(out); n > 0 && out[n-1].End() == r.Offset {
			out[n-1].Length += r.Length
			continue
		}
		out = append(out, r)
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("qemu-img map: %v", oneLine(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("qemu-img map: something follows the array")
	}
	return out, nil
}

// mapNumber checks one number of entry i: present, a JSON number (not a
// string) that is a whole number in decimal, at least 0, within int64.
func mapNumber(i int, name string, raw json.RawMessage) (int64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, fmt.Errorf("qemu-img map: entry %d has no %s", i, name)
	}
	v, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("qemu-img map: entry %d: %s %s is not a whole number from 0 to 2^63-1", i, name, cutField(string(raw)))
	}
	return v, nil
}

// oneLine keeps an error's message on one line.
func oneLine(err error) string {
	return string(bytes.Join(bytes.Fields([]byte(err.Error())), []byte(" ")))
}
