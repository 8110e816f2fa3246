package standins

import (
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// The DataVolume rules of CDI v1.66's validating webhook that matter to
// the controller, each after the function of
// pkg/apiserver/webhooks/datavolume-validate.go (or util.go) that enforces
// it, with CDI's messages and fields. Not played: the per-source checks of
// import sources (http, s3, gcs, registry, imageio, vddk), the DataSource
// lookup behind spec.sourceRef, and the checks of externally populated
// volumes beyond their exclusion of a source.

// invalid is a FieldValueInvalid cause.
func invalid(path *field.Path, msg string) metav1.StatusCause {
	return metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid, Message: msg, Field: path.String()}
}

// dataVolumeSpecUnchanged: a DataVolume's spec never changes once created
// (Admit, on Update; the multi-stage import exception does not apply to
// clones).
func dataVolumeSpecUnchanged(old, cur *cdiv1.DataVolume) *metav1.StatusCause {
	if equality.Semantic.DeepEqual(old.Spec, cur.Spec) {
		return nil
	}
	return &metav1.StatusCause{
		Type: metav1.CauseTypeFieldValueDuplicate, Message: "Cannot update DataVolume Spec",
		Field: field.NewPath("DataVolume").Child("Spec").String(),
	}
}

// validateDataVolumeSpec is validateDataVolumeSpec: the first rule broken
// is the answer, as in CDI.
func validateDataVolumeSpec(path *field.Path, spec *cdiv1.DataVolumeSpec) []metav1.StatusCause {
	checks := []func(*field.Path, *cdiv1.DataVolumeSpec) *metav1.StatusCause{
		targetStorageDefined, storageSize, accessModes, externalPopulation, oneSourceOrRef,
		sourceRefNamed, numberOfSources, contentType, cloneSourceNamed,
	}
	for _, check := range checks {
		if c := check(path, spec); c != nil {
			return []metav1.StatusCause{*c}
		}
	}
	return nil
}

// targetStorageDefined: exactly one of spec.pvc and spec.storage.
func targetStorageDefined(path *field.Path, spec *cdiv1.DataVolumeSpec) *metav1.StatusCause {
	switch {
	case spec.PVC == nil && spec.Storage == nil:
		c := invalid(path.Child("PVC"), "Missing Data volume PVC")
		return &c
	case spec.PVC != nil && spec.Storage != nil:
		c := invalid(path.Child("PVC", "Storage"), "Duplicate storage definition, both target storage and target pvc defined")
		return &c
	}
	return nil
}

// isClone says whether the DataVolume copies an existing volume (a PVC or
// snapshot source, or a sourceRef): only then may spec.storage leave the
// size to CDI.
func isClone(spec *cdiv1.DataVolumeSpec) bool {
	return spec.SourceRef != nil || spec.Source != nil && (spec.Source.PVC != nil || spec.Source.Snapshot != nil)
}

// storageSize is validateStorageSize: a size, when given, is at least
// 1 MiB; it may be left out only with spec.storage on a clone (spec.pvc
// always needs one, even cloning).
func storageSize(path *field.Path, spec *cdiv1.DataVolumeSpec) *metav1.StatusCause {
	name, requests := "Storage", corev1.ResourceList(nil)
	if spec.PVC != nil {
		name, requests = "PVC", spec.PVC.Resources.Requests
	} else {
		requests = spec.Storage.Resources.Requests
	}
	sizePath := path.Child(name, "resources", "requests", "size")
	size, ok := requests[corev1.ResourceStorage]
	switch {
	case ok && (size.IsZero() || size.Sign() < 0):
		c := invalid(sizePath, name+" size can't be equal or less than zero")
		return &c
	case ok && size.Cmp(resource.MustParse("1Mi")) < 0:
		c := invalid(sizePath, name+" size should be at least 1MiB")
		return &c
	case !ok && (spec.Storage == nil || !isClone(spec)):
		c := invalid(sizePath, name+" size is missing")
		return &c
	}
	return nil
}

// validAccessMode lists the access modes CDI accepts.
var validAccessMode = map[corev1.PersistentVolumeAccessMode]bool{
	corev1.ReadWriteOnce: true, corev1.ReadOnlyMany: true, corev1.ReadWriteMany: true, corev1.ReadWriteOncePod: true,
}

