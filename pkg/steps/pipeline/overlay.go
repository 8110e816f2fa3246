package pipeline

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// The conversion writes nothing into a staged disk directly: virt-v2v
// converts a qcow2 overlay of each disk (in the pod's scratch space), whose
// backing file is the raw image (or the device) in the claim. Once it
// succeeded, the script maps what the overlay holds (qemu-img map: the
// clusters the conversion wrote, data or zeros), commits the overlay into
// the image and has vm-transfer tree-update re-hash only the blocks those
// clusters touch, in the image's block tree (ImageFile + TreeSuffix,
// written by the transfer): the converted tree is the transferred one with
// those leaves replaced, and the outage reads what the conversion wrote,
// not the whole disk again. vm-transfer comes from the transfer image,
// copied into the pod by an init container (the conversion image may be
// anybody's).

// Conversion pod layout of the overlays and the tools.
const (
	// DisksListKey holds, in the conversion ConfigMap, one line per disk:
	// "<name> <image> <overlay> <capacity bytes> <tree file|->".
	DisksListKey = "disks.list"
	// overlaysDir is where the overlays are made: the pod's scratch space.
	overlaysDir = conversionWorkDir + "/overlays"
	// ToolsContainer is the conversion pod's init container that copies
	// vm-transfer into toolsDir.
	ToolsContainer = "tools"
	// toolsDir is where the conversion container finds vm-transfer.
	toolsDir = "/vmm-tools"
	// TreeSuffix names a raw image's block tree beside it (disk.img.tree).
	TreeSuffix = ".tree"
)

// toolPath is vm-transfer's path in the conversion container.
var toolPath = path.Join(toolsDir, "vm-transfer")

// overlayPath is where the conversion pod makes a disk's overlay.
func overlayPath(diskName string) string { return path.Join(overlaysDir, diskName+".qcow2") }

// disksList is the DisksListKey file of m's disks: for each, its name, the
// image the transfer wrote (a file, or a device where blockClaims names its
// claim), its overlay, its capacity and its block tree file ("-" for a
// device: it has none; the script then hashes the whole device).
func disksList(m *v1alpha1.VirtualMachineMigration, blockClaims map[string]bool) (string, error) {
	var b strings.Builder
	for i, d := range m.Status.Disks {
		name := diskNameAt(d, i)
		block := blockClaims[d.StagingClaim]
		image, tree := stagedImage(name, block), stagedImage(name, false)+TreeSuffix
		if block {
			tree = "-"
		}
		if d.CapacityBytes <= 0 {
			return "", fmt.Errorf("disk %s has no capacity recorded", name)
		}
		fmt.Fprintf(&b, "%s %s %s %d %s\n", name, image, overlayPath(name), d.CapacityBytes, tree)
	}
	return b.String(), nil
}

// toolsInitContainer copies vm-transfer from the transfer image into the
// tools volume, for the conversion script's tree-update and checksum.
func toolsInitContainer(cfg Config) corev1.Container {
	command := cfg.TransferCommand
	if command == "" {
		command = DefaultTransferCommand
	}
	return corev1.Container{
		Name:            ToolsContainer,
		Image:           cfg.TransferImage,
		ImagePullPolicy: cfg.ImagePullPolicy,
		Command:         []string{command},
		Args:            []string{"install", toolsDir},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		},
		VolumeMounts:             []corev1.VolumeMount{{Name: "tools", MountPath: toolsDir}},
		TerminationMessagePath:   corev1.TerminationMessagePathDefault,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext:          restrictedContainer(),
	}
}

// toolsVolume is the scratch volume vm-transfer is copied into.
func toolsVolume() corev1.Volume {
	return corev1.Volume{Name: "tools", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
		SizeLimit: ptr.To(resource.MustParse("128Mi"))}}}
}

// toolsMount mounts the tools volume, read-only, in the conversion container.
func toolsMount() corev1.VolumeMount {
	return corev1.VolumeMount{Name: "tools", MountPath: toolsDir, ReadOnly: true}
}

// treeLinePrefix starts the conversion's line per converted disk:
// "tree <disk> <bytes> <root> <rehashed bytes>".
const treeLinePrefix = "tree "

// formatTreeLine is the line the script prints; kept here so that the
// parser's tests and the script say the same.
func formatTreeLine(disk string, bytes int64, root string, rehashed int64) string {
	return treeLinePrefix + disk + " " + strconv.FormatInt(bytes, 10) + " " + root + " " + strconv.FormatInt(rehashed, 10)
}
