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
