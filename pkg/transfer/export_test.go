package transfer

// CheckpointedBytes is how many bytes of the image a disk's checkpoint
// names as written: its offset plus the pieces written past it (0 when
// there is no checkpoint).
func CheckpointedBytes(path string) (int64, error) {
	cp, err := loadCheckpoint(path)
	if err != nil || cp == nil {
		return 0, err
	}
	n := cp.Offset
	for _, r := range cp.Written {
		n += r.End - r.Start
	}
	return n, nil
}

// CheckpointComplete reports whether a disk's checkpoint records its image
// as whole, synced and hashed.
func CheckpointComplete(path string) (bool, error) {
	cp, err := loadCheckpoint(path)
	if err != nil || cp == nil {
		return false, err
	}
	return cp.Complete, nil
}
