package transfer

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrDestination says the destination cannot take the disk.
var ErrDestination = errors.New("destination unusable")

// zeroBlock is the granularity of zero detection: a block of zeros in the
// source is skipped in a file (left a hole) and zeroed cheaply on a device.
const zeroBlock = 64 << 10

// directAlign is the alignment direct I/O needs of offsets, lengths and
// buffer addresses (the largest common logical block size).
const directAlign = 4096

// zeros is a block of zeros to compare with and to write from.
var zeros = alignedBuffer(zeroBlock)

// alignedBuffer allocates n bytes at a directAlign-aligned address.
func alignedBuffer(n int) []byte {
	b := make([]byte, n+directAlign)
	skip := 0
	if r := int(uintptr(unsafe.Pointer(&b[0])) % directAlign); r != 0 {
		skip = directAlign - r
	}
	return b[skip : skip+n : skip+n]
}

// destination is where one disk's image goes: a regular file (kept sparse)
// or a raw block device.
type destination struct {
	path string
	f    *os.File
	// direct is a second descriptor opened with O_DIRECT, when the file
	// system allows it: aligned writes bypass the page cache (no copy, no
	// dirty pages piling up in the pod's memory, nothing left to flush).
	direct *os.File
	block  bool
	// noZeroRange is set once the device refused FALLOC_FL_ZERO_RANGE.
	noZeroRange bool
}

// openDestination opens (creating a file if needed) the destination of a
// disk of capacity bytes, checking it can hold the disk. It creates nothing
// but the file itself: the directory must exist.
func openDestination(path string, capacity int64, directIO bool) (*destination, error) {
	d, err := openImage(path, capacity)
	if err != nil {
		return nil, err
	}
	if directIO {
		// Not O_EXCL: the first descriptor holds a block device exclusively.
		if f, err := os.OpenFile(path, os.O_WRONLY|unix.O_DIRECT, 0); err == nil {
			d.direct = f
		}
	}
	return d, nil
}

// openImage opens the image for buffered reads and writes.
func openImage(path string, capacity int64) (*destination, error) {
	st, err := os.Stat(path)
	switch {
	case err == nil && st.Mode()&os.ModeDevice != 0 && st.Mode()&os.ModeCharDevice == 0:
		return openBlock(path, capacity)
	case err == nil && !st.Mode().IsRegular():
		return nil, fmt.Errorf("%w: %s is neither a regular file nor a block device", ErrDestination, path)
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("%w: %v", ErrDestination, err)
	}
	dir := filepath.Dir(path)
	if dst, err := os.Stat(dir); err != nil || !dst.IsDir() {
		return nil, fmt.Errorf("%w: directory %s does not exist (is the volume mounted?)", ErrDestination, dir)
	}
	if err := unix.Access(dir, unix.W_OK); err != nil {
		return nil, fmt.Errorf("%w: directory %s is not writable: %v", ErrDestination, dir, err)
	}
	created := errors.Is(err, os.ErrNotExist)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDestination, err)
	}
	d := &destination{path: path, f: f}
	if err := d.checkSpace(capacity); err != nil {
		_ = f.Close()
		if created {
			_ = os.Remove(path)
		}
		return nil, err
	}
	return d, nil
}

// openBlock opens a raw block device exclusively and checks its size.
func openBlock(path string, capacity int64) (*destination, error) {
	// O_EXCL on a block device fails while it is mounted or open elsewhere exclusively.
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_EXCL, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDestination, err)
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%w: sizing block device %s: %v", ErrDestination, path, err)
	}
	if size < capacity {
		_ = f.Close()
		return nil, fmt.Errorf("%w: block device %s is %d bytes, smaller than the disk's %d bytes", ErrDestination, path, size, capacity)
	}
	return &destination{path: path, f: f, block: true}, nil
}

