package preflight

import (
	"fmt"
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
}

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
