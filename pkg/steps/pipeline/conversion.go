package pipeline

import (
	"encoding/xml"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/untrusted"
)

// Conversion Job layout.
const (
	// ConversionContainer is the conversion Job's container name.
	ConversionContainer = "convert"
	// DomainXMLKey holds the libvirt domain XML in the conversion ConfigMap.
	DomainXMLKey = "domain.xml"
	// ConvertScriptKey holds the script the conversion container runs.
	ConvertScriptKey = "convert.sh"
	// conversionConfigDir is where the ConfigMap is mounted, disksRoot where
	// the staging volumes are (disksRoot/<disk name>, or the device
	// disksRoot/<disk name>.dev of a claim in Block volume mode),
	// conversionWorkDir the writable scratch space of libguestfs.
	conversionConfigDir = "/etc/virt-v2v"
	disksRoot           = "/mnt/disks"
	conversionWorkDir   = "/var/tmp"
	// KVMResource is the KubeVirt device plugin's /dev/kvm resource.
	KVMResource corev1.ResourceName = "devices.kubevirt.io/kvm"
)

// domainXML is the subset of a libvirt domain virt-v2v's libvirtxml input reads.
type domainXML struct {
	XMLName xml.Name    `xml:"domain"`
	Type    string      `xml:"type,attr"`
	Name    string      `xml:"name"`
	UUID    string      `xml:"uuid,omitempty"`
	Memory  xmlQuantity `xml:"memory"`
	VCPU    int32       `xml:"vcpu"`
	CPU     domainCPU   `xml:"cpu"`
	OS      domainOS    `xml:"os"`
	Devices struct {
		Disks      []diskXML      `xml:"disk"`
		Interfaces []interfaceXML `xml:"interface"`
	} `xml:"devices"`
}

type xmlQuantity struct {
	Unit  string `xml:"unit,attr"`
	Value int64  `xml:",chardata"`
}

type domainCPU struct {
	Topology struct {
		Sockets int32 `xml:"sockets,attr"`
		Cores   int32 `xml:"cores,attr"`
		Threads int32 `xml:"threads,attr"`
	} `xml:"topology"`
}

type domainOS struct {
	Firmware     string          `xml:"firmware,attr,omitempty"`
	Type         osType          `xml:"type"`
	FirmwareInfo *osFirmwareInfo `xml:"firmware,omitempty"`
}

type osType struct {
	Arch  string `xml:"arch,attr"`
	Value string `xml:",chardata"`
}

type osFirmwareInfo struct {
	Features []osFirmwareFeature `xml:"feature"`
}

type osFirmwareFeature struct {
	Enabled string `xml:"enabled,attr"`
	Name    string `xml:"name,attr"`
}

type diskXML struct {
	Type   string `xml:"type,attr"`
	Device string `xml:"device,attr"`
	Driver struct {
		Name string `xml:"name,attr"`
		Type string `xml:"type,attr"`
	} `xml:"driver"`
	Source struct {
		File string `xml:"file,attr,omitempty"`
		Dev  string `xml:"dev,attr,omitempty"`
	} `xml:"source"`
	Target struct {
		Dev string `xml:"dev,attr"`
		Bus string `xml:"bus,attr"`
	} `xml:"target"`
}

// stagedImage is where the conversion pod sees a disk's image: the file
// at the root of its staging volume, or, for a claim in Block volume
// mode, the claim's device.
func stagedImage(diskName string, block bool) string {
	if block {
		return path.Join(disksRoot, diskName+".dev")
	}
	return path.Join(disksRoot, diskName, ImageFile)
}

// diskNameAt is a disk's name in the VM: the one in status, or the deterministic one.
func diskNameAt(d v1alpha1.DiskStatus, i int) string {
	if d.Name != "" {
		return d.Name
	}
	return naming.DiskName(i)
}

