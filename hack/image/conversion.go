package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"platform.example/vm-migration/hack/image/ociimage"
	"platform.example/vm-migration/pkg/steps/pipeline"
)

// The conversion image's contract with the conversion Job
// (docs/operators/conversion-image.md): where things are, and how it runs.
const (
	conversionTitle     = "vm-migration-conversion"
	conversionTarball   = conversionTitle + ".tar"
	conversionAppliance = "/usr/local/lib/guestfs/appliance"
	conversionSelfCheck = "/usr/local/bin/v2v-self-check"
	conversionSBOM      = "/usr/share/doc/" + conversionTitle + "/sbom.spdx.json"
	// conversionHome is the Job's writable /var/tmp (an emptyDir).
	conversionHome = "/var/tmp"
	dpkgStatus     = "var/lib/dpkg/status"
)

// conversionRequired are the files of the root file system the
// conversion Job and libguestfs need: the Job's shell, virt-v2v-in-place
// and the nbdkit its libvirtxml input runs, the qemu of the appliance, the
// fixed appliance, the self-check, the passwd holding the Job's user.
var conversionRequired = []string{
	"bin/sh", "usr/bin/virt-v2v-in-place", "usr/bin/nbdkit", "usr/bin/qemu-system-x86_64", "usr/bin/guestfish",
	conversionAppliance[1:] + "/kernel", conversionAppliance[1:] + "/initrd", conversionAppliance[1:] + "/root",
	conversionAppliance[1:] + "/README.fixed", conversionSelfCheck[1:], "etc/passwd", dpkgStatus,
}

// rootfsScan is what BuildConversion learns from one pass over the root
// file system tar.
type rootfsScan struct {
	seen   map[string]bool
	passwd []byte
	status []byte
}

// BuildConversion packages a root file system tar (hack/conversion-image)
// as the conversion image: the tar as one gzip layer, the SBOM of its
// Debian packages (from its dpkg status) in a second one, the config the
// conversion Job expects. It checks the tar holds what the Job needs.
func BuildConversion(o Options) (*Result, error) {
	tag, err := name.NewTag(o.Reference)
	if err != nil {
		return nil, fmt.Errorf("image reference %q: %w", o.Reference, err)
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", o.OutDir, err)
	}
	gzPath := filepath.Join(o.OutDir, "rootfs.tar.gz")
	defer os.Remove(gzPath)
	scan, err := compressRootfs(o.Rootfs, gzPath)
	if err != nil {
		return nil, err
	}
	if err := scan.check(); err != nil {
		return nil, fmt.Errorf("%s cannot be the conversion image: %w", o.Rootfs, err)
	}
	pkgs, err := parseDpkgStatus(scan.status)
	if err != nil {
		return nil, err
	}
	arch, err := debianGoArch(pkgs)
	if err != nil {
		return nil, err
	}
	sbom, err := renderDebianSBOM(o, pkgs)
	if err != nil {
		return nil, err
	}
	img, err := assembleConversion(o, arch, gzPath, sbom)
	if err != nil {
		return nil, err
	}
	return write(o.OutDir, conversionTarball, tag, img, sbom)
}

// compressRootfs gzips the tar at src into dst and, in the same pass,
// notes its files and keeps the passwd and the dpkg status.
func compressRootfs(src, dst string) (*rootfsScan, error) {
	in, err := os.Open(src)
	if err != nil {
		return nil, fmt.Errorf("opening the root file system tar: %w", err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return nil, fmt.Errorf("creating the compressed layer: %w", err)
	}
	defer out.Close()
	zw := gzip.NewWriter(out)
	tee := io.TeeReader(in, zw)
	scan, err := scanRootfs(tar.NewReader(tee))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", src, err)
	}
	// The tar's padding after its end marker belongs to the layer too.
	if _, err := io.Copy(io.Discard, tee); err != nil {
		return nil, fmt.Errorf("reading %s: %w", src, err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("compressing the layer: %w", err)
	}
	if err := out.Close(); err != nil {
		return nil, fmt.Errorf("writing the compressed layer: %w", err)
	}
	return scan, nil
}

// scanRootfs reads every entry of a root file system tar.
func scanRootfs(tr *tar.Reader) (*rootfsScan, error) {
	s := &rootfsScan{seen: map[string]bool{}}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return s, nil
		}
		if err != nil {
			return nil, err
		}
		p := strings.TrimPrefix(path.Clean(strings.TrimPrefix(h.Name, "./")), "/")
		s.seen[p] = h.Typeflag == tar.TypeReg || h.Typeflag == tar.TypeSymlink || h.Typeflag == tar.TypeLink
		var keep *[]byte
		switch p {
		case "etc/passwd":
			keep = &s.passwd
		case dpkgStatus:
			keep = &s.status
		}
		if keep != nil {
			if *keep, err = io.ReadAll(tr); err != nil {
				return nil, fmt.Errorf("reading /%s: %w", p, err)
			}
		}
	}
}

