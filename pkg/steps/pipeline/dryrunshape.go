package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/runtime"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// A wave applies hundreds of migrations whose objects differ only by the
// migration's own identifiers: its name and UID, the source VM's name,
// managed object reference and UUIDs, its disks' file names, its MACs and
// addresses. The API server judges those by their form (a name's length
// and characters), not by their value, so one dry run answers for all the
// objects of one shape in a namespace: the shape is the rendered objects
// with each identifier replaced by a placeholder that keeps its role,
// length and character classes. Everything else (sizes, storage classes,
// images, security contexts, resources) stays in the shape as rendered.

// minIdentityLength is the shortest identifier replaced by a placeholder:
// a shorter one would match inside unrelated values; left as it is, it
// only keeps its migration's shape its own.
const minIdentityLength = 4

// identity is one of a migration's own identifiers and its placeholder.
type identity struct {
	value, placeholder string
}

// identities are m's identifiers (inv its inventory), longest first so
// that a file name is replaced before the VM name inside it.
func identities(m *v1alpha1.VirtualMachineMigration, inv *v1alpha1.SourceInventory) []identity {
	var ids []identity
	var add func(role, value string)
	add = func(role, value string) {
		if len(value) < minIdentityLength {
			return
		}
		for _, id := range ids {
			if id.value == value {
				return
			}
		}
		ids = append(ids, identity{value: value, placeholder: fmt.Sprintf("\x00%s:%d:%s\x00", role, len(value), characterClasses(value))})
		// As rendered in lower case too (MACs and UUIDs in KubeVirt's
		// and libvirt's spelling, names as DNS labels).
		if lower := strings.ToLower(value); lower != value {
			add(role+".lower", lower)
		}
	}
	spec := m.SpecInForce()
	add("migration", m.Name)
	add("uid", string(m.UID))
	add("target", spec.Target.Name)
	add("vm", spec.Source.VM.Name)
	add("vm.path", spec.Source.VM.InventoryPath)
	add("vm.bios", spec.Source.VM.BIOSUUID)
	add("vm.instance", spec.Source.VM.InstanceUUID)
	add("vm.moref", spec.Source.VM.MoRef)
	if inv != nil {
		add("inv.name", inv.Name)
		add("inv.moref", inv.MoRef)
		add("inv.path", inv.InventoryPath)
		add("inv.bios", inv.BIOSUUID)
		if len(strings.ReplaceAll(inv.BIOSUUID, "-", "")) > 16 {
			add("inv.serial", vmwareSerial(inv.BIOSUUID))
		}
		add("inv.instance", inv.InstanceUUID)
		add("inv.host", inv.Host)
		add("inv.hostmoref", inv.HostMoRef)
		add("inv.hostuuid", inv.HostUUID)
		for i, d := range inv.Disks {
			add(fmt.Sprintf("disk%d.file", i), d.FileName)
		}
		for i, n := range inv.NICs {
			add(fmt.Sprintf("nic%d.mac", i), n.MAC)
			if n.Guest == nil {
				continue
			}
			for j, a := range n.Guest.IPAddresses {
				add(fmt.Sprintf("nic%d.ip%d", i, j), a.IP)
			}
		}
	}
	sort.SliceStable(ids, func(i, j int) bool { return len(ids[i].value) > len(ids[j].value) })
	return ids
}

// characterClasses is the form of s the API server's name rules read: each
// run of letters and digits as "x", any other character as itself, and
// whether s holds upper-case and lower-case letters ("web-01" is "x-x
// lower", a UUID "x-x-x-x-x lower", "00:50:56:AA:BB:01" "x:x:x:x:x:x upper").
func characterClasses(s string) string {
	var b strings.Builder
	var upper, lower, inRun bool
	for _, r := range s {
		alnum := unicode.IsLetter(r) || unicode.IsDigit(r)
		upper = upper || unicode.IsUpper(r)
		lower = lower || unicode.IsLower(r)
		switch {
		case alnum && !inRun:
			b.WriteByte('x')
		case !alnum:
			b.WriteRune(r)
		}
		inRun = alnum
	}
	if upper {
		b.WriteString(" upper")
	}
	if lower {
		b.WriteString(" lower")
	}
	return b.String()
}

// anonymize replaces each identifier in s by its placeholder.
func anonymize(s string, ids []identity) string {
	for _, id := range ids {
		s = strings.ReplaceAll(s, id.value, id.placeholder)
	}
	return s
}

// personalize puts ids' values in place of their placeholders in s.
func personalize(s string, ids []identity) string {
	if !strings.Contains(s, "\x00") {
		return s
	}
	for _, id := range ids {
		s = strings.ReplaceAll(s, id.placeholder, id.value)
	}
	return s
}

// dryRunShape identifies the shape of objs (ids the identifiers of the
// migration that renders them) in a phase: equal for two migrations whose
// objects differ only by their identifiers' values.
func dryRunShape(phase v1alpha1.Phase, objs []runtime.Object, ids []identity) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", phase)
	for _, o := range objs {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return "", fmt.Errorf("reading %s for its dry run's shape: %w", describeObject(o), err)
		}
		po := plannedObject(o)
		data, err := json.Marshal(anonymizeTree(u, ids))
		if err != nil {
			return "", fmt.Errorf("encoding %s for its dry run's shape: %w", describeObject(o), err)
		}
		fmt.Fprintf(h, "%s %s\n%s\n", po.APIVersion, po.Kind, data)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// anonymizeTree replaces the identifiers in the string values of an
// object's tree (not in its field names: one holding an identifier keeps
// the shape its migration's own).
func anonymizeTree(v any, ids []identity) any {
	switch t := v.(type) {
	case string:
		return anonymize(t, ids)
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = anonymizeTree(e, ids)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = anonymizeTree(e, ids)
		}
		return out
	default:
		return v
	}
}

// anonymizeAnswer is st with the identifiers of its objects' names and
// messages replaced by placeholders, to serve another migration.
func anonymizeAnswer(st v1alpha1.DryRunStatus, ids []identity) v1alpha1.DryRunStatus {
	return rewriteAnswer(st, func(s string) string { return anonymize(s, ids) })
}

// personalizeAnswer is an anonymized answer with ids' values back in its
// objects' names and messages.
func personalizeAnswer(st v1alpha1.DryRunStatus, ids []identity) v1alpha1.DryRunStatus {
	return rewriteAnswer(st, func(s string) string { return personalize(s, ids) })
}

// rewriteAnswer is a copy of st with rewrite applied to its objects' names
// and messages.
func rewriteAnswer(st v1alpha1.DryRunStatus, rewrite func(string) string) v1alpha1.DryRunStatus {
	out := *st.DeepCopy()
	for i := range out.Objects {
		out.Objects[i].Name = rewrite(out.Objects[i].Name)
		out.Objects[i].Message = rewrite(out.Objects[i].Message)
	}
	return out
}