// RenderDomainXML renders the libvirt domain virt-v2v-in-place converts:
// the source VM's name, UUID, memory (KiB), vCPUs and topology, firmware
// (<os firmware='efi'> with the secure-boot feature when the source has
// it), one raw disk per staged disk, in source order (a file disk, or a
// block disk on the claim's device when blockClaims names its staging
// claim: Block volume mode; nil means every claim is Filesystem), and one
// interface per source NIC with its MAC address, network and model. A
// disk's target keeps the source bus (ide as hdX, sata as sdX on sata, the
// rest as sdX on scsi) so that virt-v2v maps the guest's device names right.
func RenderDomainXML(m *v1alpha1.VirtualMachineMigration, blockClaims map[string]bool) ([]byte, error) {
	inv := m.Status.Source
	if inv == nil {
		return nil, errors.New("the source VM is not inventoried yet (status.source)")
	}
	if len(m.Status.Disks) == 0 {
		return nil, errors.New("no disks recorded in status.disks yet")
	}
	sockets, cores, err := topology(inv)
	if err != nil {
		return nil, err
	}
	if inv.MemoryMiB <= 0 {
		return nil, fmt.Errorf("the inventory has no memory size (%d MiB)", inv.MemoryMiB)
	}
	dom := domainXML{
		Type:   "kvm",
		Name:   inv.Name,
		Memory: xmlQuantity{Unit: "KiB", Value: inv.MemoryMiB * 1024},
		VCPU:   sockets * cores,
		OS:     domainOS{Type: osType{Arch: "x86_64", Value: "hvm"}},
	}
	if dom.Name == "" {
		dom.Name = m.Name
	}
	if u, ok := canonicalUUID(inv.BIOSUUID); ok {
		dom.UUID = u
	}
	dom.CPU.Topology.Sockets, dom.CPU.Topology.Cores, dom.CPU.Topology.Threads = sockets, cores, 1
	if err := setDomainFirmware(&dom.OS, inv); err != nil {
		return nil, err
	}
	if err := sourceText("status.source.name", inv.Name, maxSourceName); err != nil {
		return nil, err
	}
	dom.Devices.Disks = domainDisks(inv, m.Status.Disks, blockClaims)
	if dom.Devices.Interfaces, err = domainInterfaces(inv); err != nil {
		return nil, err
	}
	out, err := xml.MarshalIndent(dom, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding the domain XML: %w", err)
	}
	return append(out, '\n'), nil
}

// setDomainFirmware selects the domain's firmware as the source's: BIOS, or EFI
// with the secure-boot feature when the source has it.
func setDomainFirmware(o *domainOS, inv *v1alpha1.SourceInventory) error {
	switch inv.Firmware {
	case v1alpha1.FirmwareEFI:
		o.Firmware = "efi"
		if inv.SecureBoot {
			o.FirmwareInfo = &osFirmwareInfo{Features: []osFirmwareFeature{{Enabled: "yes", Name: "secure-boot"}}}
		}
	case v1alpha1.FirmwareBIOS, "":
	default:
		return fmt.Errorf("unsupported firmware %q", inv.Firmware)
	}
	return nil
}

// domainDisks are the staged disks as raw disks in source order (file
// disks, block disks for the claims blockClaims names), each on the
// source's bus: ide as hdX, sata as sdX on sata, the rest as sdX on scsi.
func domainDisks(inv *v1alpha1.SourceInventory, disks []v1alpha1.DiskStatus, blockClaims map[string]bool) []diskXML {
	var out []diskXML
	var sd, hd int
	for i, d := range disks {
		// virt-v2v converts the disk's overlay (overlay.go), whose
		// backing file is the staged image or device.
		var x diskXML
		x.Device = "disk"
		x.Driver.Name, x.Driver.Type = "qemu", "qcow2"
		x.Type, x.Source.File = "file", overlayPath(diskNameAt(d, i))
		bus := "scsi"
		if src := sourceDisk(inv, d.Key); src != nil {
			switch strings.ToLower(src.ControllerType) {
			case "ide":
				bus = "ide"
			case "sata":
				bus = "sata"
			}
		}
		if bus == "ide" {
			x.Target.Dev, x.Target.Bus = "hd"+driveLetters(hd), bus
			hd++
		} else {
			x.Target.Dev, x.Target.Bus = "sd"+driveLetters(sd), bus
			sd++
		}
		out = append(out, x)
	}
	return out
}

