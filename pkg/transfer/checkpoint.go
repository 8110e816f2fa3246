package transfer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"platform.example/vm-migration/pkg/blocktree"
)

// checkpointVersion is bumped when the checkpoint format changes; an older
// checkpoint is then ignored (the copy starts over). Version 2 added the
// pieces written past Offset, and is only written after the image is
// synced; version 3 the record of a complete image; version 4 the map of
// the parts read; version 5 the block tree in place of the SHA-256 state.
const checkpointVersion = 5

// checkpoint is the resume state of one disk, kept next to its image. It
// names only bytes that were synced to the image, and leaves that were
// synced to the partial tree file, before it was written.
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
	// Tree is the block tree's state at Offset: the leaves made (that many
	// are in the partial tree file, when there is one), the hash of the
	// block under way, the root's state and the last leaves, which a
	// resume checks against the image (the last blocks hashed are read
	// back, at most about three MiB). A 32 MiB list of leaves per TiB is
	// never rewritten: the leaves go to the partial tree file as they are
	// made, synced before a checkpoint names them.
	Tree *blocktree.BuilderState `json:"tree,omitempty"`
	// Written lists the pieces past Offset already in the image, in order
	// (fetched by other streams, or not hashed yet): they are not fetched
	// again, the hasher reads them back.
	Written []byteRange `json:"written,omitempty"`
	// Complete says the image is whole, synced, and its tree's root is
	// Root: the checkpoint is then the disk's completion record, kept
	// until every disk of the run is complete, so that a run that stops
	// for another disk (a failure, a kill, the node) does not copy this
	// one again.
	Complete bool `json:"complete,omitempty"`
	// Root of the image's block tree, hex, once Complete.
	Root string `json:"root,omitempty"`
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

// resumeFrom checks a checkpoint against the source, the layout, the
// image and the partial tree file (tree, when the copy writes one) and,
// when it holds, returns the copy's state at its offset (with the written
// pieces past it, unless the piece size changed: the note then says they
// are fetched again) and the partial tree file, reopened. A checkpoint
// that does not hold returns a nil state and the reason: the copy starts
// over.
func resumeFrom(cp *checkpoint, plan *DiskPlan, layout pieceLayout, dst *destination, tree string, newBuilder builderFunc) (*copyState, *leafFile, string) {
	if why := checkpointUsable(cp, plan, layout.capacity); why != "" {
		return nil, nil, why
	}
	size, err := dst.size()
	if err != nil {
		return nil, nil, fmt.Sprintf("sizing the image: %v", err)
	}
	end := cp.Offset
	if n := len(cp.Written); n > 0 {
		end = cp.Written[n-1].End
	}
	if size < end {
		return nil, nil, fmt.Sprintf("the image is %d bytes, shorter than the checkpoint's %d", size, end)
	}
	b, err := newBuilder(cp.Tree)
	if err != nil {
		return nil, nil, err.Error()
	}
	// Read back the last blocks hashed and the block under way: they
	// must still hash as the checkpoint says.
	if err := cp.Tree.Verify(dst, layout.capacity); err != nil {
		return nil, nil, "the image's last checkpointed blocks do not match the checkpoint: " + err.Error()
	}
	var lf *leafFile
	if tree != "" {
		var why string
		if lf, why = openLeafFile(tree, layout.capacity, *cp.Tree); lf == nil {
			return nil, nil, why
		}
	}
	st := &copyState{hashed: cp.Offset, b: b, tree: *cp.Tree, written: map[int64]int64{}, readBefore: cp.BytesRead}
	if cp.PieceSize != layout.size && len(cp.Written) > 0 {
		return st, lf, fmt.Sprintf("the piece size changed from %d to %d: the %d pieces past byte %d are fetched again", cp.PieceSize, layout.size, len(cp.Written), cp.Offset)
	}
	for _, r := range cp.Written {
		st.written[r.Start] = r.End
	}
	return st, lf, ""
}

// builderFunc makes the copy's tree builder: anew (nil), or resumed from
// a checkpoint's state.
type builderFunc func(st *blocktree.BuilderState) (*blocktree.Builder, error)

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
	case cp.Tree == nil:
		return "the checkpoint has no tree state"
	case cp.Offset < 0 || cp.Offset > capacity || cp.Tree.Offset != cp.Offset:
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

// completionRecord is the checkpoint of a plan's complete image, whose
// tree's root is root, read with bytesRead bytes from the source.
func completionRecord(plan *DiskPlan, root string, bytesRead int64) *checkpoint {
	capacity := plan.Spec.CapacityBytes
	return &checkpoint{Version: checkpointVersion, Source: plan.Source, Map: plan.Map, Capacity: capacity, Offset: capacity,
		Complete: true, Root: root, BytesRead: bytesRead, AllocatedBytes: plan.AllocatedBytes, FullCopyReason: plan.FullCopyReason}
}

// completeImage checks a completion record against the source and the
// image: the image is the capacity's size and its tree (computed again,
// blocks in parallel, holes unread) has the record's root; the tree file
// is then written anew at tree (when the copy writes one), whatever was
// there. It returns the root, or "" and why the image cannot be kept.
func completeImage(ctx context.Context, cp *checkpoint, source string, capacity int64, dst *destination, tree string) (string, string) {
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
	root, err := imageTree(ctx, dst, capacity, tree, cp.Root)
	if errors.Is(err, errRootDiffers) {
		return "", fmt.Sprintf("the image's tree root is %s, its completion record says %s", root, cp.Root)
	}
	if err != nil {
		return "", err.Error()
	}
	return root, ""
}
