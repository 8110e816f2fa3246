package wire

import (
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"
)

// Kinds of the JSON documents the command writes, one per line on stdout.
const (
	// KindProgress marks a Progress document.
	KindProgress = "progress"
	// KindResult marks a Result document.
	KindResult = "result"
)

// Disk states in progress documents.
const (
	// StateWaiting: the disk waits for a free transfer slot.
	StateWaiting = "Waiting"
	// StateCopying: the disk's bytes are being copied.
	StateCopying = "Copying"
	// StateDone: the disk is copied and verified.
	StateDone = "Done"
	// StateFailed: the disk's copy failed.
	StateFailed = "Failed"
)

// Progress is a snapshot of the transfer while it runs.
type Progress struct {
	// Kind is KindProgress.
	Kind string `json:"kind"`
	// Time the snapshot was taken.
	Time time.Time `json:"time"`
	// Disks in job spec order.
	Disks []DiskProgress `json:"disks"`
}

// DiskProgress is one disk's progress.
type DiskProgress struct {
	// Key is the disk's device key.
	Key int32 `json:"key"`
	// State is one of the State constants.
	State string `json:"state"`
	// BytesDone is how much of the image is written and hashed.
	BytesDone int64 `json:"bytesDone"`
	// TotalBytes is the image's size.
	TotalBytes int64 `json:"totalBytes"`
	// RateBytesPerSecond is the rate since the previous snapshot.
	RateBytesPerSecond int64 `json:"rateBytesPerSecond"`
	// ETASeconds is the estimated time left at that rate, when it is known.
	ETASeconds *int64 `json:"etaSeconds,omitempty"`
	// ResumedFrom is the offset this run resumed from (0 for a fresh copy).
	ResumedFrom int64 `json:"resumedFrom,omitempty"`
}

// Result is the outcome of a run, written once at the end: to stdout and
// to the termination message, where the controller reads it from the Pod's
// status. Kept compact: a termination message holds at most 4096 bytes.
type Result struct {
	// Kind is KindResult.
	Kind string `json:"kind"`
	// Succeeded says every disk was copied and verified.
	Succeeded bool `json:"succeeded"`
	// Error is the first failure, for a person, when not Succeeded.
	Error string `json:"error,omitempty"`
	// Reason classifies the failure as a CamelCase constant.
	Reason string `json:"reason,omitempty"`
	// Scheme names the checksum in the disks' SHA256: blocktree.Scheme,
	// "sha256-tree-1MiB" (the root of the image's block tree).
	Scheme string `json:"scheme,omitempty"`
	// Disks in job spec order; a disk not finished has no SHA256.
	Disks []DiskResult `json:"disks"`
}

// DiskResult is one disk's outcome.
type DiskResult struct {
	// Key is the disk's device key.
	Key int32 `json:"key"`
	// Bytes is the image's size (or, unfinished, what was done).
	Bytes int64 `json:"bytes"`
	// SHA256 is the image's checksum, as Result.Scheme says: the root of
	// the block tree of the whole image, zeros included (blocktree), hex;
	// empty unless done. (The field kept its name from the spec version
	// v1, when it was the SHA-256 of the whole image.)
	SHA256 string `json:"sha256,omitempty"`
	// DurationSeconds this run spent on the disk.
	DurationSeconds float64 `json:"durationSeconds,omitempty"`
	// ResumedFrom is the offset this run resumed from.
	ResumedFrom int64 `json:"resumedFrom,omitempty"`
	// Kept says an earlier run completed the image, and this one found it
	// still matching its recorded checksum and copied nothing.
	Kept bool `json:"kept,omitempty"`
	// AllocatedOnly says only the areas vSphere reported in use were read
	// from the source; the rest of the image is holes (zeros).
	AllocatedOnly bool `json:"allocatedOnly,omitempty"`
	// AllocatedBytes is how much of the disk vSphere reported in use (the
	// sum of its allocated areas), when it mapped them.
	AllocatedBytes *int64 `json:"allocatedBytes,omitempty"`
	// BytesRead is how many bytes were read from the source for the
	// disk's image, over the runs that made it (a run killed mid-copy
	// loses the count of what it read after its last checkpoint).
	BytesRead int64 `json:"bytesRead,omitempty"`
	// FullCopyReason says why the whole disk was read rather than its
	// allocated areas alone.
	FullCopyReason string `json:"fullCopyReason,omitempty"`
	// Error says why the disk failed.
	Error string `json:"error,omitempty"`
}