// driveLetters is the letter suffix of the n-th drive: a..z, aa..zz, ...
func driveLetters(n int) string {
	s := ""
	for n++; n > 0; n = (n - 1) / 26 {
		s = string(rune('a'+(n-1)%26)) + s
	}
	return s
}

// topology is the source's sockets and cores per socket.
func topology(inv *v1alpha1.SourceInventory) (int32, int32, error) {
	sockets, cores := inv.CPU.Sockets, inv.CPU.CoresPerSocket
	if cores < 1 {
		cores = 1
	}
	if sockets < 1 {
		return 0, 0, fmt.Errorf("the inventory has no CPU topology (%d sockets)", sockets)
	}
	return sockets, cores, nil
}

// convertScriptTemplate is the script the conversion container runs
// (@WORK@, @CONFIG@, @DOMAIN@ and @TERM@ stand for the work directory,
// the ConfigMap's directory, the domain XML and the termination message
// file). It makes each disk's qcow2 overlay (disks.list, overlay.go),
// runs virt-v2v-in-place on the domain (whose disks are the overlays),
// with the extra arguments of virt-v2v.args (a Windows guest's static
// addresses); once the conversion succeeded, it looks up (and pins) the
// guest's interface names (network.conf, guest-network.sh: guestfish runs
// the script inside the guest, on the overlays too), then, disk by disk,
// maps what the overlay holds, commits it into the image and re-hashes
// the blocks it touched in the image's block tree (vm-transfer
// tree-update; a device, which has no tree file, is hashed whole by
// vm-transfer checksum), for the first maxConvertedChecksums disks (the
// verification Job reads the others). A failure to commit fails the
// conversion: the image may hold part of it. It leaves, as the
// container's termination message, what observeConversion reads back:
//
//   - on success, first the converted disks' block-tree roots
//     ("tree <disk> <bytes> <root> <bytes re-hashed>"), then the guest
//     network script's lines ("nic <mac> ..."), then the inspected guest: virt-v2v's inspection document
//     (-O) where the installed virt-v2v has -O (it came after 2.2), else
//     the inspection lines (i_distro = debian...) that virt-v2v prints
//     only in its -v output;
//   - on failure, virt-v2v's errors as its --machine-readable JSON lines
//     ({ "message": ..., "type": "error" }), after the inspection lines
//     when inspection got that far; where virt-v2v printed none (an
//     option refused, a crash), its error text. An empty message lets
//     the kubelet fall back to the end of the log;
//   - then, after a "# virt-v2v warnings" line, virt-v2v's warnings as
//     its JSON lines (the first 8): last, as the kubelet keeps only the
//     first 4 KiB of the message, and never alone after a failure, which
//     would keep the kubelet from falling back to the log.
//
// The whole output goes to the container log as virt-v2v prints it, after
// the accelerator script's line (acceleratorScriptTemplate). A pod
// being deleted gets SIGTERM, which virt-v2v does not act on during a long
// step: the trap ends the whole process group (virt-v2v, nbdkit, the
// appliance's qemu) at once.
const convertScriptTemplate = `#!/bin/sh
# Rendered by the VM migration controller: converts the staged disks in
# place with virt-v2v-in-place and leaves the inspected guest (or, on
# failure, virt-v2v's errors) as the container's termination message.
set -u
# KVM or TCG (accelerator.sh beside this script, in the same ConfigMap).
accelerator="$(dirname "$0")/` + AcceleratorScriptKey + `"
if [ -r "$accelerator" ]; then . "$accelerator"; fi
events=@WORK@/virt-v2v-events.json
log=@WORK@/virt-v2v.log
inspection=@WORK@/inspection.xml
status=@WORK@/virt-v2v.status
checksums=@WORK@/checksums
nics=@WORK@/nics
rm -f "$events" "$log" "$inspection" "$status" "$checksums" "$nics"
rm -rf @OVERLAYS@

# make_overlays makes each disk's qcow2 overlay, backed by the staged image
# or device: virt-v2v converts the overlays, and what they hold is what
# the conversion wrote.
make_overlays() {
  [ -r @CONFIG@/@DISKS@ ] || return 0
  mkdir -p @OVERLAYS@ || return 1
  while read -r name image overlay size tree; do
    qemu-img create -q -f qcow2 -F raw -b "$image" "$overlay" "$size" ||
      { echo "conversion: making the overlay of $name over $image failed"; return 1; }
  done <@CONFIG@/@DISKS@
}
if ! make_overlays >@WORK@/overlays.log 2>&1; then
  cat @WORK@/overlays.log
  tail -n 5 @WORK@/overlays.log >@TERM@
  exit 1
fi

# -O writes an inspection document; virt-v2v 2.2 has no -O and prints the
# inspection only with -v.
if virt-v2v-in-place --machine-readable 2>/dev/null | grep -qx output-xml-option ||
  virt-v2v-in-place --help 2>/dev/null | grep -Eq '^ +-O '; then
  set -- -O "$inspection"
else
  set -- -v
fi
# A Windows guest's static addresses (--mac MAC:ip:...), one per line.
if [ -r @CONFIG@/@ARGS@ ]; then
  while IFS= read -r arg; do
    [ -z "$arg" ] || set -- "$@" "$arg"
  done <@CONFIG@/@ARGS@
fi

# disks lists the domain's disks: its file disks' images, its block disks'
# devices.
disks() {
  sed -n -e "s/.*<source file=[\"']\([^\"']*\)[\"'].*/\1/p" \
    -e "s/.*<source dev=[\"']\([^\"']*\)[\"'].*/\1/p" @DOMAIN@
}

# guest_network runs the guest network script inside the converted guest
# (guestfish) and keeps its "nic" lines; where it cannot, says why per NIC.
guest_network() {
  [ -s @CONFIG@/@NETCONF@ ] || return 0
  why=''
  if command -v guestfish >/dev/null 2>&1; then
    set --
    for disk in $(disks); do set -- "$@" --format=qcow2 -a "$disk"; done
    guestfish --rw "$@" -i >@WORK@/guest-network.out 2>@WORK@/guest-network.log <<GUESTFISH
mkdir-p /tmp
upload @CONFIG@/@NETCONF@ /tmp/vm-migration-network.conf
upload @CONFIG@/@NETSCRIPT@ /tmp/vm-migration-network.sh
sh "/bin/sh /tmp/vm-migration-network.sh /tmp/vm-migration-network.conf"
rm-f /tmp/vm-migration-network.sh
rm-f /tmp/vm-migration-network.conf
GUESTFISH
    if [ $? -eq 0 ]; then
      grep '^nic ' @WORK@/guest-network.out >"$nics"
      return 0
    fi
    cat @WORK@/guest-network.log
    why="guestfish could not look into the guest: $(grep -v '^ *$' @WORK@/guest-network.log | tail -n 1 | cut -c1-160)"
  else
    why="the conversion image has no guestfish to look into the guest"
  fi
  sed -n 's/^nic \([^ ]*\) .*/\1/p' @CONFIG@/@NETCONF@ | while read -r mac; do
    echo "nic $mac - - unreadable - $why"
  done >"$nics"
}

# field reads a number or a hex string of vm-transfer's JSON line.
field() { sed -n "s/.*\"$1\": *\"\{0,1\}\([0-9a-f]*\).*/\1/p"; }

# commit_overlays, disk by disk: maps what the overlay holds (the clusters
# the conversion wrote), commits it into the image, and re-hashes the
# blocks it touched in the image's block tree (a device, without a tree
# file, is hashed whole); the first @MAXSUMS@ disks' roots go to
# $checksums. Any failure fails the conversion: the image may hold part
# of the overlay.
commit_overlays() {
  [ -r @CONFIG@/@DISKS@ ] || return 0
  i=0
  while read -r name image overlay size tree; do
    map=@OVERLAYS@/$name.map.json
    qemu-img map --output=json "$overlay" >"$map" ||
      { echo "conversion: mapping the overlay of $name failed"; return 1; }
    qemu-img commit -q -d "$overlay" ||
      { echo "conversion: committing the overlay of $name into $image failed"; return 1; }
    rm -f "$overlay"
    [ "$i" -lt @MAXSUMS@ ] || continue
    i=$((i + 1))
    [ -x @TOOL@ ] || continue
    if [ "$tree" != "-" ] && [ -f "$tree" ]; then
      out=$(@TOOL@ tree-update --image "$image" --tree "$tree" --qemu-img-map "$map" --size "$size") ||
        { echo "conversion: re-hashing the blocks the conversion wrote in $name failed"; return 1; }
      rehashed=$(echo "$out" | field bytesRehashed)
    else
      set --
      [ "$tree" = "-" ] || set -- --tree-out "$tree"
      out=$(@TOOL@ checksum --json "$@" "$image" "$size") ||
        { echo "conversion: hashing the converted $name failed"; return 1; }
      rehashed=$size
    fi
    echo "tree $name $size $(echo "$out" | field root) $rehashed" >>"$checksums"
  done <@CONFIG@/@DISKS@
}

trap 'trap - TERM INT; kill -KILL 0' TERM INT
{
  virt-v2v-in-place --machine-readable=file:"$events" -i libvirtxml @DOMAIN@ "$@" 2>&1
  echo $? >"$status"
} | tee "$log" &
wait $!
rc=$(cat "$status" 2>/dev/null || echo 1)
if [ "$rc" -eq 0 ]; then
  guest_network
  if ! commit_overlays >@WORK@/commit.log 2>&1; then
    cat @WORK@/commit.log
    rc=1
  fi
fi

{
  if [ "$rc" -eq 0 ]; then
    cat "$checksums" "$nics" 2>/dev/null
  fi
  if [ "$rc" -eq 0 ] && [ -s "$inspection" ]; then
    cat "$inspection"
  else
    grep -E '^i_(type|distro|osinfo|arch|major_version|minor_version|product_name|firmware) = ' "$log"
    if [ "$rc" -ne 0 ]; then
      grep -h '^conversion: ' @WORK@/commit.log 2>/dev/null ||
        grep -F '"type": "error"' "$events" 2>/dev/null ||
        sed -n '/^virt-v2v-in-place: error: /,/^If reporting bugs/p' "$log" | grep -v '^If reporting bugs'
    fi
  fi
} >@TERM@
if { [ "$rc" -eq 0 ] || [ -s @TERM@ ]; } && grep -qF '"type": "warning"' "$events" 2>/dev/null; then
  {
    echo '@WARNINGS@'
    grep -F '"type": "warning"' "$events" | sed 8q
  } >>@TERM@
fi
exit "$rc"
`