// check says what the root file system lacks for the conversion Job.
func (s *rootfsScan) check() error {
	var missing []string
	for _, f := range conversionRequired {
		// With a merged /usr, /bin/sh is /usr/bin/sh.
		if !s.seen[f] && !s.seen["usr/"+f] {
			missing = append(missing, "/"+f)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("it has no %s", strings.Join(missing, ", "))
	}
	uid := strconv.FormatInt(pipeline.StagingUID, 10)
	for line := range strings.SplitSeq(string(s.passwd), "\n") {
		if f := strings.Split(line, ":"); len(f) >= 6 && f[2] == uid && f[3] == uid && f[5] == conversionHome {
			return nil
		}
	}
	return fmt.Errorf("its /etc/passwd has no user %s with group %s and home %s (the conversion Job's user)", uid, uid, conversionHome)
}

// assembleConversion is the conversion image: the root file system layer
// (already compressed), a layer with the SBOM, and the config.
func assembleConversion(o Options, arch, gzPath string, sbom []byte) (v1.Image, error) {
	rootfs, err := tarball.LayerFromFile(gzPath, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("reading the compressed layer: %w", err)
	}
	var files []ociimage.File
	for _, dir := range []string{"usr", "usr/share", "usr/share/doc", path.Dir(conversionSBOM[1:])} {
		files = append(files, ociimage.File{Path: dir, Mode: 0o755, Dir: true})
	}
	sbomLayer, err := ociimage.Layer(append(files, ociimage.File{Path: conversionSBOM[1:], Mode: 0o644, Data: sbom}), o.Created)
	if err != nil {
		return nil, err
	}
	user := strconv.FormatInt(pipeline.StagingUID, 10)
	return ociimage.AssembleLayers([]v1.Layer{rootfs, sbomLayer}, o.Created, arch, v1.Config{
		User:       user + ":" + user,
		Cmd:        []string{conversionSelfCheck},
		WorkingDir: conversionHome,
		Env: []string{
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"HOME=" + conversionHome,
			"LIBGUESTFS_BACKEND=direct",
			"LIBGUESTFS_PATH=" + conversionAppliance,
		},
		Labels: conversionLabels(o),
	})
}

func conversionLabels(o Options) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":       conversionTitle,
		"org.opencontainers.image.description": "virt-v2v-in-place with libguestfs' fixed appliance, from Debian packages: the conversion Jobs of vm-migration-controller",
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.created":     o.Created.Format("2006-01-02T15:04:05Z"),
		LabelCommands:                          conversionSelfCheck + ",/usr/bin/virt-v2v-in-place",
		LabelSBOM:                              conversionSBOM,
	}
	if o.Revision != "" {
		l["org.opencontainers.image.revision"] = o.Revision
	}
	return l
}

// debPackage is one installed package of a dpkg status file.
type debPackage struct {
	Name, Version, Architecture, Source string
}

// parseDpkgStatus returns the installed packages of a dpkg status file,
// in its order.
func parseDpkgStatus(status []byte) ([]debPackage, error) {
	var out []debPackage
	for para := range strings.SplitSeq(string(bytes.ReplaceAll(status, []byte("\r\n"), []byte("\n"))), "\n\n") {
		fields := map[string]string{}
		for line := range strings.SplitSeq(para, "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && line != "" && line[0] != ' ' && line[0] != '\t' {
				fields[k] = strings.TrimSpace(v)
			}
		}
		if fields["Package"] == "" || !strings.HasSuffix(fields["Status"], " installed") {
			continue
		}
		out = append(out, debPackage{Name: fields["Package"], Version: fields["Version"], Architecture: fields["Architecture"], Source: fields["Source"]})
	}
	if len(out) == 0 {
		return nil, errors.New("the root file system's dpkg status lists no installed package")
	}
	return out, nil
}

// debianGoArch is the Go architecture of the packages (dpkg's own).
func debianGoArch(pkgs []debPackage) (string, error) {
	for _, p := range pkgs {
		if p.Name != "dpkg" {
			continue
		}
		switch p.Architecture {
		case "amd64", "arm64", "s390x":
			return p.Architecture, nil
		case "ppc64el":
			return "ppc64le", nil
		}
		return "", fmt.Errorf("the root file system is built for an unsupported architecture %q", p.Architecture)
	}
	return "", errors.New("the root file system's dpkg status has no dpkg package to tell its architecture")
}
