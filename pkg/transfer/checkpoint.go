package transfer

import (
	"bytes"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"os"
	"path/filepath"
)

// checkpointVersion is bumped when the checkpoint format changes; an older
// checkpoint is then ignored (the copy starts over). Version 2 added the
// pieces written past Offset, and is only written after the image is
// synced; version 3 the record of a complete image; version 4 the map of
// the parts read.
const checkpointVersion = 4

// checkpoint is the resume state of one disk, kept next to its image. It
// names only bytes that were synced to the image before it was written.
type checkpoint struct {
	// Version of the format.
	Version int `json:"version"`
	// Source identifies what is copied: descriptor path, extent files, sizes
	// and validators. A different source means starting over.
	Source string `json:"source"`
	// Map identifies which parts of the image are read (DiskPlan.Map): the
	// holes of one map may be data in another, so a different map means
	// starting over.
	Map string `json:"map"`
	// Capacity of the image.
	Capacity int64 `json:"capacity"`
	// PieceSize is the length of the pieces listed in Written.
	PieceSize int64 `json:"pieceSize"`
	// Offset is how many bytes of the image are written and hashed.
	Offset int64 `json:"offset"`
	// HashState is the SHA-256 state after Offset bytes.
	HashState []byte `json:"hashState"`
	// ChunkStart is where the verified span before Offset starts (about a
	// chunk before it).
	ChunkStart int64 `json:"chunkStart"`
	// ChunkStartHashState is the SHA-256 state after ChunkStart bytes: the
	// image's bytes [ChunkStart, Offset) hashed onto it must give HashState.
	// It verifies the end of the hashed image on resume at no cost during the copy.
	ChunkStartHashState []byte `json:"chunkStartHashState"`
	// Written lists the pieces past Offset already in the image, in order
	// (fetched by other streams, or not hashed yet): they are not fetched
	// again, the hasher reads them back.
	Written []byteRange `json:"written,omitempty"`
	// Complete says the image is whole, synced, and hashes to SHA256: the
	// checkpoint is then the disk's completion record, kept until every
	// disk of the run is complete, so that a run that stops for another
	// disk (a failure, a kill, the node) does not copy this one again.
	Complete bool `json:"complete,omitempty"`
	// SHA256 of the whole image, hex, once Complete.
	SHA256 string `json:"sha256,omitempty"`
	// BytesRead counts the bytes read from the source for the image, over
	// the runs up to this checkpoint.
	BytesRead int64 `json:"bytesRead,omitempty"`
	// AllocatedBytes and FullCopyReason are the plan's, once Complete: a
	// run that keeps the image reports how it was copied.
	AllocatedBytes *int64 `json:"allocatedBytes,omitempty"`
	FullCopyReason string `json:"fullCopyReason,omitempty"`
}

// checkpointPath is the default checkpoint of a file image:
// ".disk.img.checkpoint" beside "disk.img".
func checkpointPath(image string) string {
	return filepath.Join(filepath.Dir(image), "."+filepath.Base(image)+".checkpoint")
}

// saveCheckpoint writes the checkpoint atomically and synced (its
// temporary is removeCheckpoint's path+".tmp").
func saveCheckpoint(path string, cp *checkpoint) error {
	data, err := json.Marshal(cp)
	if err != nil {
		return fmt.Errorf("encoding checkpoint: %w", err)
	}
	if err := writeFileSynced(path, data, 0o600); err != nil {
		return fmt.Errorf("writing checkpoint: %w", err)
	}
	return nil
}

// loadCheckpoint reads a checkpoint; a missing one is (nil, nil).
func loadCheckpoint(path string) (*checkpoint, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading checkpoint: %w", err)
	}
	var cp checkpoint
	if err := json.Unmarshal(data, &cp); err != nil {
		return nil, fmt.Errorf("decoding checkpoint %s: %w", path, err)
	}
	return &cp, nil
}

// removeCheckpoint deletes the checkpoint and any temporary left beside it.
func removeCheckpoint(path string) error {
	for _, p := range []string{path, path + ".tmp"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing checkpoint: %w", err)
		}
	}
	return nil
}

// hashState saves a SHA-256 state.
func hashState(h hash.Hash) ([]byte, error) {
	m, ok := h.(encoding.BinaryMarshaler)
	if !ok {
		return nil, errors.New("hash state cannot be saved")
	}
	return m.MarshalBinary()
}

// restoreHash is a SHA-256 in a saved state.
func restoreHash(state []byte) (hash.Hash, error) {
	h := sha256.New()
	u, ok := h.(encoding.BinaryUnmarshaler)
	if !ok {
		return nil, errors.New("hash state cannot be restored")
	}
	if err := u.UnmarshalBinary(state); err != nil {
		return nil, fmt.Errorf("restoring the hash state: %w", err)
	}
	return h, nil
}

