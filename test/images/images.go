package images

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"platform.example/vm-migration/hack/image/ociimage"
	"platform.example/vm-migration/test/framework"
)

// Image references the tests and make run-local give the images they build.
const (
	// ControllerReference is the controller's image (and the transfer
	// Jobs'), as the local overlay of manifests/ names it.
	ControllerReference = "platform.example/vm-migration-controller:local"
	// SimulatedConversionReference is the simulated conversion image.
	SimulatedConversionReference = "platform.example/vm-migration-conversion:simulated"
)

// simulatedV2V is the simulated virt-v2v-in-place, simulatedSelfCheck
// the simulated v2v-self-check.
var (
	//go:embed simulatedv2v/virt-v2v-in-place
	simulatedV2V []byte
	//go:embed simulatedv2v/v2v-self-check
	simulatedSelfCheck []byte
)

// Controller builds the controller's image as `make image` does (the same
// recipe: make image IMAGE=reference IMAGE_OUT=...) into a folder of the
// image cache, and returns its tarball.
func Controller(ctx context.Context, reference string) (*framework.BuiltImage, error) {
	root, err := framework.RepoRoot()
	if err != nil {
		return nil, err
	}
	cache, err := framework.ImageCacheDir()
	if err != nil {
		return nil, err
	}
	out := filepath.Join(cache, "controller-"+shortHash(reference))
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "image", "IMAGE="+reference, "IMAGE_OUT="+out, "VERSION=local")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("make image: %w: %s", err, b)
	}
	return &framework.BuiltImage{Reference: reference, Tarball: filepath.Join(out, "vm-migration-controller.tar")}, nil
}

// qemuUtilsPackages are the Debian packages of the simulated conversion
// image's Debian layer: qemu-img, which the conversion script makes,
// maps and commits each disk's overlay with, and qemu-io, which the
// simulated virt-v2v-in-place writes into the overlays with.
var qemuUtilsPackages = []string{"qemu-utils"}

// qemuUtilsELF are the binaries whose libraries must all be in the layer.
var qemuUtilsELF = []string{"usr/bin/qemu-img", "usr/bin/qemu-io"}

// qemuUtilsLayer is the Debian layer of qemu-utils and the libraries its
// binaries need, from the machine's apt, cached.
func qemuUtilsLayer(ctx context.Context) (string, error) {
	deps, err := readDebianDeps(ctx, qemuUtilsPackages)
	if err != nil {
		return "", err
	}
	debs, err := downloadDebs(ctx, libraryClosure(deps, qemuUtilsPackages, map[string]bool{"qemu-utils": true}))
	if err != nil {
		return "", err
	}
	return debianLayer(ctx, "qemu-utils", debs, qemuUtilsELF)
}

// SimulatedConversion builds the simulated conversion image (see the
// package documentation) and returns its tarball, cached by the content of
// busybox, the Debian layer of qemu-utils and the simulated
// virt-v2v-in-place.
func SimulatedConversion(ctx context.Context, reference string) (*framework.BuiltImage, error) {
	busybox, err := staticBusybox(ctx)
	if err != nil {
		return nil, err
	}
	qemu, err := qemuUtilsLayer(ctx)
	if err != nil {
		return nil, err
	}
	cache, err := framework.ImageCacheDir()
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(busybox)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", busybox, err)
	}
	key := sha256.New()
	for _, part := range [][]byte{data, simulatedV2V, simulatedSelfCheck, []byte(reference), []byte(filepath.Base(qemu))} {
		key.Write(part)
	}
	res := &framework.BuiltImage{Reference: reference,
		Tarball: filepath.Join(cache, "simulated-conversion-"+hex.EncodeToString(key.Sum(nil))[:16]+".tar")}
	if _, err := os.Stat(res.Tarball); err == nil {
		res.Cached = true
		return res, nil
	}
	applets, err := busyboxApplets(ctx, busybox)
	if err != nil {
		return nil, err
	}
	return res, writeSimulatedConversion(res, qemu, data, applets)
}

// writeSimulatedConversion assembles the image: the Debian layer of
// qemu-utils (qemu), then busybox with a link per applet in /bin,
// virt-v2v-in-place in /usr/bin, and /var/tmp, which the conversion Job
// mounts its work folder on.
func writeSimulatedConversion(res *framework.BuiltImage, qemu string, busybox []byte, applets []string) error {
	tag, err := name.NewTag(res.Reference)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", res.Reference, err)
	}
	files := []ociimage.File{
		{Path: "bin", Mode: 0o755, Dir: true},
		{Path: "bin/busybox", Mode: 0o755, Data: busybox},
		{Path: "usr", Mode: 0o755, Dir: true},
		{Path: "usr/bin", Mode: 0o755, Dir: true},
		{Path: "usr/bin/virt-v2v-in-place", Mode: 0o755, Data: simulatedV2V},
		{Path: "usr/local", Mode: 0o755, Dir: true},
		{Path: "usr/local/bin", Mode: 0o755, Dir: true},
		{Path: "usr/local/bin/v2v-self-check", Mode: 0o755, Data: simulatedSelfCheck},
		{Path: "tmp", Mode: 0o1777, Dir: true},
		{Path: "var", Mode: 0o755, Dir: true},
		{Path: "var/tmp", Mode: 0o1777, Dir: true},
	}
	for _, a := range applets {
		if a != "busybox" {
			files = append(files, ociimage.File{Path: "bin/" + a, Mode: 0o777, Link: "busybox"})
		}
	}
	debian, err := tarball.LayerFromFile(qemu, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return fmt.Errorf("reading %s: %w", qemu, err)
	}
	own, err := ociimage.Layer(files, time.Unix(0, 0).UTC())
	if err != nil {
		return err
	}
	img, err := ociimage.AssembleLayers([]v1.Layer{debian, own}, time.Unix(0, 0).UTC(), "amd64", v1.Config{
		User:       "107:107",
		Entrypoint: []string{"/bin/sh"},
		Env:        []string{"PATH=/usr/bin:/bin"},
		Labels:     map[string]string{"org.opencontainers.image.title": "SIMULATED virt-v2v conversion image (test/images): Debian's qemu-img, a virt-v2v that converts nothing"},
	})
	if err != nil {
		return err
	}
	tmp := res.Tarball + ".tmp-" + fmt.Sprint(os.Getpid())
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", res.Tarball, err)
	}
	return os.Rename(tmp, res.Tarball)
}

// staticBusybox returns Debian's static busybox, extracted from the
// busybox-static package (downloaded, not installed: it conflicts with the
// machine's busybox) into the image cache once.
func staticBusybox(ctx context.Context) (string, error) {
	cache, err := framework.ImageCacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "busybox-static")
	bin := filepath.Join(dir, "bin", "busybox")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	debs, err := downloadDebs(ctx, []string{"busybox-static"})
	if err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(cache, "busybox-")
	if err != nil {
		return "", fmt.Errorf("creating an extraction folder: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := extractDebs(ctx, debs, tmp); err != nil {
		return "", err
	}
	if _, err := ociimage.StaticLinuxArch(filepath.Join(tmp, "bin", "busybox")); err != nil {
		return "", err
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", fmt.Errorf("keeping busybox in %s: %w", dir, err)
	}
	return bin, nil
}

// busyboxApplets lists the applets busybox was built with.
func busyboxApplets(ctx context.Context, busybox string) ([]string, error) {
	out, err := exec.CommandContext(ctx, busybox, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list: %w", busybox, err)
	}
	applets := strings.Fields(string(out))
	sort.Strings(applets)
	return applets, nil
}

// shortHash is the first 16 hex digits of s's SHA-256.
func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:16]
}