// convertScript is convertScriptTemplate with the pod's paths.
var convertScript = convertScriptReplacer(conversionWorkDir, conversionConfigDir, corev1.TerminationMessagePathDefault, toolPath).Replace(convertScriptTemplate)

// maxConvertedChecksums is how many disks the conversion hashes: their
// lines ("tree disk-N <bytes> <root> <bytes>", about 100 bytes each) come
// first in the termination message, whose 4 KiB must keep room for the
// NICs, the inspection and the warnings. The verification Job reads the
// disks beyond.
const maxConvertedChecksums = 24

// convertScriptReplacer fills convertScriptTemplate's placeholders: the
// work directory, the ConfigMap's, the termination message file and
// vm-transfer's path.
func convertScriptReplacer(work, config, term, tool string) *strings.Replacer {
	return strings.NewReplacer(
		"@WORK@", work,
		"@CONFIG@", config,
		"@DOMAIN@", path.Join(config, DomainXMLKey),
		"@TERM@", term,
		"@WARNINGS@", warningsHeading,
		"@ARGS@", V2VArgsKey,
		"@NETCONF@", NetworkConfKey,
		"@NETSCRIPT@", GuestNetworkScriptKey,
		"@MAXSUMS@", strconv.Itoa(maxConvertedChecksums),
		"@OVERLAYS@", path.Join(work, path.Base(overlaysDir)),
		"@DISKS@", DisksListKey,
		"@TOOL@", tool,
	)
}

