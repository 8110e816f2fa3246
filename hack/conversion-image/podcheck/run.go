package podcheck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// Unpack unpacks the image named ref of the OCI layout at layoutDir into
// dir, layer by layer as a runtime does (GNU tar, numeric owners, modes
// kept), and returns its config.
func Unpack(layoutDir, ref, dir string) (*v1.ConfigFile, error) {
	img, err := imageFromLayout(layoutDir, ref)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("podcheck: the image config: %w", err)
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, fmt.Errorf("podcheck: the image's layers: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("podcheck: %w", err)
	}
	for i, l := range layers {
		if err := untar(l, dir); err != nil {
			return nil, fmt.Errorf("podcheck: unpacking layer %d: %w", i, err)
		}
	}
	return cfg, nil
}

// imageFromLayout finds the image named ref in an OCI layout.
func imageFromLayout(layoutDir, ref string) (v1.Image, error) {
	idx, err := layout.ImageIndexFromPath(layoutDir)
	if err != nil {
		return nil, fmt.Errorf("podcheck: reading the OCI layout %s: %w", layoutDir, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("podcheck: reading the OCI layout %s: %w", layoutDir, err)
	}
	var names []string
	for _, d := range m.Manifests {
		name := d.Annotations["org.opencontainers.image.ref.name"]
		if name == ref {
			return idx.Image(d.Digest)
		}
		names = append(names, name)
	}
	return nil, fmt.Errorf("podcheck: the OCI layout %s has no image %s (it has %s)", layoutDir, ref, strings.Join(names, ", "))
}

// untar extracts a layer with GNU tar.
func untar(l v1.Layer, dir string) error {
	rc, err := l.Uncompressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	cmd := exec.Command("tar", "-x", "--numeric-owner", "--same-owner", "--same-permissions", "-C", dir)
	cmd.Stdin = rc
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("tar: %w: %s", err, out)
	}
	return nil
}

// Cgroup is a cgroup of every v1 hierarchy of the machine (cgroup v1 is
// what these machines mount), the parent of a container's: it outlives
// the container, so its peak memory can be read after it.
type Cgroup struct {
	// Path is relative to each hierarchy's root.
	Path string
	dirs []string
}

// NewCgroup makes the cgroup path in every v1 hierarchy (cpuset's gets
// its parent's CPUs and memory nodes, which it needs before any task).
func NewCgroup(path string) (*Cgroup, error) {
	hierarchies, err := filepath.Glob("/sys/fs/cgroup/*/cgroup.procs")
	if err != nil || len(hierarchies) == 0 {
		return nil, errors.New("podcheck: no cgroup v1 hierarchy under /sys/fs/cgroup")
	}
	cg := &Cgroup{Path: path}
	for _, h := range hierarchies {
		root := filepath.Dir(h)
		dir := filepath.Join(root, path)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			cg.Remove()
			return nil, fmt.Errorf("podcheck: making the cgroup %s: %w", dir, err)
		}
		cg.dirs = append(cg.dirs, dir)
		if filepath.Base(root) == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				if v, err := os.ReadFile(filepath.Join(root, f)); err == nil {
					_ = os.WriteFile(filepath.Join(dir, f), v, 0o644)
				}
			}
		}
	}
	return cg, nil
}

// PeakMemory is the most memory the cgroup's tasks used at once.
func (c *Cgroup) PeakMemory() (int64, error) {
	data, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/memory", c.Path, "memory.max_usage_in_bytes"))
	if err != nil {
		return 0, fmt.Errorf("podcheck: %w", err)
	}
	return strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
}

// Remove removes the cgroup from every hierarchy (empty by then).
func (c *Cgroup) Remove() {
	for i := len(c.dirs) - 1; i >= 0; i-- {
		_ = syscall.Rmdir(c.dirs[i])
	}
}

// Run runs the bundle's container with runc (its state under stateDir)
// as id until it exits, its output to out, and returns its exit code.
// When ctx ends first the container is killed. The container is deleted
// before Run returns.
func Run(ctx context.Context, stateDir string, b *Bundle, id string, out io.Writer) (int, error) {
	defer func() {
		_ = exec.Command("runc", "--root", stateDir, "delete", "--force", id).Run()
	}()
	cmd := exec.Command("runc", "--root", stateDir, "run", "--bundle", b.Dir, id)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("podcheck: starting runc: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = exec.Command("runc", "--root", stateDir, "kill", "--all", id, "KILL").Run()
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			err = <-done
		}
		return 0, fmt.Errorf("podcheck: %s stopped: %w", id, ctx.Err())
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), nil
	}
	if err != nil {
		return 0, fmt.Errorf("podcheck: runc: %w", err)
	}
	return 0, nil
}
