// Command cdiimage packages one of the images of the upstream components the
// test node runs (CDI's, hack/build-cdi-images.sh; KubeVirt's,
// hack/build-kubevirt.sh)
// with go-containerregistry, without a container engine: an optional root
// file system tar of Debian packages as the first layer, then one layer of
// CDI's files (binaries, scripts, links, folders), then the config
// (entrypoint, user, working folder, environment). Prepared tars (-layer)
// go between the two, as they are: file capabilities in their extended
// attributes reach the node. It writes a
// docker-archive tarball, the form `ctr images import` and `docker load`
// take.
//
//	go run ./hack/cdiimage -image platform.example/vm-migration/cdi-importer:v1.65.0 \
//	  -rootfs rootfs.tar -file /usr/bin/cdi-importer=_output/cdi/cdi-importer \
//	  -entrypoint /usr/bin/cdi-importer,-alsologtostderr -user 1001 -out cdi-importer.tar
package main

import (
	"flag"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"platform.example/vm-migration/hack/image/ociimage"
)

// list is a repeatable flag.
type list []string

func (l *list) String() string     { return strings.Join(*l, " ") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

// spec is what one image is made of.
type spec struct {
	ref        string
	rootfs     string
	layers     list // prepared tar layers after the root file system
	files      list // /path=source (executables, 0755)
	links      list // /path=target
	dirs       list // /path (0755) or /path=mode (octal)
	env        list
	entrypoint string
	user       string
	workdir    string
	out        string
	epoch      int64
}

func main() {
	var s spec
	fs := flag.NewFlagSet("cdiimage", flag.ExitOnError)
	fs.StringVar(&s.ref, "image", "", "image reference (repository:tag)")
	fs.StringVar(&s.rootfs, "rootfs", "", "root file system tar for the first layer (none: the image holds CDI's files alone)")
	fs.Var(&s.layers, "layer", "a prepared tar (kept as it is, extended attributes included) as the next layer after -rootfs; repeatable")
	fs.Var(&s.files, "file", "/path/in/image=host-file: an executable file (0755, root); repeatable")
	fs.Var(&s.links, "link", "/path/in/image=target: a symbolic link; repeatable")
	fs.Var(&s.dirs, "dir", "/path/in/image[=octal mode]: a folder (0755 unless given); repeatable")
	fs.Var(&s.env, "env", "NAME=value of the config's environment; repeatable")
	fs.StringVar(&s.entrypoint, "entrypoint", "", "the entrypoint, comma-separated")
	fs.StringVar(&s.user, "user", "1001", "the numeric user the image runs as")
	fs.StringVar(&s.workdir, "workdir", "", "the working folder")
	fs.StringVar(&s.out, "out", "", "the docker-archive tarball to write")
	fs.Int64Var(&s.epoch, "source-date-epoch", 0, "Unix time of every file and of the image")
	_ = fs.Parse(os.Args[1:])
	if err := build(s); err != nil {
		fmt.Fprintln(os.Stderr, "cdiimage:", err)
		os.Exit(1)
	}
}

func build(s spec) error {
	if s.ref == "" || s.out == "" || s.entrypoint == "" {
		return fmt.Errorf("-image, -entrypoint and -out are required")
	}
	tag, err := name.NewTag(s.ref)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", s.ref, err)
	}
	created := time.Unix(s.epoch, 0).UTC()
	files, arch, err := cdiFiles(s)
	if err != nil {
		return err
	}
	var layers []v1.Layer
	if s.rootfs != "" {
		l, err := tarball.LayerFromFile(s.rootfs, tarball.WithMediaType(types.OCILayer))
		if err != nil {
			return fmt.Errorf("reading the root file system %s: %w", s.rootfs, err)
		}
		layers = append(layers, l)
	}
	for _, file := range s.layers {
		l, err := tarball.LayerFromFile(file, tarball.WithMediaType(types.OCILayer))
		if err != nil {
			return fmt.Errorf("reading the layer %s: %w", file, err)
		}
		layers = append(layers, l)
	}
	l, err := ociimage.Layer(files, created)
	if err != nil {
		return err
	}
	layers = append(layers, l)
	envs := []string(s.env)
	if !hasEnv(envs, "PATH") {
		envs = append(envs, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	}
	img, err := ociimage.AssembleLayers(layers, created, arch, v1.Config{
		User:       s.user,
		Entrypoint: strings.Split(s.entrypoint, ","),
		Env:        envs,
		WorkingDir: s.workdir,
	})
	if err != nil {
		return err
	}
	tmp := s.out + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", s.out, err)
	}
	if err := os.Rename(tmp, s.out); err != nil {
		return fmt.Errorf("writing %s: %w", s.out, err)
	}
	return nil
}

// cdiFiles reads the files, links and folders of CDI's layer, with every
// parent folder, sorted by path; the architecture is the first static
// executable's (amd64 when there is none).
func cdiFiles(s spec) ([]ociimage.File, string, error) {
	entries := map[string]ociimage.File{}
	addParents := func(p string) {
		for d := path.Dir(p); d != "." && d != "/" && d != ""; d = path.Dir(d) {
			if _, ok := entries[d]; !ok {
				entries[d] = ociimage.File{Path: d, Mode: 0o755, Dir: true}
			}
		}
	}
	arch := ""
	for _, f := range s.files {
		dst, src, ok := strings.Cut(f, "=")
		if !ok {
			return nil, "", fmt.Errorf("-file %q: want /path=host-file", f)
		}
		data, err := os.ReadFile(src)
		if err != nil {
			return nil, "", fmt.Errorf("reading %s: %w", src, err)
		}
		if a, err := ociimage.StaticLinuxArch(src); err == nil && arch == "" {
			arch = a
		}
		p := strings.TrimPrefix(dst, "/")
		addParents(p)
		entries[p] = ociimage.File{Path: p, Mode: 0o755, Data: data}
	}
	for _, l := range s.links {
		dst, target, ok := strings.Cut(l, "=")
		if !ok {
			return nil, "", fmt.Errorf("-link %q: want /path=target", l)
		}
		p := strings.TrimPrefix(dst, "/")
		addParents(p)
		entries[p] = ociimage.File{Path: p, Mode: 0o777, Link: target}
	}
	for _, d := range s.dirs {
		dst, mode, _ := strings.Cut(d, "=")
		m := int64(0o755)
		if mode != "" {
			if _, err := fmt.Sscanf(mode, "%o", &m); err != nil {
				return nil, "", fmt.Errorf("-dir %q: mode %q is not octal", d, mode)
			}
		}
		p := strings.TrimPrefix(dst, "/")
		addParents(p)
		entries[p] = ociimage.File{Path: p, Mode: m, Dir: true}
	}
	paths := make([]string, 0, len(entries))
	for p := range entries {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	files := make([]ociimage.File, 0, len(paths))
	for _, p := range paths {
		files = append(files, entries[p])
	}
	if arch == "" {
		arch = "amd64"
	}
	return files, arch, nil
}

func hasEnv(env []string, name string) bool {
	for _, e := range env {
		if strings.HasPrefix(e, name+"=") {
			return true
		}
	}
	return false
}
