package standins

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestSparseCopy checks the clone's bytes, its holes and its throttle.
func TestSparseCopy(t *testing.T) {
	dir := t.TempDir()
	data := make([]byte, 4<<20)
	if _, err := rand.Read(data[:1<<20]); err != nil {
		t.Fatal(err)
	}
	copy(data[3<<20:], data[:1000]) // data after a zero run, then a zero tail
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var reported int64
	start := time.Now()
	if err := sparseCopy(context.Background(), src, dst, 8<<20, func(n int64) { reported += n }); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	got, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) || reported != int64(len(data)) {
		t.Fatalf("copy differs (reported %d bytes)", reported)
	}
	if took < 400*time.Millisecond || took > 2*time.Second {
		t.Errorf("4 MiB at 8 MiB/s took %s", took)
	}
}
