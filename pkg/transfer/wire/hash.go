package wire

import (
	"encoding/json"
	"fmt"
)

// KindHash marks a HashResult document.
const KindHash = "hash"

// MaxHashImages is the most images one run of the hash command reports:
// each takes up to about 130 bytes of JSON, and the result must fit the
// 4096-byte termination message whole.
const MaxHashImages = 24

// HashResult is the outcome of one run of vm-transfer hash, written to
// stdout and to the termination message.
type HashResult struct {
	// Kind is KindHash.
	Kind string `json:"kind"`
	// Images in the order they were asked for.
	Images []ImageHash `json:"images"`
}

// ImageHash is one image's SHA-256.
type ImageHash struct {
	// Name is the image's name as the command line gave it.
	Name string `json:"name"`
	// Bytes is how many bytes were hashed, from the image's start.
	Bytes int64 `json:"bytes"`
	// Size is the image's size: its file's, or its block device's.
	Size int64 `json:"size,omitempty"`
	// SHA256 of the first Bytes bytes, hex; empty when the image could
	// not be read.
	SHA256 string `json:"sha256,omitempty"`
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
// errors cut until it fits MaxTerminationMessage; names, sizes and
// checksums are never cut.
func HashTerminationMessage(r *HashResult) []byte {
	data, _ := json.Marshal(r)
	for _, n := range []int{200, 64, 0} {
		if len(data) <= MaxTerminationMessage {
			break
		}
		short := *r
		short.Images = make([]ImageHash, len(r.Images))
		for i, img := range r.Images {
			img.Error = cut(img.Error, n)
			short.Images[i] = img
		}
		data, _ = json.Marshal(&short)
	}
	return data
}
