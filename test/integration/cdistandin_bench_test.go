//go:build integration

package integration

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	cdiclient "platform.example/vm-migration/pkg/generated/cdi/clientset/versioned"
	"platform.example/vm-migration/pkg/steps/pipeline"
	"platform.example/vm-migration/test/framework"
	"platform.example/vm-migration/test/standins"
)

// cloneDiskMiB is the size of the disk the CDI stand-in imports in
// BenchmarkCDIStandinImport: the size issue 25 saw take 23 minutes.
const cloneDiskMiB = 320

// BenchmarkCDIStandinImport times the CDI stand-in's import of a 320 MiB
// disk (random bytes, nothing to skip) against the real API server: from
// the DataVolume's creation to its Succeeded phase, with the progress it
// writes on the way, beside a plain copy of the same file on the same
// disk (what "disk speed" means here).
//
//	TESTBIN_DIR=$PWD/_output/testbin go test -tags integration -run '^$' \
//	  -bench BenchmarkCDIStandinImport -benchtime 3x ./test/integration/
//
// CLONE_BYTES_PER_SECOND=4194304 throttles the stand-in as
// hack/run-local.sh does.
func BenchmarkCDIStandinImport(b *testing.B) {
	env := framework.Env(b)
	ns := env.Namespace(b)
	ctx := context.Background()
	cfg := standins.Config{RestConfig: env.Config(), Root: b.TempDir(), Namespace: ns, NodeName: "node-" + ns}
	// CLONE_BYTES_PER_SECOND throttles the clone as hack/run-local.sh does
	// (--clone-bytes-per-second).
	if v := os.Getenv("CLONE_BYTES_PER_SECOND"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		require.NoError(b, err, "CLONE_BYTES_PER_SECOND")
		cfg.CloneBytesPerSecond = n
	}
	runStandins(b, cfg)
	src := sourceClaim(b, env, cfg, ns)
	dir, err := standins.ClaimDir(ctx, cfg, ns, src)
	require.NoError(b, err)
	image := filepath.Join(dir, pipeline.ImageFile)
	plain := copyTime(b, image, filepath.Join(b.TempDir(), "copy.img"))

	cdi := cdiclient.NewForConfigOrDie(env.Config())
	b.ResetTimer()
	var total time.Duration
	for i := range b.N {
		dv := &cdiv1.DataVolume{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("clone-%d", i), Namespace: ns},
			Spec: cdiv1.DataVolumeSpec{
				Source:  &cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: ns, Name: src}},
				Storage: &cdiv1.StorageSpec{Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(fmt.Sprintf("%dMi", cloneDiskMiB+64))}}},
			},
		}
		start := time.Now()
		_, err := cdi.CdiV1beta1().DataVolumes(ns).Create(ctx, dv, metav1.CreateOptions{})
		require.NoError(b, err, "creating DataVolume %s", dv.Name)
		updates := waitDataVolume(b, cdi, ns, dv.Name)
		took := time.Since(start)
		total += took
		b.Logf("import %d: %s (%.0f MiB/s, %d status updates seen); a plain copy of the file: %s (%.0f MiB/s)",
			i+1, took.Round(time.Millisecond), cloneDiskMiB/took.Seconds(), updates, plain.Round(time.Millisecond), cloneDiskMiB/plain.Seconds())
	}
	b.ReportMetric(float64(cloneDiskMiB)/(total.Seconds()/float64(b.N)), "MiB/s")
	b.ReportMetric(float64(cloneDiskMiB)/plain.Seconds(), "copy-MiB/s")
}

// runStandins runs the stand-ins until the test ends.
func runStandins(t testing.TB, cfg standins.Config) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan error, 1)
	cfg.Ready = ready
	go func() { done <- standins.Run(ctx, cfg) }()
	t.Cleanup(func() {
		stop()
		assert.NoError(t, <-done, "the stand-ins returned an error")
	})
	select {
	case <-ready:
	case err := <-done:
		done <- err
		require.FailNow(t, fmt.Sprintf("the stand-ins stopped before they were ready: %v", err))
	}
}

// sourceClaim creates a bound claim holding a disk.img of cloneDiskMiB
// random bytes, as a transfer leaves a staging volume.
func sourceClaim(b *testing.B, env *framework.Environment, cfg standins.Config, ns string) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "staging", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(fmt.Sprintf("%dMi", cloneDiskMiB+64))}},
		},
	}
	_, err := env.Kubernetes(b).CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{})
	require.NoError(b, err, "creating the source claim")
	var dir string
	require.Eventually(b, func() bool {
		dir, err = standins.ClaimDir(ctx, cfg, ns, pvc.Name)
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "the source claim did not bind: %v", err)
	f, err := os.Create(filepath.Join(dir, pipeline.ImageFile))
	require.NoError(b, err)
	_, err = io.CopyN(f, rand.Reader, cloneDiskMiB<<20)
	require.NoError(b, err, "writing the source image")
	require.NoError(b, f.Close())
	return pvc.Name
}

// copyTime is how long a plain copy of src to dst takes, synced to disk.
func copyTime(b *testing.B, src, dst string) time.Duration {
	start := time.Now()
	in, err := os.Open(src)
	require.NoError(b, err)
	defer in.Close()
	out, err := os.Create(dst)
	require.NoError(b, err)
	_, err = io.Copy(out, in)
	require.NoError(b, err)
	require.NoError(b, out.Sync())
	require.NoError(b, out.Close())
	return time.Since(start)
}

// waitDataVolume waits for a DataVolume to succeed and returns how many
// distinct statuses it was seen in.
func waitDataVolume(b *testing.B, cdi cdiclient.Interface, ns, name string) int {
	seen := map[string]bool{}
	deadline := time.Now().Add(30 * time.Minute)
	for time.Now().Before(deadline) {
		dv, err := cdi.CdiV1beta1().DataVolumes(ns).Get(context.Background(), name, metav1.GetOptions{})
		require.NoError(b, err)
		seen[string(dv.Status.Phase)+" "+string(dv.Status.Progress)] = true
		switch dv.Status.Phase {
		case cdiv1.Succeeded:
			return len(seen)
		case cdiv1.Failed:
			require.FailNow(b, "the import failed", "%+v", dv.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.FailNow(b, "the import did not end within 30 minutes")
	return 0
}
