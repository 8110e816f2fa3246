package transfer

import "os"

// WriteFileAtomic replaces path with data: written to path+".tmp" in the
// same directory, then renamed over it, so a reader never sees half a
// document. One writer per path; a temporary left by a crash is
// overwritten by the next write.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, perm); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}
