package standins

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	cdifake "platform.example/vm-migration/pkg/generated/cdi/clientset/versioned/fake"
)

// TestSparseCopy checks the clone's bytes, its holes and its throttle.
func TestSparseCopy(t *testing.T) {
	dir := t.TempDir()
	data := make([]byte, 4<<20)
	_, err := rand.Read(data[:1<<20])
	require.NoError(t, err, "filling the source with random bytes")
	copy(data[3<<20:], data[:1000]) // data after a zero run, then a zero tail
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	require.NoError(t, os.WriteFile(src, data, 0o644), "writing the source")
	var reported int64
	start := time.Now()
	require.NoError(t, sparseCopy(context.Background(), src, dst, 8<<20, func(n int64) { reported += n }), "sparseCopy")
	took := time.Since(start)
	got, err := os.ReadFile(dst)
	require.NoError(t, err, "reading the clone")
	assert.True(t, bytes.Equal(got, data), "the clone differs from the source")
	assert.Equal(t, int64(len(data)), reported, "the progress reported is every byte of the source")
	assert.GreaterOrEqual(t, took, 400*time.Millisecond, "4 MiB at 8 MiB/s took %s: the throttle did not hold", took)
	assert.LessOrEqual(t, took, 2*time.Second, "4 MiB at 8 MiB/s took %s", took)
}

// TestCloneNotHeldUpByProgressWrites: the clone's copy goes on while its
// progress writes hang (a busy API server), and the DataVolume succeeds
// once they return (issue 25: the copy waited for each progress write, and
// an import of 320 MiB took many times a plain copy on a busy machine).
func TestCloneNotHeldUpByProgressWrites(t *testing.T) {
	ctx := context.Background()
	dv := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Name: "disk-0", Namespace: "apps", UID: "dv-uid"}}
	client := cdifake.NewSimpleClientset(dv)
	release := make(chan struct{})
	var held atomic.Int32
	client.PrependReactor("update", "datavolumes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if u, ok := a.(k8stesting.UpdateAction); ok && a.GetSubresource() == "status" {
			if got, ok := u.GetObject().(*cdiv1.DataVolume); ok && got.Status.Phase == cdiv1.CloneInProgress && got.Status.Progress != "0.00%" {
				held.Add(1)
				<-release
			}
		}
		return false, nil, nil
	})
	d := &CDI{c: &clients{cdi: client, events: &record.FakeRecorder{}}}

	src, dst := t.TempDir(), t.TempDir()
	data := make([]byte, 96<<20)
	_, err := rand.Read(data)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(src, "disk.img"), data, 0o644))
	// Slow the copy so that a progress write starts before it ends.
	d.cfg.CloneBytesPerSecond = 64 << 20

	finished := make(chan struct{})
	go func() { d.clone(ctx, dv, src, dst); close(finished) }()
	require.Eventually(t, func() bool {
		info, err := os.Stat(filepath.Join(dst, "disk.img"))
		return err == nil && info.Size() == int64(len(data))
	}, 30*time.Second, 20*time.Millisecond, "the copy did not end while its progress write hung")
	assert.Positive(t, held.Load(), "no progress write was held")
	close(release)
	<-finished
	got, err := client.CdiV1beta1().DataVolumes("apps").Get(ctx, "disk-0", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, cdiv1.Succeeded, got.Status.Phase)
	copied, err := os.ReadFile(filepath.Join(dst, "disk.img"))
	require.NoError(t, err)
	assert.True(t, bytes.Equal(data, copied), "the clone differs from the source")
}
