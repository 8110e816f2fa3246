package v1alpha1

// ConvertedSHA256 is the disk's converted checksum, "" while unknown.
func (d *DiskStatus) ConvertedSHA256() string {
	if d.Checksums == nil {
		return ""
	}
	return d.Checksums.Converted
}

// TargetSHA256 is the disk's target checksum, "" while unknown.
func (d *DiskStatus) TargetSHA256() string {
	if d.Checksums == nil {
		return ""
	}
	return d.Checksums.Target
}

// WrittenInPlace reports whether the disk's bytes go straight into the
// claim that becomes the VM's disk (the one-pass data path): its staging
// claim is its DataVolume's claim, which the DataVolume adopts, and no
// copy is made. A status that names a separate staging claim (recorded by
// a version before the one-pass path) imports by a CDI clone.
func (d *DiskStatus) WrittenInPlace() bool {
	return d.StagingClaim != "" && d.StagingClaim == d.DataVolume
}
