package preflight

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// ReasonStorageProfileIncomplete: a disk goes to a storage class whose CDI
// StorageProfile names no claim properties (no access modes: CDI does not
// know its provisioner and nobody set them), and its storage mapping names
// no access modes either. CDI then refuses to create the target claim
// ("cannot get access mode from StorageProfile ...") and the import would
// wait, after the source was stopped, until someone fixed the profile.
const ReasonStorageProfileIncomplete = "StorageProfileIncomplete"

// StorageProfileFact is what CDI's StorageProfile of one storage class
// says.
type StorageProfileFact struct {
	// Provisioner is the class's provisioner, as the profile records it.
	Provisioner string
	// ClaimPropertySets is how many claim property sets (access modes and
	// volume mode) the profile gives, its spec's or, without them, those
	// CDI knows of the provisioner (its status).
	ClaimPropertySets int
	// AccessModes and VolumeMode are the first of those sets: what CDI
	// gives a claim of the class when a DataVolume names neither.
	AccessModes []corev1.PersistentVolumeAccessMode
	VolumeMode  *corev1.PersistentVolumeMode
	// Sets are all of those claim property sets, in order: the volume
	// modes and access modes the class's claims can have, as far as CDI
	// knows its provisioner or the profile's spec says.
	Sets []ClaimProperties
}

// ClaimProperties are one claim property set of a StorageProfile.
type ClaimProperties struct {
	AccessModes []corev1.PersistentVolumeAccessMode
	// VolumeMode is nil where the set names none (Filesystem).
	VolumeMode *corev1.PersistentVolumeMode
}

// ReasonStorageModeUnsupported: a disk's storage mapping asks for a
// volume mode or access modes its storage class's CDI StorageProfile
// does not list (Block on a class whose provisioner makes only
// Filesystem volumes): the target claim would stay Pending once the
// source is stopped.
const ReasonStorageModeUnsupported = "StorageModeUnsupported"

// storageProfiles blocks a migration whose disks CDI could not place: the
// class's StorageProfile gives no access modes and the mapping none. A
// class without a profile, or profiles the controller could not read (no
// CDI, no permission), is not judged.
func (c *checker) storageProfiles() {
	if c.cluster.StorageProfiles == nil {
		return
	}
	uses := map[string][]string{}
	var order []string
	for _, d := range c.inv.Disks {
		t, where, _ := c.storageTarget(d)
		if len(t.AccessModes) > 0 {
			continue
		}
		class := t.StorageClassName
		if class == "" {
			class, where = c.cluster.DefaultStorageClass, "the cluster's default storage class"
		}
		p, ok := c.cluster.StorageProfiles[class]
		if class == "" || !ok || p.ClaimPropertySets > 0 {
			continue
		}
		if _, seen := uses[class]; !seen {
			order = append(order, class)
		}
		uses[class] = append(uses[class], fmt.Sprintf("disk %d (%s)", d.Key, where))
	}
	for _, class := range order {
		verb := "go"
		if len(uses[class]) == 1 {
			verb = "goes"
		}
		c.add(blocking(ReasonStorageProfileIncomplete, fmt.Sprintf(
			"%s %s to storage class %s, whose CDI StorageProfile names no access modes (CDI does not know its provisioner %s), and the mapping names none: "+
				"CDI would not create the target claims (\"cannot get access mode from StorageProfile %s\") once the source is stopped; "+
				"set the access modes and volume mode in the storage mapping, or the class's claim property sets: "+
				"kubectl patch storageprofile %s --type merge -p '{\"spec\":{\"claimPropertySets\":[{\"accessModes\":[\"ReadWriteOnce\"],\"volumeMode\":\"Filesystem\"}]}}'",
			strings.Join(uses[class], ", "), verb, class, orUnknown(c.cluster.StorageProfiles[class].Provisioner), class, class)))
	}
}

// storageModes blocks a migration whose storage mapping asks a class for
// a volume mode or access modes its StorageProfile lists in none of its
// claim property sets (what the mapping leaves open comes from the first
// set, as the target claims' defaults take it): the provisioner would
// refuse the claim after the stop ("does not support block volume
// provisioning"). A class without a profile, or a profile without sets
// (StorageProfileIncomplete), is not judged here.
func (c *checker) storageModes() {
	if c.cluster.StorageProfiles == nil {
		return
	}
	for _, d := range c.inv.Disks {
		t, where, _ := c.storageTarget(d)
		if len(t.AccessModes) == 0 && t.VolumeMode == nil {
			continue
		}
		class := t.StorageClassName
		if class == "" {
			class = c.cluster.DefaultStorageClass
		}
		p, ok := c.cluster.StorageProfiles[class]
		if class == "" || !ok || len(p.Sets) == 0 {
			continue
		}
		mode, modes := volumeMode(t.VolumeMode, p.VolumeMode), t.AccessModes
		if len(modes) == 0 {
			modes = p.AccessModes
		}
		if p.offers(mode, modes) {
			continue
		}
		c.add(blocking(ReasonStorageModeUnsupported, fmt.Sprintf(
			"disk %d (%s) asks storage class %s for a %s volume %s, which its CDI StorageProfile does not list (it lists %s; provisioner %s): "+
				"the target claim would stay Pending once the source is stopped; map the disk to a class that offers it, or ask for what the class lists "+
				"(if the provisioner does make such volumes, add the set to the profile: kubectl edit storageprofile %s, spec.claimPropertySets)",
			d.Key, where, class, mode, accessModesText(modes), setsText(p.Sets), orUnknown(p.Provisioner), class)))
	}
}

// volumeMode is the mode asked for, else the profile's first, else
// Filesystem.
func volumeMode(asked, profile *corev1.PersistentVolumeMode) corev1.PersistentVolumeMode {
	switch {
	case asked != nil:
		return *asked
	case profile != nil:
		return *profile
	}
	return corev1.PersistentVolumeFilesystem
}

// offers reports whether one of the profile's sets has the volume mode and
// every one of the access modes.
func (p StorageProfileFact) offers(mode corev1.PersistentVolumeMode, modes []corev1.PersistentVolumeAccessMode) bool {
	for _, set := range p.Sets {
		if volumeMode(set.VolumeMode, nil) != mode {
			continue
		}
		all := true
		for _, m := range modes {
			all = all && slices.Contains(set.AccessModes, m)
		}
		if all {
			return true
		}
	}
	return false
}

// accessModesText names access modes: "with access ReadWriteOnce", or "".
func accessModesText(modes []corev1.PersistentVolumeAccessMode) string {
	if len(modes) == 0 {
		return ""
	}
	names := make([]string, len(modes))
	for i, m := range modes {
		names[i] = string(m)
	}
	return "with access " + strings.Join(names, ", ")
}

// setsText names a profile's sets: "Filesystem ReadWriteOnce; Block ReadWriteMany".
func setsText(sets []ClaimProperties) string {
	parts := make([]string, 0, len(sets))
	for _, s := range sets {
		part := string(volumeMode(s.VolumeMode, nil))
		if text := accessModesText(s.AccessModes); text != "" {
			part += " " + strings.TrimPrefix(text, "with access ")
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}
