package wire

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// SpecVersion is the version of the job spec format this package reads.
// v2: a disk's checksum is the root of its block tree (Result.Scheme),
// written beside a file image (disk.img.tree) or where treeFile says.
const SpecVersion = "v2"

// JobSpec is what one run of the transfer command copies: the vSphere
// endpoint, the source VM and, per disk, where its bytes go. The controller
// renders it into a ConfigMap mounted in the transfer Job; a person can
// write one by hand. Credentials are never part of it.
type JobSpec struct {
	// Version of the format, SpecVersion.
	Version string `json:"version"`
	// Endpoint is the vCenter or ESXi SDK endpoint.
	Endpoint EndpointSpec `json:"endpoint"`
	// VMMoRef is the source VM's managed object reference value, for example vm-42.
	VMMoRef string `json:"vmMoRef"`
	// Disks to copy.
	Disks []DiskSpec `json:"disks"`
	// FullCopy reads every byte of every disk, even of a VM with changed
	// block tracking on, whose disks' allocated areas vSphere can map
	// (by default only those are read and the rest left as holes).
	// +optional
	FullCopy bool `json:"fullCopy,omitempty"`
}

// EndpointSpec names the vSphere endpoint.
type EndpointSpec struct {
	// URL of the SDK endpoint, for example https://vcenter.example.com/sdk.
	URL string `json:"url"`
	// Datacenter holding the VM; empty means the only one.
	Datacenter string `json:"datacenter,omitempty"`
	// InsecureSkipVerify turns off TLS verification (tests and labs only).
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
}

// DiskSpec is one disk to copy.
type DiskSpec struct {
	// Key is the disk's device key on the VM.
	Key int32 `json:"key"`
	// FileName is the disk's backing file, "[datastore] dir/vm.vmdk".
	FileName string `json:"fileName"`
	// CapacityBytes of the disk: the size of the image written.
	CapacityBytes int64 `json:"capacityBytes"`
	// Destination is a file path (the image, for example /staging/2000/disk.img)
	// or a raw block device path.
	Destination string `json:"destination"`
	// Checkpoint overrides where the resume checkpoint is kept. Empty means
	// ".<file>.checkpoint" next to a file destination, and no checkpoint
	// (no resume) for a block device.
	// +optional
	Checkpoint string `json:"checkpoint,omitempty"`
	// TreeFile is where the image's block tree file goes once the image
	// is complete (package blocktree). Empty means "<destination>.tree"
	// beside a file destination, and none for a block device.
	// +optional
	TreeFile string `json:"treeFile,omitempty"`
}

// LoadJobSpec reads a job spec, JSON or YAML, from a file and validates it.
// Unknown fields are rejected, so a typo does not go unnoticed.
func LoadJobSpec(path string) (*JobSpec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading job spec: %w", err)
	}
	return ParseJobSpec(data)
}

// ParseJobSpec decodes a job spec, JSON or YAML, and validates it.
func ParseJobSpec(data []byte) (*JobSpec, error) {
	var spec JobSpec
	if err := yaml.UnmarshalStrict(data, &spec); err != nil {
		return nil, fmt.Errorf("decoding job spec: %w", err)
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	return &spec, nil
}

// Validate checks the spec on its own, without looking at vSphere or the
// destinations: every problem is reported at once.
func (s *JobSpec) Validate() error {
	var errs []error
	if s.Version != SpecVersion {
		errs = append(errs, fmt.Errorf("version is %q, want %q", s.Version, SpecVersion))
	}
	if !strings.HasPrefix(s.Endpoint.URL, "https://") && !strings.HasPrefix(s.Endpoint.URL, "http://") {
		errs = append(errs, fmt.Errorf("endpoint.url %q is not an http(s) URL", s.Endpoint.URL))
	}
	if s.VMMoRef == "" {
		errs = append(errs, errors.New("vmMoRef is empty"))
	}
	if len(s.Disks) == 0 {
		errs = append(errs, errors.New("disks is empty"))
	}
	keys := map[int32]bool{}
	dests := map[string]bool{}
	trees := map[string]bool{}
	for i, d := range s.Disks {
		where := fmt.Sprintf("disks[%d] (key %d)", i, d.Key)
		if keys[d.Key] {
			errs = append(errs, fmt.Errorf("%s: duplicate key", where))
		}
		keys[d.Key] = true
		if _, err := ParseDatastorePath(d.FileName); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
		}
		if d.CapacityBytes <= 0 || d.CapacityBytes%SectorSize != 0 {
			errs = append(errs, fmt.Errorf("%s: capacityBytes %d is not a positive multiple of %d", where, d.CapacityBytes, SectorSize))
		}
		if !filepath.IsAbs(d.Destination) {
			errs = append(errs, fmt.Errorf("%s: destination %q is not an absolute path", where, d.Destination))
		}
		clean := filepath.Clean(d.Destination)
		if dests[clean] {
			errs = append(errs, fmt.Errorf("%s: destination %q used twice", where, d.Destination))
		}
		dests[clean] = true
		if d.Checkpoint != "" && !filepath.IsAbs(d.Checkpoint) {
			errs = append(errs, fmt.Errorf("%s: checkpoint %q is not an absolute path", where, d.Checkpoint))
		}
		if d.TreeFile != "" && !filepath.IsAbs(d.TreeFile) {
			errs = append(errs, fmt.Errorf("%s: treeFile %q is not an absolute path", where, d.TreeFile))
		}
		if tree := filepath.Clean(d.TreeFile); d.TreeFile != "" {
			if trees[tree] {
				errs = append(errs, fmt.Errorf("%s: treeFile %q used twice", where, d.TreeFile))
			}
			trees[tree] = true
		}
	}
	for i, d := range s.Disks {
		if d.TreeFile != "" && dests[filepath.Clean(d.TreeFile)] {
			errs = append(errs, fmt.Errorf("disks[%d] (key %d): treeFile %q is a destination", i, d.Key, d.TreeFile))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid job spec: %w", err)
	}
	return nil
}
