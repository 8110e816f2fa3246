package vcsimlocal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"

	"platform.example/vm-migration/pkg/transfer"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
)

// ImageDisk is a disk that serves a raw image file (a real guest's disk)
// as its flat extent: its size is the file's, a whole number of MiB.
func ImageDisk(image string) (DiskSpec, error) {
	fi, err := os.Stat(image)
	if err != nil {
		return DiskSpec{}, fmt.Errorf("guest image: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Size() < 2*MiB || fi.Size()%MiB != 0 {
		return DiskSpec{}, fmt.Errorf("guest image %s: %d bytes is not a regular file of a whole number of MiB", image, fi.Size())
	}
	abs, err := filepath.Abs(image)
	if err != nil {
		return DiskSpec{}, err
	}
	return DiskSpec{SizeBytes: fi.Size(), Image: abs}, nil
}

// placeImage lays out disk i of a VM as ESXi does, a text descriptor and
// a flat extent, where the extent is d.Image itself: linked into the
// simulator's datastore directory (a hard link when on the same file
// system, else a symbolic link), so that a 1.5 GiB image never goes
// through the upload API and is never copied. The simulator only reads
// it. It returns the image's SHA-256, from "<image>.sha256" when the
// image's builder recorded it there, else computed.
func (s *Server) placeImage(ctx context.Context, ds *object.Datastore, vm string, i int, d DiskSpec) (string, error) {
	fi, err := os.Stat(d.Image)
	if err != nil {
		return "", fmt.Errorf("disk %d of %s: %w", i, vm, err)
	}
	if fi.Size() != d.SizeBytes {
		return "", fmt.Errorf("disk %d of %s: image %s has %d bytes, the disk %d", i, vm, d.Image, fi.Size(), d.SizeBytes)
	}
	var props mo.Datastore
	if err := ds.Properties(ctx, ds.Reference(), []string{"summary.url"}, &props); err != nil {
		return "", fmt.Errorf("reading the datastore's directory: %w", err)
	}
	dir := props.Summary.Url
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("datastore URL %q is not a local directory (only the simulator's datastores are)", dir)
	}
	base := path.Join(vm, diskBase(vm, i))
	if err := upload(ctx, ds, base+".vmdk", []byte(FlatDescriptor(diskBase(vm, i), d.SizeBytes))); err != nil {
		return "", err
	}
	// The simulator created an empty extent with the disk: the image takes its place.
	extent := filepath.Join(dir, filepath.FromSlash(base)+"-flat.vmdk")
	if err := os.Remove(extent); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	if err := os.Link(d.Image, extent); err != nil {
		if err := os.Symlink(d.Image, extent); err != nil {
			return "", fmt.Errorf("placing %s as %s: %w", d.Image, extent, err)
		}
	}
	return FileRoot(d.Image)
}

// FileRoot is the root of the block tree (package blocktree) of a file's
// content: the checksum the transfer reports of a disk of those bytes.
// Its holes are not read.
func FileRoot(path string) (string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	root, _, err := transfer.HashImage(context.Background(), path, info.Size())
	if err != nil {
		return "", fmt.Errorf("hashing %s: %w", path, err)
	}
	return root, nil
}

// FileSHA256 is the hex SHA-256 of a file's content.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hashing %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
