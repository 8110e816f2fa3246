package transfer

import (
	"os"
	"path/filepath"
)

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

// writeFileSynced is WriteFileAtomic made durable: the data is synced
// before the rename and the directory after it, so once it returns a crash
// of the node leaves the new document, and a crash before leaves the old
// one, never a truncated one.
func writeFileSynced(path string, data []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(path))
}
