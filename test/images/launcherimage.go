package images

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"platform.example/vm-migration/hack/image/ociimage"
	"platform.example/vm-migration/test/framework"
	"platform.example/vm-migration/test/images/launcher"
)

// LauncherReference is the launcher image the KubeVirt stand-in runs each
// instance's launcher pod from.
const LauncherReference = "platform.example/vm-migration-launcher:local"

// launcherCommand is the launcher program's package.
const launcherCommand = "platform.example/vm-migration/test/images/cmd/vmi-launcher"

// LauncherUID is the user and group the launcher image runs as (KubeVirt's
// qemu user, 107).
const LauncherUID = 107

// launcherPackages are the Debian packages whose files the image holds:
// QEMU, its TCG module and data, and the firmware it loads (SeaBIOS,
// iPXE option ROMs, OVMF).
var launcherPackages = []string{"qemu-system-x86", "qemu-system-common", "qemu-system-data", "seabios", "ipxe-qemu", "ovmf"}

// launcherFollow are the packages whose library dependencies come along:
// QEMU's binary only. qemu-system-common's other libraries serve modules
// and helpers the launcher never loads (spice, audio, USB); checkLinked
// proves that the binary and the TCG module have all theirs.
var launcherFollow = map[string]bool{"qemu-system-x86": true}

// launcherELF are the files QEMU runs, whose libraries must all be in
// the image.
var launcherELF = []string{"usr/bin/qemu-system-x86_64", "usr/lib/x86_64-linux-gnu/qemu/accel-tcg-x86_64.so"}

// debianPruned are folders of Debian packages nothing reads at run time.
var debianPruned = []string{"usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/lintian", "usr/share/locale", "usr/share/bug"}

// Launcher builds the launcher image: Debian's QEMU and firmware with the
// libraries QEMU needs, unpacked from the machine's apt (the versions of
// its apt lists), and the static vmi-launcher command as entrypoint, run
// as 107:107. The Debian layer is cached by its packages' versions, the
// image by that, the command and the reference.
func Launcher(ctx context.Context, reference string) (*framework.BuiltImage, error) {
	tag, err := name.NewTag(reference)
	if err != nil {
		return nil, fmt.Errorf("image reference %q: %w", reference, err)
	}
	deps, err := readDebianDeps(ctx, launcherPackages)
	if err != nil {
		return nil, err
	}
	debs, err := downloadDebs(ctx, libraryClosure(deps, launcherPackages, launcherFollow))
	if err != nil {
		return nil, err
	}
	rootfs, err := launcherRootfs(ctx, debs)
	if err != nil {
		return nil, err
	}
	bin, err := buildStatic(ctx, launcherCommand)
	if err != nil {
		return nil, err
	}
	cache, err := framework.ImageCacheDir()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(bin)
	key := sha256.Sum256([]byte(filepath.Base(rootfs) + "\n" + hex.EncodeToString(sum[:]) + "\n" + tag.String()))
	res := &framework.BuiltImage{Reference: tag.String(), Tarball: filepath.Join(cache, "launcher-"+hex.EncodeToString(key[:])[:16]+".tar")}
	if _, err := os.Stat(res.Tarball); err == nil {
		res.Cached = true
		return res, nil
	}
	return res, writeLauncherImage(res.Tarball, tag, rootfs, bin)
}

// launcherRootfs unpacks the packages into a tar of the image's Debian
// layer (debianLayer), QEMU's libraries checked.
func launcherRootfs(ctx context.Context, debs []string) (string, error) {
	return debianLayer(ctx, "launcher-rootfs", debs, launcherELF)
}