// resumeFrom checks a checkpoint against the source, the layout and the
// image and, when it holds, returns the copy's state at its offset (with
// the written pieces past it, unless the piece size changed: the note then
// says they are fetched again). A checkpoint that does not hold returns a
// nil state and the reason: the copy starts over.
func resumeFrom(cp *checkpoint, plan *DiskPlan, layout pieceLayout, dst *destination, buf []byte) (*copyState, string) {
	if why := checkpointUsable(cp, plan, layout.capacity); why != "" {
		return nil, why
	}
	size, err := dst.size()
	if err != nil {
		return nil, fmt.Sprintf("sizing the image: %v", err)
	}
	end := cp.Offset
	if n := len(cp.Written); n > 0 {
		end = cp.Written[n-1].End
	}
	if size < end {
		return nil, fmt.Sprintf("the image is %d bytes, shorter than the checkpoint's %d", size, end)
	}
	// Re-read the end of the hashed image, hash it onto the state before
	// it, and compare with the state after it.
	h, err := restoreHash(cp.ChunkStartHashState)
	if err != nil {
		return nil, err.Error()
	}
	for off := cp.ChunkStart; off < cp.Offset; {
		n := min(int64(len(buf)), cp.Offset-off)
		if err := dst.readAt(buf[:n], off); err != nil {
			return nil, err.Error()
		}
		h.Write(buf[:n])
		off += n
	}
	state, err := hashState(h)
	if err != nil {
		return nil, err.Error()
	}
	if !bytes.Equal(state, cp.HashState) {
		return nil, "the image's last checkpointed chunk does not match the checkpoint"
	}
	st := &copyState{hashed: cp.Offset, h: h, state: state, written: map[int64]int64{}, readBefore: cp.BytesRead}
	if cp.ChunkStart < cp.Offset {
		st.marks = []hashMark{{off: cp.ChunkStart, state: cp.ChunkStartHashState}}
	}
	if cp.PieceSize != layout.size && len(cp.Written) > 0 {
		return st, fmt.Sprintf("the piece size changed from %d to %d: the %d pieces past byte %d are fetched again", cp.PieceSize, layout.size, len(cp.Written), cp.Offset)
	}
	for _, r := range cp.Written {
		st.written[r.Start] = r.End
	}
	return st, ""
}

// sameSource says why a checkpoint is not one of this source and
// capacity in this format, or "".
func sameSource(cp *checkpoint, source string, capacity int64) string {
	switch {
	case cp.Version != checkpointVersion:
		return fmt.Sprintf("checkpoint version %d, want %d", cp.Version, checkpointVersion)
	case cp.Source != source:
		return "the source changed since the checkpoint"
	case cp.Capacity != capacity:
		return fmt.Sprintf("checkpoint capacity %d, want %d", cp.Capacity, capacity)
	}
	return ""
}

// checkpointUsable says why a checkpoint cannot be resumed, or "".
func checkpointUsable(cp *checkpoint, plan *DiskPlan, capacity int64) string {
	if why := sameSource(cp, plan.Source, capacity); why != "" {
		return why
	}
	switch {
	case cp.Complete:
		return "the checkpoint records a complete image"
	case cp.Map != plan.Map:
		return fmt.Sprintf("the checkpoint read %s, this run reads %s", cp.Map, plan.Map)
	case cp.Offset < 0 || cp.Offset > capacity || cp.ChunkStart < 0 || cp.ChunkStart > cp.Offset:
		return "checkpoint offsets are inconsistent"
	case cp.Offset == 0 && len(cp.Written) == 0:
		return "the checkpoint holds nothing"
	}
	prev := cp.Offset
	for _, r := range cp.Written {
		if r.Start < prev || r.End <= r.Start || r.End > capacity {
			return "the checkpoint's written pieces are inconsistent"
		}
		prev = r.End
	}
	return ""
}

// newCopyState is the state of a copy starting from the first byte.
func newCopyState() copyState {
	h := sha256.New()
	state, _ := hashState(h)
	return copyState{h: h, state: state, written: map[int64]int64{}}
}

// completionRecord is the checkpoint of a plan's complete image, read
// with bytesRead bytes from the source.
func completionRecord(plan *DiskPlan, sum string, bytesRead int64) *checkpoint {
	capacity := plan.Spec.CapacityBytes
	return &checkpoint{Version: checkpointVersion, Source: plan.Source, Map: plan.Map, Capacity: capacity, Offset: capacity, ChunkStart: capacity,
		Complete: true, SHA256: sum, BytesRead: bytesRead, AllocatedBytes: plan.AllocatedBytes, FullCopyReason: plan.FullCopyReason}
}

// completeImage checks a completion record against the source and the
// image: the image is the capacity's size and hashes to the record's
// SHA-256 (read back, holes hashed as zeros without reading them). It
// returns the checksum, or "" and why the image cannot be kept.
func completeImage(cp *checkpoint, source string, capacity int64, dst *destination, buf []byte) (string, string) {
	if why := sameSource(cp, source, capacity); why != "" {
		return "", why
	}
	size, err := dst.size()
	switch {
	case err != nil:
		return "", fmt.Sprintf("sizing the image: %v", err)
	case size < capacity || (!dst.block && size != capacity):
		return "", fmt.Sprintf("the image is %d bytes, the disk %d", size, capacity)
	}
	h := sha256.New()
	if err := dst.hashImage(h, capacity, buf); err != nil {
		return "", err.Error()
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != cp.SHA256 {
		return "", fmt.Sprintf("the image hashes to %s, its completion record says %s", sum, cp.SHA256)
	}
	return cp.SHA256, ""
}
