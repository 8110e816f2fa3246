package transfer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"platform.example/vm-migration/pkg/transfer/wire"
)

// hashParallel is how many images the hash command reads at once.
const hashParallel = 2

// HashImage returns the SHA-256 (hex) of the first n bytes of the image at
// path (a regular file, whose holes are hashed as zeros without being
// read, or a block device) and the image's size. An image shorter than n
// is an error.
func HashImage(ctx context.Context, path string, n int64) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", 0, err
	}
	d := &destination{path: path, f: f, block: st.Mode()&os.ModeDevice != 0 && st.Mode()&os.ModeCharDevice == 0}
	if !d.block && !st.Mode().IsRegular() {
		return "", 0, fmt.Errorf("%s is neither a regular file nor a block device", path)
	}
	size, err := d.size()
	if err != nil {
		return "", 0, fmt.Errorf("sizing %s: %w", path, err)
	}
	if size < n {
		return "", size, fmt.Errorf("%s is %d bytes, shorter than the %d to hash", path, size, n)
	}
	if !d.block {
		// Read ahead: the image is read once, start to end.
		_ = unix.Fadvise(int(f.Fd()), 0, n, unix.FADV_SEQUENTIAL)
	}
	// A cancelled run closes the image: the next read fails.
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			_ = f.Close()
		case <-done:
		}
	}()
	h := sha256.New()
	if err := d.hashImage(h, n, make([]byte, 4<<20)); err != nil {
		if ctx.Err() != nil {
			return "", size, ctx.Err()
		}
		return "", size, err
	}
	if err := ctx.Err(); err != nil {
		return "", size, err
	}
	return hex.EncodeToString(h.Sum(nil)), size, nil
}

// hashSpec is one image the hash command reads: NAME=PATH:BYTES.
type hashSpec struct {
	name, path string
	bytes      int64
}

func parseHashSpec(arg string) (hashSpec, error) {
	name, rest, ok := strings.Cut(arg, "=")
	i := strings.LastIndexByte(rest, ':')
	if !ok || name == "" || i <= 0 {
		return hashSpec{}, fmt.Errorf("%q is not NAME=PATH:BYTES", arg)
	}
	n, err := strconv.ParseInt(rest[i+1:], 10, 64)
	if err != nil || n <= 0 {
		return hashSpec{}, fmt.Errorf("%q: BYTES must be a positive number", arg)
	}
	return hashSpec{name: name, path: rest[:i], bytes: n}, nil
}

// HashMain runs "vm-transfer hash [--termination-log FILE] NAME=PATH:BYTES...":
// the SHA-256 of the first BYTES bytes of each image, two at a time, as
// one JSON document (wire.HashResult) on stdout and in the termination
// log. It exits 0 when every image was hashed, 1 when one could not be
// (the result says which and why), 2 on a wrong command line.
func HashMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vm-transfer hash", flag.ContinueOnError)
	fs.SetOutput(stderr)
	termLog := fs.String("termination-log", DefaultTerminationLog, "file the result is written to (the container's termination message)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	var specs []hashSpec
	for _, a := range fs.Args() {
		s, err := parseHashSpec(a)
		if err != nil {
			fmt.Fprintf(stderr, "vm-transfer hash: %v\n", err)
			return ExitUsage
		}
		specs = append(specs, s)
	}
	if len(specs) == 0 || len(specs) > wire.MaxHashImages {
		fmt.Fprintf(stderr, "vm-transfer hash: give 1 to %d images as NAME=PATH:BYTES\n", wire.MaxHashImages)
		return ExitUsage
	}
	res := hashAll(ctx, specs, stderr)
	code := ExitOK
	for _, img := range res.Images {
		if img.SHA256 == "" {
			code = ExitFailed
		}
	}
	_ = writeJSONLine(stdout, res)
	if err := os.WriteFile(*termLog, wire.HashTerminationMessage(res), 0o644); err != nil &&
		(*termLog != DefaultTerminationLog || !errors.Is(err, os.ErrNotExist)) {
		fmt.Fprintf(stderr, "vm-transfer hash: writing the termination log: %v\n", err)
	}
	return code
}

// hashAll hashes the images, hashParallel at a time, in order.
func hashAll(ctx context.Context, specs []hashSpec, stderr io.Writer) *wire.HashResult {
	res := &wire.HashResult{Kind: wire.KindHash, Images: make([]wire.ImageHash, len(specs))}
	slots := make(chan struct{}, hashParallel)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, s := range specs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			sum, size, err := HashImage(ctx, s.path, s.bytes)
			img := wire.ImageHash{Name: s.name, Bytes: s.bytes, Size: size, SHA256: sum}
			if err != nil {
				img.SHA256, img.Error = "", oneLine(err.Error())
			}
			mu.Lock()
			defer mu.Unlock()
			res.Images[i] = img
			fmt.Fprintf(stderr, "vm-transfer hash: %s: %s\n", s.name, orText(img.SHA256, img.Error))
		}()
	}
	wg.Wait()
	return res
}

func orText(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