// debianLayer unpacks the packages into a tar of an image's Debian layer
// (sorted, owned by root, times zero), with the folders nothing reads at
// run time pruned (debianPruned) and the libraries of each ELF file
// checked, cached by its name, the packages' file names and the files.
func debianLayer(ctx context.Context, name string, debs, elf []string) (string, error) {
	cache, err := framework.ImageCacheDir()
	if err != nil {
		return "", err
	}
	key := sha256.New()
	for _, d := range debs {
		fmt.Fprintln(key, filepath.Base(d))
	}
	for _, p := range slices.Concat(debianPruned, elf) {
		fmt.Fprintln(key, p)
	}
	out := filepath.Join(cache, name+"-"+hex.EncodeToString(key.Sum(nil))[:16]+".tar")
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	root, err := os.MkdirTemp(cache, name+"-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(root)
	if err := extractDebs(ctx, debs, root); err != nil {
		return "", err
	}
	for _, p := range debianPruned {
		if err := os.RemoveAll(filepath.Join(root, p)); err != nil {
			return "", err
		}
	}
	if err := checkLinked(root, elf...); err != nil {
		return "", err
	}
	tmp := out + ".tmp-" + fmt.Sprint(os.Getpid())
	if err := writeTree(root, tmp); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return out, os.Rename(tmp, out)
}

// writeTree writes the tree under root as a tar at out: entries in
// lexical order, owner root, modification time zero.
func writeTree(root, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == root {
			return err
		}
		return addToTar(tw, root, path, d)
	})
	if err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}

// addToTar adds one file, folder or link of the tree.
func addToTar(tw *tar.Writer, root, path string, d fs.DirEntry) error {
	fi, err := d.Info()
	if err != nil {
		return err
	}
	link := ""
	if fi.Mode()&fs.ModeSymlink != 0 {
		if link, err = os.Readlink(path); err != nil {
			return err
		}
	}
	h, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		return err
	}
	rel, _ := filepath.Rel(root, path)
	h.Name, h.Uid, h.Gid, h.Uname, h.Gname = filepath.ToSlash(rel), 0, 0, "", ""
	if fi.IsDir() {
		h.Name += "/"
	}
	h.ModTime, h.AccessTime, h.ChangeTime, h.Format = time.Unix(0, 0), time.Time{}, time.Time{}, tar.FormatPAX
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	src, err := os.Open(path)
	if err != nil {
		return err
	}
	defer src.Close()
	_, err = io.Copy(tw, src)
	return err
}

// buildStatic builds a command of the module as a static Linux binary.
func buildStatic(ctx context.Context, pkg string) ([]byte, error) {
	root, err := framework.RepoRoot()
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "launcher-build-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, "bin")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building %s: %w: %s", pkg, err, b)
	}
	return os.ReadFile(out)
}

// writeLauncherImage assembles the image (the Debian layer, then the
// launcher's) and writes its tarball.
func writeLauncherImage(out string, tag name.Tag, rootfs string, bin []byte) error {
	debian, err := tarball.LayerFromFile(rootfs, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return fmt.Errorf("reading %s: %w", rootfs, err)
	}
	dir := func(p string, mode int64) ociimage.File { return ociimage.File{Path: p, Mode: mode, Dir: true} }
	files := []ociimage.File{
		dir("usr", 0o755), dir("usr/local", 0o755), dir("usr/local/bin", 0o755),
		{Path: "usr/local/bin/vmi-launcher", Mode: 0o755, Data: bin},
		// KubeVirt's launcher pods run virt-launcher-monitor.
		dir("usr/bin", 0o755), {Path: "usr/bin/virt-launcher-monitor", Mode: 0o777, Link: "/usr/local/bin/vmi-launcher"},
		dir("tmp", 0o1777), dir("var", 0o755), dir("var/run", 0o755),
		dir(strings.TrimPrefix(launcher.DefaultRunDir, "/"), 0o755),
		dir("var/run/kubevirt-private", 0o755), dir(strings.TrimPrefix(launcher.DefaultDiskDir, "/"), 0o755),
	}
	own, err := ociimage.Layer(files, time.Unix(0, 0).UTC())
	if err != nil {
		return err
	}
	img, err := ociimage.AssembleLayers([]v1.Layer{debian, own}, time.Unix(0, 0).UTC(), "amd64", v1.Config{
		User:       fmt.Sprintf("%d:%d", LauncherUID, LauncherUID),
		Entrypoint: []string{"/usr/local/bin/vmi-launcher"},
		Env:        []string{"PATH=/usr/local/bin:/usr/bin"},
		Labels:     map[string]string{"org.opencontainers.image.title": "vmi-launcher: the KubeVirt stand-in's virt-launcher (test/images), Debian's QEMU and OVMF"},
	})
	if err != nil {
		return err
	}
	tmp := out + ".tmp-" + fmt.Sprint(os.Getpid())
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", out, err)
	}
	return os.Rename(tmp, out)
}