// ParseResult decodes a termination message written by the command.
func ParseResult(data []byte) (*Result, error) {
	var r Result
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("decoding transfer result: %w", err)
	}
	if r.Kind != KindResult {
		return nil, fmt.Errorf("decoding transfer result: kind %q, want %q", r.Kind, KindResult)
	}
	return &r, nil
}

// Keys of the progress ConfigMap's data.
const (
	// ConfigMapKeyProgress holds the latest Progress document.
	ConfigMapKeyProgress = "progress"
	// ConfigMapKeyResult holds the Result once the run ends.
	ConfigMapKeyResult = "result"
)

// Failure reasons, as CamelCase constants for the controller's status.
const (
	// ReasonInvalidSpec: the job spec is malformed.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonInvalidSource: the VM or a disk is not what the spec says.
	ReasonInvalidSource = "InvalidSource"
	// ReasonSnapshotDelta: a disk's backing is a snapshot delta.
	ReasonSnapshotDelta = "SnapshotDelta"
	// ReasonUnsupportedDisk: a disk's layout cannot be copied.
	ReasonUnsupportedDisk = "UnsupportedDisk"
	// ReasonDestinationUnusable: a destination cannot take its disk.
	ReasonDestinationUnusable = "DestinationUnusable"
	// ReasonNotAuthorized: the credentials were refused.
	ReasonNotAuthorized = "NotAuthorized"
	// ReasonConnectionFailed: the endpoint could not be reached or trusted.
	ReasonConnectionFailed = "ConnectionFailed"
	// ReasonBadResponse: the server sent something other than the bytes asked for.
	ReasonBadResponse = "BadResponse"
	// ReasonCancelled: the run was stopped (signal or deadline).
	ReasonCancelled = "Cancelled"
	// ReasonTransferFailed: anything else.
	ReasonTransferFailed = "TransferFailed"
)

// MaxTerminationMessage is the most the kubelet keeps of a termination message.
const MaxTerminationMessage = 4096

// TerminationMessage is the result as the termination message: compact
// JSON of at most MaxTerminationMessage bytes when it can be. What the
// controller does not need gives way first (per-disk errors, durations,
// resume offsets), then the length of the error and of the full-copy
// reasons, step by step; checksums, sizes and how each disk was read
// never do.
func TerminationMessage(res *Result) []byte {
	data, _ := json.Marshal(res)
	for _, limits := range shortenings {
		if len(data) <= MaxTerminationMessage {
			break
		}
		data, _ = json.Marshal(shortened(res, limits))
	}
	return data
}

// shortening bounds the error and the full-copy reasons of a result.
type shortening struct{ errorLen, reasonLen int }

// shortenings are tried in order until the result fits.
var shortenings = []shortening{{512, 96}, {256, 24}, {128, 0}}

// shortened is the result without what the controller does not need,
// its error and reasons cut to the limits.
func shortened(res *Result, l shortening) *Result {
	short := *res
	short.Error = cut(res.Error, l.errorLen)
	short.Disks = make([]DiskResult, len(res.Disks))
	for i, d := range res.Disks {
		d.Error, d.DurationSeconds, d.ResumedFrom, d.Kept = "", 0, 0, false
		d.FullCopyReason = cut(d.FullCopyReason, l.reasonLen)
		short.Disks[i] = d
	}
	return &short
}

// cut shortens s to at most n bytes, on a rune boundary, marking the cut;
// n 0 drops it.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n < 3 {
		return ""
	}
	end := n - 3
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + "..."
}