// RenderConversionConfigMap renders the ConfigMap of a conversion attempt:
// the domain XML, the script that runs virt-v2v-in-place on it, the
// script that picks its accelerator and, where the guest's network
// identity asks for them, the NICs to look up in the guest with the
// script that does (network.conf, guest-network.sh) and virt-v2v's extra
// arguments (virt-v2v.args). blockClaims names the claims in Block volume
// mode (RenderDomainXML).
func RenderConversionConfigMap(m *v1alpha1.VirtualMachineMigration, attempt int32, blockClaims map[string]bool) (*corev1.ConfigMap, error) {
	dom, err := RenderDomainXML(m, blockClaims)
	if err != nil {
		return nil, err
	}
	list, err := disksList(m, blockClaims)
	if err != nil {
		return nil, err
	}
	data := map[string]string{DomainXMLKey: string(dom), ConvertScriptKey: convertScript, AcceleratorScriptKey: acceleratorScript, DisksListKey: list}
	conf, err := networkConf(m)
	if err == nil {
		err = checkLineFields(NetworkConfKey, conf)
	}
	if err != nil {
		return nil, fmt.Errorf("rendering network.conf: %w", err)
	}
	if conf != "" {
		data[NetworkConfKey], data[GuestNetworkScriptKey] = conf, guestNetworkScript
	}
	args, err := v2vArgs(m)
	if err == nil {
		err = checkArguments(args)
	}
	if err != nil {
		return nil, fmt.Errorf("rendering virt-v2v's arguments: %w", err)
	}
	if len(args) > 0 {
		data[V2VArgsKey] = strings.Join(args, "\n") + "\n"
	}
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: childMeta(m, naming.ConversionConfigMap(m.Name, attempt), v1alpha1.ComponentConversion, true),
		Data:       data,
	}, nil
}