// accessModes: spec.pvc has exactly one known access mode; spec.storage
// any number of known ones.
func accessModes(path *field.Path, spec *cdiv1.DataVolumeSpec) *metav1.StatusCause {
	modesPath := path.Child("PVC", "accessModes")
	modes := []corev1.PersistentVolumeAccessMode(nil)
	if spec.PVC != nil {
		modes = spec.PVC.AccessModes
		if len(modes) == 0 {
			c := invalid(modesPath, "Required value: at least 1 access mode is required")
			return &c
		}
		if len(modes) > 1 {
			c := invalid(modesPath, "PVC multiple accessModes")
			return &c
		}
	} else {
		modes = spec.Storage.AccessModes
	}
	for _, m := range modes {
		if !validAccessMode[m] {
			c := invalid(modesPath, fmt.Sprintf(`Unsupported value: "%s": supported values: "ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"`, modes[0]))
			return &c
		}
	}
	return nil
}

// externalPopulation is validateExternalPopulation, in part: a volume
// filled from dataSource or dataSourceRef takes no source.
func externalPopulation(path *field.Path, spec *cdiv1.DataVolumeSpec) *metav1.StatusCause {
	if externallyPopulated(spec) && (spec.Source != nil || spec.SourceRef != nil) {
		c := invalid(path.Child("source"), "External population is incompatible with Source and SourceRef")
		return &c
	}
	return nil
}

// externallyPopulated says whether no further source rule applies.
func externallyPopulated(spec *cdiv1.DataVolumeSpec) bool {
	return spec.PVC != nil && (spec.PVC.DataSource != nil || spec.PVC.DataSourceRef != nil) ||
		spec.Storage != nil && (spec.Storage.DataSource != nil || spec.Storage.DataSourceRef != nil)
}

// oneSourceOrRef: exactly one of spec.source and spec.sourceRef.
func oneSourceOrRef(path *field.Path, spec *cdiv1.DataVolumeSpec) *metav1.StatusCause {
	if externallyPopulated(spec) {
		return nil
	}
	if (spec.Source == nil) == (spec.SourceRef == nil) {
		c := invalid(path.Child("source"), "Data volume should have either Source or SourceRef, or be externally populated")
		return &c
	}
	return nil
}

// sourceRefNamed is validateSourceRef without its DataSource lookup: a
// kind, DataSource, and a name.
func sourceRefNamed(path *field.Path, spec *cdiv1.DataVolumeSpec) *metav1.StatusCause {
	ref := spec.SourceRef
	if ref == nil {
		return nil
	}
	var c metav1.StatusCause
	switch {
	case ref.Kind == "":
		c = invalid(path.Child("sourceRef", "Kind"), "Missing sourceRef kind")
	case ref.Kind != cdiv1.DataVolumeDataSource:
		c = invalid(path.Child("sourceRef", "Kind"), fmt.Sprintf("Unsupported sourceRef kind %s, currently only %s is supported", ref.Kind, cdiv1.DataVolumeDataSource))
	case ref.Name == "":
		c = invalid(path.Child("sourceRef", "Name"), "Missing sourceRef name")
	default:
		return nil
	}
	return &c
}

// numberOfSources is validateNumberOfSources (util.go): spec.source sets
// exactly one kind of source.
func numberOfSources(path *field.Path, spec *cdiv1.DataVolumeSpec) *metav1.StatusCause {
	if spec.Source == nil || externallyPopulated(spec) {
		return nil
	}
	n := 0
	v := reflect.ValueOf(spec.Source).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			n++
		}
	}
	switch {
	case n == 0:
		c := invalid(path.Child("source"), "Missing Data volume source")
		return &c
	case n > 1:
		c := invalid(path.Child("source"), "Multiple Data volume sources")
		return &c
	}
	return nil
}

// contentType is validateContentType (util.go): empty, kubevirt or archive.
func contentType(path *field.Path, spec *cdiv1.DataVolumeSpec) *metav1.StatusCause {
	switch spec.ContentType {
	case "", cdiv1.DataVolumeKubeVirt, cdiv1.DataVolumeArchive:
		return nil
	}
	c := invalid(path.Child("contentType"), fmt.Sprintf("ContentType not one of: %s, %s", cdiv1.DataVolumeKubeVirt, cdiv1.DataVolumeArchive))
	return &c
}

// cloneSourceNamed: a PVC source names both its namespace and its name.
func cloneSourceNamed(path *field.Path, spec *cdiv1.DataVolumeSpec) *metav1.StatusCause {
	if spec.Source == nil || spec.Source.PVC == nil || externallyPopulated(spec) {
		return nil
	}
	if spec.Source.PVC.Namespace == "" || spec.Source.PVC.Name == "" {
		p := path.Child("source", "PVC")
		c := invalid(p, p.String()+" source PVC is not valid")
		return &c
	}
	return nil
}
