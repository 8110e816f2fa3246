package naming

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode"
)

// MaxNameLength is the longest name used for objects whose names end up in
// labels (Jobs put their name in a pod label) and DNS labels.
const MaxNameLength = 63

// Child returns "<parent>-<suffix>", shortened with a stable hash when longer
// than MaxNameLength so it stays a valid DNS-1123 label and never collides
// with the name of another parent.
func Child(parent string, suffix ...string) string {
	name := strings.Join(append([]string{parent}, suffix...), "-")
	if len(name) <= MaxNameLength {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	hash := hex.EncodeToString(sum[:])[:8]
	tail := strings.Join(suffix, "-")
	keep := MaxNameLength - len(tail) - len(hash) - 2
	if keep < 1 {
		return strings.TrimRight(name[:MaxNameLength-len(hash)-1], "-.") + "-" + hash
	}
	return strings.TrimRight(parent[:min(keep, len(parent))], "-.") + "-" + hash + "-" + tail
}

// StagingClaim is the staging PersistentVolumeClaim of one source disk.
func StagingClaim(migration string, diskKey int32) string {
	return Child(migration, "staging", fmt.Sprint(diskKey))
}

// TransferJob is the transfer Job of one attempt (attempts count from 1).
func TransferJob(migration string, attempt int32) string {
	return Child(migration, "transfer", fmt.Sprint(attempt))
}

// TransferSpecConfigMap holds the job spec of a transfer attempt.
func TransferSpecConfigMap(migration string, attempt int32) string {
	return Child(migration, "transfer", fmt.Sprint(attempt), "spec")
}

// TransferProgressConfigMap is the ConfigMap a transfer attempt reports
// its progress and result into.
func TransferProgressConfigMap(migration string, attempt int32) string {
	return Child(migration, "transfer", fmt.Sprint(attempt), "progress")
}

// TransferAccess names the ServiceAccount, Role and RoleBinding a transfer
// attempt runs under: the attempt's Job name.
func TransferAccess(migration string, attempt int32) string {
	return TransferJob(migration, attempt)
}

// ConversionJob is the conversion Job of one attempt.
func ConversionJob(migration string, attempt int32) string {
	return Child(migration, "convert", fmt.Sprint(attempt))
}

// ConversionConfigMap holds the rendered libvirt domain XML of one attempt.
func ConversionConfigMap(migration string, attempt int32) string {
	return Child(migration, "convert", fmt.Sprint(attempt), "domain")
}

// proofPrefix begins the names of the image proofs' objects, which are
// no migration's: a proof is shared by every migration of its key.
const proofPrefix = "vmm-proof"

// ProofJob is the Job that proves the image of one component (transfer
// or conversion) runs in a namespace for the pods of one shape (key, the
// proof key: a short hash of the pod's shape). Every migration of the
// namespace whose pods have that shape reads the same Job.
func ProofJob(component, key string) string {
	return Child(proofPrefix, component, key)
}

// ProofComponent is the component whose image the proof Job job proves
// (ProofJob), or "" for a Job that is no proof.
func ProofComponent(job string) string {
	rest, ok := strings.CutPrefix(job, proofPrefix+"-")
	if !ok {
		return ""
	}
	component, _, ok := strings.Cut(rest, "-")
	if !ok {
		return ""
	}
	return component
}

// ProofAccess is the ServiceAccount the transfer image's proof pod of key
// runs as, of the kind the transfer pods run as.
func ProofAccess(key string) string {
	return Child(proofPrefix, key)
}

// VerificationJob is the Job of one attempt at reading the target disks
// before the VM starts.
func VerificationJob(migration string, attempt int32) string {
	return Child(migration, "verify", fmt.Sprint(attempt))
}

// PlanConfigMap holds the dry-run plan of a migration with spec.planOnly.
func PlanConfigMap(migration string) string {
	return Child(migration, "plan")
}

// DataVolume is the target disk of the migrated VM at one position (0-based,
// in source order).
func DataVolume(targetVM string, index int) string {
	return Child(targetVM, "disk", fmt.Sprint(index))
}

// DiskName is the name of a disk (and its volume) inside the VM spec.
func DiskName(index int) string {
	return fmt.Sprintf("disk-%d", index)
}

// DNS1123Label turns a vSphere VM name into a valid DNS-1123 label: lower
// case, runs of other characters folded into one '-', trimmed, at most 63
// characters. A name with nothing usable gives "vm".
//
// Deprecated: use TargetName, which transliterates and keeps distinct
// sources distinct; DNS1123Label stays until its callers move.
func DNS1123Label(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		switch {
		case r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			b.WriteRune(r)
			dash = false
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
	}
	out := strings.Trim(b.String(), "-")
	if len(out) > MaxNameLength {
		out = strings.TrimRight(out[:MaxNameLength], "-")
	}
	if out == "" {
		return "vm"
	}
	return out
}