// Bounds of what vSphere names, as the renderers take it: a VM name with
// escaped characters runs to hundreds of bytes, a datastore path to more.
const (
	maxSourceName = 1024
	maxSourcePath = 4096
	maxSourceID   = 128
)

// sourceText checks a value vSphere gave (status.source) that goes into
// a structured document, where a space separates nothing: untrusted.Text.
func sourceText(field, value string, max int) error {
	return untrusted.Refuse("vSphere's "+field, value, untrusted.Text(value, max))
}

// sourceField checks an identifier vSphere gave (a reference, a UUID)
// that is written whole: untrusted.Field; an empty one passes (it is left out).
func sourceField(field, value string) error {
	if value == "" {
		return nil
	}
	return untrusted.Refuse("vSphere's "+field, value, untrusted.Field(value, maxSourceID))
}

// maxConversionField bounds one field of network.conf or one argument
// of virt-v2v.args (a --mac with its addresses is under 200 bytes).
const maxConversionField = 512

// checkLineFields checks, as the last word before a line-oriented file
// of the conversion is written, that each of its space-separated fields
// is an untrusted.Field: whatever came from the guest cannot have added
// a field or a line.
func checkLineFields(file, text string) error {
	for n, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if text == "" {
			break
		}
		for _, f := range strings.Split(line, " ") {
			if err := untrusted.Field(f, maxConversionField); err != nil {
				return untrusted.Refuse(fmt.Sprintf("a field of line %d of %s", n+1, file), f, err)
			}
		}
	}
	return nil
}

// checkArguments checks that each argument virt-v2v.args lists is an
// untrusted.Field: the conversion script reads one argument per line.
func checkArguments(args []string) error {
	for i, a := range args {
		if err := untrusted.Field(a, maxConversionField); err != nil {
			return untrusted.Refuse(fmt.Sprintf("virt-v2v argument %d", i+1), a, err)
		}
	}
	return nil
}

// DefaultConversionApplianceMiB is libguestfs' appliance memory
// (LIBGUESTFS_MEMSIZE), libguestfs' own default; virt-v2v gives its helper
// VM twice that (2.5 GiB).
const DefaultConversionApplianceMiB = 1280

// DefaultConversionResources are the conversion container's requests and
// limits: room for the helper VM (twice DefaultConversionApplianceMiB, two
// vCPUs under TCG) beside qemu's own overhead, virt-v2v and nbdkit.
func DefaultConversionResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("3Gi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("4Gi")},
	}
}

