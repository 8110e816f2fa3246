package images

import (
	"bufio"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"

	"platform.example/vm-migration/test/framework"
)

// The machinery that takes Debian packages into an image without a
// container engine: packages are downloaded with the machine's apt
// (`apt-get download`, the versions of its apt lists) into the image
// cache, and unpacked with `dpkg-deb -x`; no maintainer script runs.

// debianDeps are a package's dependencies as apt-cache depends lists them:
// each group holds alternatives, the first installable one is taken.
type debianDeps map[string][][]string

// readDebianDeps lists the recursive Depends and Pre-Depends of pkgs.
func readDebianDeps(ctx context.Context, pkgs []string) (debianDeps, error) {
	args := append([]string{"depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts",
		"--no-breaks", "--no-replaces", "--no-enhances"}, pkgs...)
	out, err := exec.CommandContext(ctx, "apt-cache", args...).Output()
	if err != nil {
		return nil, fmt.Errorf("apt-cache depends %s (run apt-get update once on a fresh machine): %w", strings.Join(pkgs, " "), err)
	}
	deps := debianDeps{}
	var cur string
	alternative := false
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, " ") {
			cur, alternative = strings.TrimSpace(line), false
			continue
		}
		kind, name, ok := strings.Cut(strings.TrimSpace(line), ": ")
		if !ok || !strings.HasSuffix(kind, "Depends") {
			continue
		}
		name = strings.TrimSuffix(name, ":any")
		if alternative {
			last := len(deps[cur]) - 1
			deps[cur][last] = append(deps[cur][last], name)
		} else {
			deps[cur] = append(deps[cur], []string{name})
		}
		alternative = strings.HasPrefix(kind, "|")
	}
	return deps, nil
}

// isLibrary says whether a Debian package is a shared library package
// (Debian's policy names them lib*; zlib1g is the one exception here).
func isLibrary(pkg string) bool {
	return strings.HasPrefix(pkg, "lib") || pkg == "zlib1g"
}

// libraryClosure is roots and the libraries they need, recursively: the
// library dependencies of each root whose dependencies are followed
// (follow), and of each library taken. Virtual packages (<name>) are
// skipped for the first real alternative.
func libraryClosure(deps debianDeps, roots []string, follow map[string]bool) []string {
	seen := map[string]bool{}
	var queue []string
	for _, r := range roots {
		seen[r] = true
		if follow[r] {
			queue = append(queue, r)
		}
	}
	for len(queue) > 0 {
		pkg := queue[0]
		queue = queue[1:]
		for _, group := range deps[pkg] {
			i := slices.IndexFunc(group, func(n string) bool { return !strings.HasPrefix(n, "<") })
			if i < 0 || !isLibrary(group[i]) || seen[group[i]] {
				continue
			}
			seen[group[i]] = true
			queue = append(queue, group[i])
		}
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// downloadDebs downloads the candidate versions of pkgs into the image
// cache's debs folder, unless there already, and returns their files (in
// pkgs' order): the names carry the versions, so the list is a key of
// what an image holds.
func downloadDebs(ctx context.Context, pkgs []string) ([]string, error) {
	cache, err := framework.ImageCacheDir()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(cache, "debs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	args := append([]string{"download", "--print-uris"}, pkgs...)
	out, err := exec.CommandContext(ctx, "apt-get", args...).Output()
	if err != nil {
		return nil, fmt.Errorf("apt-get download --print-uris %s (run apt-get update once on a fresh machine): %w", strings.Join(pkgs, " "), err)
	}
	var files, missing []string
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		files = append(files, filepath.Join(dir, f[1]))
		if _, err := os.Stat(files[len(files)-1]); err != nil {
			missing = append(missing, strings.SplitN(f[1], "_", 2)[0])
		}
	}
	if len(files) != len(pkgs) {
		return nil, fmt.Errorf("apt-get download --print-uris named %d files for %d packages: %s", len(files), len(pkgs), out)
	}
	if len(missing) > 0 {
		unlock, err := lockDir(dir)
		if err != nil {
			return nil, err
		}
		defer unlock()
		get := exec.CommandContext(ctx, "apt-get", append([]string{"download"}, missing...)...)
		get.Dir = dir
		if b, err := get.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("apt-get download %s: %w: %s", strings.Join(missing, " "), err, b)
		}
	}
	return files, nil
}

// lockDir takes an exclusive lock on dir's .lock file (another test
// binary may download at the same time) and returns its release.
func lockDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	return func() { f.Close() }, nil
}

// extractDebs unpacks each package's files into root (dpkg-deb -x).
func extractDebs(ctx context.Context, debs []string, root string) error {
	for _, deb := range debs {
		if out, err := exec.CommandContext(ctx, "dpkg-deb", "-x", deb, root).CombinedOutput(); err != nil {
			return fmt.Errorf("extracting %s: %w: %s", deb, err, out)
		}
	}
	return nil
}

// libraryDirs are where the dynamic loader looks for libraries on Debian
// amd64.
var libraryDirs = []string{"lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "lib64", "lib", "usr/lib"}

// checkLinked checks that every shared library the ELF files (paths
// inside root) need, recursively, and their loader, are inside root.
func checkLinked(root string, files ...string) error {
	var missing []string
	seen := map[string]bool{}
	queue := slices.Clone(files)
	for len(queue) > 0 {
		rel := queue[0]
		queue = queue[1:]
		needed, err := elfNeeds(filepath.Join(root, rel))
		if err != nil {
			return err
		}
		for _, lib := range needed {
			if seen[lib] {
				continue
			}
			seen[lib] = true
			found := findLibrary(root, lib)
			if found == "" {
				missing = append(missing, lib+" (needed by /"+rel+")")
				continue
			}
			queue = append(queue, found)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("libraries missing from the image: %s", strings.Join(missing, ", "))
	}
	return nil
}

// elfNeeds are an ELF file's needed libraries and its loader.
func elfNeeds(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	defer f.Close()
	libs, err := f.ImportedLibraries()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			return nil, fmt.Errorf("reading %s's loader: %w", path, err)
		}
		libs = append(libs, strings.TrimRight(string(b), "\x00"))
	}
	return libs, nil
}

// findLibrary is a library's path inside root (a loader is named by its
// absolute path), following links within root, or "".
func findLibrary(root, lib string) string {
	candidates := []string{}
	if filepath.IsAbs(lib) {
		candidates = append(candidates, strings.TrimPrefix(lib, "/"))
	} else {
		for _, d := range libraryDirs {
			candidates = append(candidates, filepath.Join(d, lib))
		}
	}
	for _, c := range candidates {
		if resolved, err := resolveInRoot(root, c); err == nil {
			return resolved
		}
	}
	return ""
}

// resolveInRoot follows the links of rel as if root were /, and returns
// the path of the regular file it names.
func resolveInRoot(root, rel string) (string, error) {
	for range 16 {
		fi, err := os.Lstat(filepath.Join(root, rel))
		if err != nil {
			return "", err
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			return rel, nil
		}
		target, err := os.Readlink(filepath.Join(root, rel))
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) {
			rel = strings.TrimPrefix(target, "/")
		} else {
			rel = filepath.Join(filepath.Dir(rel), target)
		}
	}
	return "", errors.New("too many links")
}
