package wire

import (
	"encoding/json"
	"fmt"
)

// KindHash marks a HashResult document.
const KindHash = "hash"

// MaxHashImages is the most images one run of the hash command reports:
// each takes up to about 300 bytes of JSON (with a stored tree's root and
// a first difference), and the result must fit the 4096-byte
// termination message whole. (24 before the block trees, when an image
// gave its SHA-256 alone.)
const MaxHashImages = 12

// HashResult is the outcome of one run of vm-transfer hash, written to
// stdout and to the termination message.
type HashResult struct {
	// Kind is KindHash.
	Kind string `json:"kind"`
	// Scheme names the checksum of the images' SHA256: blocktree.Scheme,
	// "sha256-tree-1MiB" (the root of the image's block tree).
	Scheme string `json:"scheme,omitempty"`
	// Images in the order they were asked for.
	Images []ImageHash `json:"images"`
}

// ByteRange is Length bytes of an image from Offset.
type ByteRange struct {
	// Offset of the first byte.
	Offset int64 `json:"offset"`
	// Length in bytes.
	Length int64 `json:"length"`
}

// ImageHash is one image's checksum.
type ImageHash struct {
	// Name is the image's name as the command line gave it.
	Name string `json:"name"`
	// Bytes is how many bytes were hashed, from the image's start.
	Bytes int64 `json:"bytes"`
	// Size is the image's size: its file's, or its block device's.
	Size int64 `json:"size,omitempty"`
	// SHA256 is the checksum of the first Bytes bytes as
	// HashResult.Scheme says: the root of their block tree, hex; empty
	// when the image could not be read.
	SHA256 string `json:"sha256,omitempty"`
	// StoredRoot is the root of the tree file given for the image (its
	// header's, checked against its leaves), when one was given and it
	// reads as a tree file.
	StoredRoot string `json:"storedRoot,omitempty"`
	// FirstDifference is the first block in which the stored tree and
	// the image differ (a block whose leaves differ, or that one of them
	// has and the other has not, or of another length); nil when they do
	// not differ or no tree was given.
	FirstDifference *ByteRange `json:"firstDifference,omitempty"`
	// TreeError says why the tree file given for the image could not be
	// read or does not hold a tree (then StoredRoot and FirstDifference
	// are empty).
	TreeError string `json:"treeError,omitempty"`
	// Error says why the image could not be read.
	Error string `json:"error,omitempty"`
}

// ParseHashResult decodes a termination message of the hash command.
func ParseHashResult(data []byte) (*HashResult, error) {
	var r HashResult
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("decoding hash result: %w", err)
	}
	if r.Kind != KindHash {
		return nil, fmt.Errorf("decoding hash result: kind %q, want %q", r.Kind, KindHash)
	}
	return &r, nil
}

// HashTerminationMessage is the result as the termination message: the
// errors (the image's and the tree file's) cut until it fits
// MaxTerminationMessage; names, sizes, checksums, stored roots and first
// differences are never cut.
func HashTerminationMessage(r *HashResult) []byte {
	data, _ := json.Marshal(r)
	for _, n := range []int{200, 64, 0} {
		if len(data) <= MaxTerminationMessage {
			break
		}
		short := *r
		short.Images = make([]ImageHash, len(r.Images))
		for i, img := range r.Images {
			img.Error, img.TreeError = cut(img.Error, n), cut(img.TreeError, n)
			short.Images[i] = img
		}
		data, _ = json.Marshal(&short)
	}
	return data
}