// RenderConversionJob renders the conversion Job of an attempt:
// virt-v2v-in-place over the staging volumes, from the domain XML of the
// attempt's ConfigMap, with spec.conversion.image or the configured default.
// A claim blockClaims names (Block volume mode) is attached as a device,
// where the domain XML's block disk has it; the others are mounted.
//
// What the pod needs, and why it asks for no more:
//   - uid/gid 107 and fsGroup 107 (StagingUID; Config.PodIdentity), non-root:
//     the user virt-v2v images run as, and the owner of the images the
//     transfer wrote, which the conversion rewrites in place. Nothing in
//     virt-v2v-in-place needs root. A block device is not the fsGroup's:
//     the runtime must give it to the pod's user, as it does KubeVirt's
//     non-root launcher. Where the platform assigns the ids
//     (OpenShift), PodIdentity leaves them to it: every pod of the
//     namespace then gets the same uid and fsGroup.
//   - the pull secrets of the migration and of the controller (PullSecrets).
//   - no privilege escalation, every capability dropped, no service account
//     token, a read-only root file system: libguestfs runs its appliance
//     as an unprivileged qemu and writes only to /tmp and /var/tmp
//     (emptyDirs) and to the staging volumes.
//   - seccomp RuntimeDefault, unless Config.ConversionSeccompProfile says
//     otherwise: where the image's libguestfs networks its appliance with
//     passt, passt calls unshare(CLONE_NEWUSER), which RuntimeDefault
//     refuses; a Localhost profile that allows it is then the least to ask
//     (never Unconfined). A container runtime's default AppArmor profile may
//     also interfere (unconfirmed).
//   - /dev/kvm is optional and TCG the default: with
//     Config.ConversionRuntimeClass the pod runs under a RuntimeClass that
//     offers /dev/kvm (a test node's, mode 0666), with Config.ConversionKVM
//     it requests devices.kubevirt.io/kvm: 1 (KubeVirt's device plugin; the
//     device keeps the node's mode and owner, so uid 107 can use it where
//     the node's /dev/kvm is 0666, as udev makes it on most distributions,
//     or where the runtime gives devices the pod's user). Either way the
//     accelerator script (acceleratorScriptTemplate) uses KVM only after
//     the appliance booted under it, and the log says which ran.
//   - LIBGUESTFS_BACKEND=direct: no libvirt daemon in the pod; libguestfs
//     keeps its sockets and the appliance's snapshot in /tmp and, where
//     the image has no fixed appliance, builds one in /var/tmp.
//     LIBGUESTFS_MEMSIZE: the appliance's memory, which the memory limit
//     must hold twice (virt-v2v doubles it) with room to spare.
//   - FallbackToLogsOnError: the script writes the inspected guest, or
//     virt-v2v's errors, as the termination message (convertScriptTemplate);
//     where it could write none, the end of the log becomes the message
//     ReadJob classifies.
func RenderConversionJob(m *v1alpha1.VirtualMachineMigration, attempt int32, cfg Config, blockClaims map[string]bool) (*batchv1.Job, error) {
	spec := m.SpecInForce()
	image := spec.Conversion.Image
	if image == "" {
		image = cfg.ConversionImage
	}
	if image == "" {
		return nil, errors.New("no conversion image: set spec.conversion.image or configure a default")
	}
	if len(m.Status.Disks) == 0 {
		return nil, errors.New("no disks recorded in status.disks yet")
	}
	resources := ConversionResources(cfg)
	timeout := cfg.ConversionTimeout
	if timeout <= 0 {
		timeout = DefaultConversionTimeout
	}
	volumes, mounts, devices := conversionVolumes(m, attempt, blockClaims)
	meta, podMeta := jobMeta(m, naming.ConversionJob(m.Name, attempt), v1alpha1.ComponentConversion)
	if cfg.TransferImage == "" {
		return nil, errors.New("no transfer image: the conversion takes vm-transfer from it")
	}
	return runOnce(meta, podMeta, timeout, corev1.PodSpec{
		AutomountServiceAccountToken: ptr.To(false),
		SecurityContext:              stagingPodSecurity(cfg, cfg.ConversionSeccompProfile),
		ImagePullSecrets:             PullSecrets(m, cfg),
		RuntimeClassName:             runtimeClass(cfg.ConversionRuntimeClass),
		InitContainers:               []corev1.Container{toolsInitContainer(cfg)},
		Containers: []corev1.Container{{
			Name:                     ConversionContainer,
			Image:                    image,
			ImagePullPolicy:          cfg.ImagePullPolicy,
			Command:                  []string{"/bin/sh", path.Join(conversionConfigDir, ConvertScriptKey)},
			Env:                      conversionEnv(cfg),
			Resources:                resources,
			VolumeMounts:             mounts,
			VolumeDevices:            devices,
			TerminationMessagePath:   corev1.TerminationMessagePathDefault,
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			SecurityContext:          restrictedContainer(),
		}},
		Volumes: volumes,
	}), nil
}

