package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// install runs "vm-transfer install DIR": it copies this very binary to
// DIR/vm-transfer (a temporary file renamed into place), executable. The
// conversion pod's init container runs it from the transfer image, so that
// the conversion script, in an image of anybody's, finds vm-transfer's
// tree-update and checksum in a volume. It returns the exit code.
func install(args []string, stderr io.Writer) int {
	if len(args) != 1 || args[0] == "" {
		fmt.Fprintln(stderr, "vm-transfer install: give the folder to copy vm-transfer into")
		return 2
	}
	if err := copySelf(args[0]); err != nil {
		fmt.Fprintf(stderr, "vm-transfer install: %v\n", err)
		return 1
	}
	return 0
}

// copySelf copies the running executable to dir/vm-transfer.
func copySelf(dir string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding the running executable: %w", err)
	}
	src, err := os.Open(self)
	if err != nil {
		return fmt.Errorf("reading %s: %w", self, err)
	}
	defer src.Close()
	tmp, err := os.CreateTemp(dir, ".vm-transfer-")
	if err != nil {
		return fmt.Errorf("creating a file in %s: %w", dir, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return fmt.Errorf("copying %s into %s: %w", self, dir, err)
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return fmt.Errorf("making %s executable: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", tmp.Name(), err)
	}
	dst := filepath.Join(dir, "vm-transfer")
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("placing %s: %w", dst, err)
	}
	return nil
}
