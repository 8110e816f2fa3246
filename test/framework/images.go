package framework

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"platform.example/vm-migration/hack/image/ociimage"
	"platform.example/vm-migration/test/vcsimlocal"
)

// SandboxImage is the reference of the sandbox (pause) image the node's
// containerd starts for every pod: test/framework/cmd/sandbox, built here.
const SandboxImage = "platform.example/vm-migration/sandbox:local"

// sandboxPackage is the sandbox command's package.
const sandboxPackage = "platform.example/vm-migration/test/framework/cmd/sandbox"

// EnvImageCache names the folder that keeps built images between runs.
// Default: $XDG_CACHE_HOME/vm-migration/images (~/.cache/...).
const EnvImageCache = "IMAGE_CACHE"

// imageUser is the numeric non-root user and group images run as.
const imageUser = "65532:65532"

// GoImage says what BuildGoImage builds: a static Go command alone in an
// image, as its entrypoint, run by a numeric non-root user.
type GoImage struct {
	// Package is the command's import path.
	Package string
	// Reference is the image's repository:tag.
	Reference string
}

// BuiltImage is an image tarball BuildGoImage wrote (or found cached).
type BuiltImage struct {
	Reference string
	// Tarball is a docker-archive tarball, the form ctr images import
	// takes.
	Tarball string
	// Binary is the static command inside.
	Binary string
	// Cached is true when the tarball was already there.
	Cached bool
}

// BuildGoImage builds img's command (CGO_ENABLED=0, -trimpath) and
// assembles the image with go-containerregistry. Images are cached by
// content: the tarball's name holds the hash of the binary, the reference
// and the layout, so an unchanged command is not assembled again.
func BuildGoImage(ctx context.Context, img GoImage) (*BuiltImage, error) {
	cache, err := ImageCacheDir()
	if err != nil {
		return nil, err
	}
	tag, err := name.NewTag(img.Reference)
	if err != nil {
		return nil, fmt.Errorf("image reference %q: %w", img.Reference, err)
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(cache, "build-")
	if err != nil {
		return nil, fmt.Errorf("creating a build folder: %w", err)
	}
	defer os.RemoveAll(tmp)
	command := path.Base(img.Package)
	built := filepath.Join(tmp, command)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", built, img.Package)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building %s: %w: %s", img.Package, err, out)
	}
	layout := staticImage{path: "usr/local/bin/" + command, env: []string{"PATH=/usr/local/bin"}}
	tarballPath, cached, err := cachedStaticImage(cache, built, command, layout, tag)
	if err != nil {
		return nil, err
	}
	res := &BuiltImage{Reference: tag.String(), Tarball: tarballPath, Binary: strings.TrimSuffix(tarballPath, ".tar") + ".bin"}
	if _, err := os.Stat(res.Binary); err == nil {
		res.Cached = cached
		return res, nil
	}
	if err := os.Rename(built, res.Binary); err != nil {
		return nil, fmt.Errorf("keeping %s: %w", res.Binary, err)
	}
	return res, nil
}

// staticImage is the layout of an image that holds one static binary and
// nothing else it needs: where the binary goes, the entrypoint that runs
// it, and the folders it also holds (mount points).
type staticImage struct {
	// path is the binary's path inside the image, without a leading
	// slash; the entrypoint is "/"+path followed by args.
	path string
	args []string
	// dirs are folders the image holds besides the binary's parents and
	// /tmp, without a leading slash.
	dirs []string
	env  []string
}

// describe is the layout as text, part of the cache key.
func (l staticImage) describe() string {
	return strings.Join([]string{l.path, strings.Join(l.args, " "), strings.Join(l.dirs, " "), strings.Join(l.env, " ")}, "\n")
}

// cachedStaticImage returns the tarball of binary laid out as layout and
// tagged tag, in the image cache: its name is base and the hash of the
// binary, the reference and the layout, so an unchanged image is not
// assembled again (cached is then true).
func cachedStaticImage(cache, binary, base string, layout staticImage, tag name.Tag) (tarballPath string, cached bool, err error) {
	sum, err := vcsimlocal.FileSHA256(binary)
	if err != nil {
		return "", false, err
	}
	key := sha256.Sum256([]byte(sum + "\n" + tag.String() + "\n" + layout.describe()))
	tarballPath = filepath.Join(cache, fmt.Sprintf("%s-%s.tar", base, hex.EncodeToString(key[:])[:16]))
	if _, err := os.Stat(tarballPath); err == nil {
		return tarballPath, true, nil
	}
	if err := writeStaticImage(binary, layout, tag, tarballPath); err != nil {
		return "", false, err
	}
	return tarballPath, false, nil
}

// writeStaticImage assembles the image of one static binary, run by a
// numeric non-root user, and writes its tarball (through a temporary
// file, so a concurrent reader never sees half of it).
func writeStaticImage(binary string, layout staticImage, tag name.Tag, out string) error {
	arch, err := ociimage.StaticLinuxArch(binary)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(binary)
	if err != nil {
		return fmt.Errorf("reading %s: %w", binary, err)
	}
	var files []ociimage.File
	seen := map[string]bool{}
	addDir := func(dir string) {
		var parts []string
		for _, p := range strings.Split(dir, "/") {
			parts = append(parts, p)
			d := strings.Join(parts, "/")
			if d != "" && d != "." && !seen[d] {
				seen[d] = true
				files = append(files, ociimage.File{Path: d, Mode: 0o755, Dir: true})
			}
		}
	}
	addDir(path.Dir(layout.path))
	for _, d := range layout.dirs {
		addDir(d)
	}
	files = append(files,
		ociimage.File{Path: layout.path, Mode: 0o755, Data: data},
		ociimage.File{Path: "tmp", Mode: 0o1777, Dir: true})
	img, err := ociimage.Assemble([][]ociimage.File{files}, time.Unix(0, 0).UTC(), arch, v1.Config{
		User:       imageUser,
		Entrypoint: append([]string{"/" + layout.path}, layout.args...),
		Env:        layout.env,
	})
	if err != nil {
		return err
	}
	tmp := out + ".tmp-" + randomSuffix()
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", out, err)
	}
	return os.Rename(tmp, out)
}

// ImageCacheDir is the folder that keeps built images between runs
// ($IMAGE_CACHE, or the user cache folder's vm-migration/images), created
// when missing.
func ImageCacheDir() (string, error) {
	dir := os.Getenv(EnvImageCache)
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("finding the cache folder: %w", err)
		}
		dir = filepath.Join(base, "vm-migration", "images")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating the image cache %s: %w", dir, err)
	}
	return dir, nil
}

func randomSuffix() string {
	s, err := randomHex(4)
	if err != nil {
		return fmt.Sprint(time.Now().UnixNano())
	}
	return s
}