// conversionEnv is the conversion container's environment: libguestfs
// without libvirt, its appliance memory, HOME on the writable /var/tmp,
// and whether KVM was offered (for the accelerator script).
func conversionEnv(cfg Config) []corev1.EnvVar {
	memsize := cfg.ConversionApplianceMiB
	if memsize <= 0 {
		memsize = DefaultConversionApplianceMiB
	}
	kvm := KVMOff
	if kvmOffered(cfg) {
		kvm = KVMProbe
	}
	return []corev1.EnvVar{
		{Name: "LIBGUESTFS_BACKEND", Value: "direct"},
		{Name: "LIBGUESTFS_MEMSIZE", Value: strconv.FormatInt(memsize, 10)},
		{Name: "HOME", Value: conversionWorkDir},
		{Name: KVMEnv, Value: kvm},
	}
}

// runtimeClass is a pod's runtimeClassName: nil for the cluster's default.
func runtimeClass(name string) *string {
	if name == "" {
		return nil
	}
	return &name
}

// ConversionResources are the conversion container's requests and limits:
// the configured ones or the defaults, with /dev/kvm when configured. The
// controller sizes its conversion slots from them (--max-conversions=auto).
func ConversionResources(cfg Config) corev1.ResourceRequirements {
	resources := DefaultConversionResources()
	if cfg.ConversionResources != nil {
		resources = *cfg.ConversionResources.DeepCopy()
	}
	if cfg.ConversionKVM {
		if resources.Limits == nil {
			resources.Limits = corev1.ResourceList{}
		}
		resources.Limits[KVMResource] = resource.MustParse("1")
	}
	return resources
}

// conversionVolumes are the conversion pod's volumes and the container's
// mounts and devices: the script and domain XML, scratch space, and each
// staged disk (a device where blockClaims names its claim).
func conversionVolumes(m *v1alpha1.VirtualMachineMigration, attempt int32, blockClaims map[string]bool) ([]corev1.Volume, []corev1.VolumeMount, []corev1.VolumeDevice) {
	cmName := naming.ConversionConfigMap(m.Name, attempt)
	volumes := []corev1.Volume{
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: cmName}, DefaultMode: ptr.To[int32](0o444)}}},
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("1Gi"))}}},
		{Name: "var-tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("8Gi"))}}},
		toolsVolume(),
	}
	mounts := []corev1.VolumeMount{
		{Name: "config", MountPath: conversionConfigDir, ReadOnly: true},
		{Name: "tmp", MountPath: "/tmp"},
		{Name: "var-tmp", MountPath: conversionWorkDir},
		toolsMount(),
	}
	var devices []corev1.VolumeDevice
	for i, d := range m.Status.Disks {
		vol := stagingVolumeName(d.Key)
		volumes = append(volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: d.StagingClaim}}})
		if blockClaims[d.StagingClaim] {
			devices = append(devices, corev1.VolumeDevice{Name: vol, DevicePath: stagedImage(diskNameAt(d, i), true)})
		} else {
			mounts = append(mounts, corev1.VolumeMount{Name: vol, MountPath: path.Join(disksRoot, diskNameAt(d, i))})
		}
	}
	return volumes, mounts, devices
}
