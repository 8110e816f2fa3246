package vcsimlocal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
)

// thinRunGranules bounds a run of data of a thin disk, in ChangeGranule
// units: 64 KiB to 1 MiB.
const thinRunGranules = 16

// ThinRuns lays out a thin disk of size bytes whose guest wrote about
// percent of it (1 to 100): runs of data of 64 KiB to 1 MiB, in 64 KiB
// steps, at places drawn from seed, in order, holes between them. The
// same arguments always give the same runs.
func ThinRuns(size int64, seed uint64, percent int) [][2]int64 {
	percent = min(max(percent, 1), 100)
	r := rand.New(rand.NewPCG(seed, seed^0x2545f4914f6cdd1d))
	// A run is (1..16) granules, 8.5 on average; a gap averages what
	// makes runs percent of the disk.
	meanGap := float64(thinRunGranules+1) / 2 * float64(100-percent) / float64(percent)
	var runs [][2]int64
	for at := int64(0); at < size; {
		gap := int64(r.Float64() * 2 * meanGap)
		start := at + gap*ChangeGranule
		if start >= size {
			break
		}
		end := min(start+int64(1+r.IntN(thinRunGranules))*ChangeGranule, size)
		runs = append(runs, [2]int64{start, end})
		at = end
	}
	return runs
}

// WriteThinExtent writes a thin disk's flat extent at file: pseudo-random
// bytes from seed in the runs ThinRuns gives, holes elsewhere, size bytes
// in all. It returns the SHA-256 of the whole disk, zeros included, and
// the bytes of data it wrote.
func WriteThinExtent(file string, size int64, seed uint64, percent int) (string, int64, error) {
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return "", 0, fmt.Errorf("creating thin extent: %w", err)
	}
	h := sha256.New()
	written, err := writeRuns(f, h, ThinRuns(size, seed, percent), size, seed)
	if err == nil {
		err = f.Truncate(size)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", 0, fmt.Errorf("writing thin extent %s: %w", file, err)
	}
	return hex.EncodeToString(h.Sum(nil)), written, nil
}

// writeRuns writes random data at the runs and hashes the whole disk.
func writeRuns(f *os.File, h hash.Hash, runs [][2]int64, size int64, seed uint64) (int64, error) {
	r := rand.New(rand.NewPCG(seed^0x9e3779b97f4a7c15, seed))
	buf := make([]byte, thinRunGranules*ChangeGranule)
	zeros := make([]byte, ChangeGranule)
	var at, written int64
	hashZeros := func(n int64) {
		for ; n > 0; n -= min(n, ChangeGranule) {
			h.Write(zeros[:min(n, ChangeGranule)])
		}
	}
	for _, run := range runs {
		hashZeros(run[0] - at)
		b := buf[:run[1]-run[0]]
		for i := 0; i < len(b); i += 8 {
			v := r.Uint64()
			for j := 0; j < 8 && i+j < len(b); j++ {
				b[i+j] = byte(v >> (8 * j))
			}
		}
		if _, err := f.WriteAt(b, run[0]); err != nil {
			return 0, err
		}
		h.Write(b)
		written += int64(len(b))
		at = run[1]
	}
	hashZeros(size - at)
	return written, nil
}

// placeThin lays out disk i of a VM as a thin disk: its text descriptor
// through the upload API, its flat extent written sparse straight into
// the datastore's directory (uploading it would fill its holes). It
// returns the root of the disk's block tree (the checksum the transfer
// reports; FileRoot).
func (s *Server) placeThin(ctx context.Context, ds *object.Datastore, vm string, i int, d DiskSpec) (string, error) {
	var props mo.Datastore
	if err := ds.Properties(ctx, ds.Reference(), []string{"summary.url"}, &props); err != nil {
		return "", fmt.Errorf("reading the datastore's directory: %w", err)
	}
	base := path.Join(vm, diskBase(vm, i))
	if err := upload(ctx, ds, base+".vmdk", []byte(FlatDescriptor(diskBase(vm, i), d.SizeBytes))); err != nil {
		return "", err
	}
	extent := filepath.Join(props.Summary.Url, filepath.FromSlash(base)+"-flat.vmdk")
	if err := os.Remove(extent); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	if _, _, err := WriteThinExtent(extent, d.SizeBytes, d.Seed, d.AllocatedPercent); err != nil {
		return "", err
	}
	return FileRoot(extent)
}