// checkSpace makes sure the file system can hold a fully allocated image:
// its free space plus what the file already holds.
func (d *destination) checkSpace(capacity int64) error {
	var fs unix.Statfs_t
	if err := unix.Fstatfs(int(d.f.Fd()), &fs); err != nil {
		return fmt.Errorf("%w: statfs %s: %v", ErrDestination, d.path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(d.f.Fd()), &st); err != nil {
		return fmt.Errorf("%w: stat %s: %v", ErrDestination, d.path, err)
	}
	avail := int64(fs.Bavail)*int64(fs.Bsize) + st.Blocks*512
	if avail < capacity {
		return fmt.Errorf("%w: not enough space for %s: the disk is %d bytes, %d are available", ErrDestination, d.path, capacity, avail)
	}
	return nil
}

// errNoPunchHole says the file system cannot punch holes, so a resume
// cannot keep pieces written past its offset.
var errNoPunchHole = errors.New("the file system cannot punch holes")

// reset prepares the image for a copy starting at offset, keeping the
// ranges in keep (written past offset, in order): a file is sized to
// capacity and every other byte past offset becomes a hole again
// (dropping anything a previous attempt wrote without checkpointing it).
// A block device keeps its content: every byte past offset that is not
// kept is written or zeroed by the copy.
func (d *destination) reset(offset int64, keep []byteRange, capacity int64) error {
	if d.block {
		return nil
	}
	if len(keep) == 0 {
		if err := d.f.Truncate(offset); err != nil {
			return fmt.Errorf("truncating %s: %w", d.path, err)
		}
	}
	if err := d.f.Truncate(capacity); err != nil {
		return fmt.Errorf("sizing %s: %w", d.path, err)
	}
	if len(keep) == 0 {
		return nil
	}
	from := offset
	for _, r := range append(keep, byteRange{Start: capacity, End: capacity}) {
		if r.Start > from {
			err := unix.Fallocate(int(d.f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, from, r.Start-from)
			if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
				return fmt.Errorf("%w (%s): %v", errNoPunchHole, d.path, err)
			}
			if err != nil {
				return fmt.Errorf("clearing %s from byte %d: %w", d.path, from, err)
			}
		}
		from = r.End
	}
	return nil
}

// sync makes what was written to the image durable (fdatasync), before
// a checkpoint names it.
func (d *destination) sync() error {
	if err := unix.Fdatasync(int(d.f.Fd())); err != nil {
		return fmt.Errorf("syncing %s: %w", d.path, err)
	}
	return nil
}

// writeChunk writes one chunk at off, skipping its zero blocks: a file
// keeps holes there, a device gets them zeroed.
func (d *destination) writeChunk(buf []byte, off int64) error {
	i := 0
	for i < len(buf) {
		j := i
		for j < len(buf) && isZero(buf[j:min(j+zeroBlock, len(buf))]) {
			j = min(j+zeroBlock, len(buf))
		}
		if j > i {
			if err := d.zero(off+int64(i), int64(j-i)); err != nil {
				return err
			}
		}
		if j == len(buf) {
			break
		}
		k := j
		for k < len(buf) && !isZero(buf[k:min(k+zeroBlock, len(buf))]) {
			k = min(k+zeroBlock, len(buf))
		}
		if err := d.write(buf[j:k], off+int64(j)); err != nil {
			return err
		}
		i = k
	}
	return nil
}

// write writes b at off, directly when b, off and len(b) are aligned.
func (d *destination) write(b []byte, off int64) error {
	f := d.f
	if d.direct != nil && off%directAlign == 0 && len(b)%directAlign == 0 &&
		uintptr(unsafe.Pointer(&b[0]))%directAlign == 0 {
		f = d.direct
	}
	if _, err := f.WriteAt(b, off); err != nil {
		return fmt.Errorf("writing %s: %w", d.path, err)
	}
	return nil
}

// zero makes [off, off+n) read as zeros: nothing to do in a file (the
// range is a hole already), a zero-range request or plain zeros on a device.
func (d *destination) zero(off, n int64) error {
	if !d.block {
		return nil
	}
	if !d.noZeroRange {
		err := unix.Fallocate(int(d.f.Fd()), unix.FALLOC_FL_ZERO_RANGE|unix.FALLOC_FL_KEEP_SIZE, off, n)
		if err == nil {
			return nil
		}
		d.noZeroRange = true
	}
	for n > 0 {
		w := min(n, int64(len(zeros)))
		if err := d.write(zeros[:w], off); err != nil {
			return err
		}
		off += w
		n -= w
	}
	return nil
}

// readAt reads back part of the image, to verify a checkpoint.
func (d *destination) readAt(buf []byte, off int64) error {
	if _, err := d.f.ReadAt(buf, off); err != nil {
		return fmt.Errorf("reading back %s: %w", d.path, err)
	}
	return nil
}

// dataAfter is the next run of data at or after off, [data, hole), both
// at most n: [off, data) is a hole. Without a way to tell, all of
// [off, n) is data.
func (d *destination) dataAfter(off, n int64) (data, hole int64) {
	if d.block {
		return off, n
	}
	fd := int(d.f.Fd())
	data, err := unix.Seek(fd, off, unix.SEEK_DATA)
	switch {
	case errors.Is(err, unix.ENXIO):
		return n, n
	case err != nil:
		return off, n
	case data >= n:
		return n, n
	}
	hole, err = unix.Seek(fd, data, unix.SEEK_HOLE)
	if err != nil {
		return data, n
	}
	return data, min(hole, n)
}

// size is the file's size, or the device's.
func (d *destination) size() (int64, error) {
	if d.block {
		return d.f.Seek(0, io.SeekEnd)
	}
	st, err := d.f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// finish flushes the image to stable storage and closes it.
func (d *destination) finish() error {
	if err := d.f.Sync(); err != nil {
		_ = d.close()
		return fmt.Errorf("flushing %s: %w", d.path, err)
	}
	return d.close()
}

// close closes the image without flushing.
func (d *destination) close() error {
	if d.direct != nil {
		_ = d.direct.Close()
	}
	if err := d.f.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", d.path, err)
	}
	return nil
}

// isZero says whether b is all zeros (b is at most zeroBlock long).
func isZero(b []byte) bool {
	return string(b) == string(zeros[:len(b)])
}
