package standins

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"platform.example/vm-migration/pkg/transfer/wire"
)

func TestTranslate(t *testing.T) {
	mounts := map[string]string{
		"/staging/2000":         "/local/pv-a",
		"/staging/20":           "/local/pv-b",
		"/etc/vm-transfer/spec": "/local/pod/spec",
		"/dev/termination-log":  "/local/pod/termination-log",
	}
	for in, want := range map[string]string{
		"/staging/2000/disk.img":               "/local/pv-a/disk.img",
		"/staging/20/disk.img":                 "/local/pv-b/disk.img",
		"/staging/2000":                        "/local/pv-a",
		"/dev/termination-log":                 "/local/pod/termination-log",
		"/etc/vm-transfer/spec/../spec/x.json": "/local/pod/spec/x.json",
	} {
		got, ok := translate(mounts, in)
		assert.True(t, ok, "translate(%s): the path is under a mount", in)
		assert.Equal(t, want, got, "translate(%s)", in)
	}
	got, ok := translate(mounts, "/staging/200/disk.img")
	assert.False(t, ok, "a path under no mount was translated to %s", got)
	args := translateArgs(mounts, []string{"--spec=/etc/vm-transfer/spec/t.json", "--parallel=2", "/staging/20/x", "--other=/nowhere"})
	want := []string{"--spec=/local/pod/spec/t.json", "--parallel=2", "/local/pv-b/x", "--other=/nowhere"}
	assert.Equal(t, want, args, "translateArgs: paths under a mount translated, the rest as given")
}

func TestWriteVolume(t *testing.T) {
	dir := t.TempDir()
	data := map[string][]byte{"username": []byte("u"), "password": []byte("p")}
	require.NoError(t, writeVolume(filepath.Join(dir, "all"), data, nil, 0o400), "writing every key")
	fi, err := os.Stat(filepath.Join(dir, "all", "password"))
	require.NoError(t, err, "the password file")
	require.Equal(t, os.FileMode(0o400), fi.Mode().Perm(), "the password file's mode is the volume's")
	items := []corev1.KeyToPath{{Key: "username", Path: "../../sub/user"}}
	require.NoError(t, writeVolume(filepath.Join(dir, "items"), data, items, 0o444), "writing the items")
	b, err := os.ReadFile(filepath.Join(dir, "items", "sub", "user"))
	if assert.NoError(t, err, "item not written inside the volume") {
		assert.Equal(t, "u", string(b), "the item's content")
	}
	_, err = os.Stat(filepath.Join(dir, "items", "password"))
	assert.True(t, os.IsNotExist(err), "a key not in items was written (stat: %v)", err)
	assert.Error(t, writeVolume(filepath.Join(dir, "bad"), data, []corev1.KeyToPath{{Key: "missing", Path: "m"}}, 0o444),
		"a missing key must be refused")
}

func TestLightTransfer(t *testing.T) {
	dir := t.TempDir()
	spec := `{"version":"v1","endpoint":{"url":"https://127.0.0.1:1/sdk"},"vmMoRef":"vm-1","disks":[
	{"key":2000,"fileName":"[ds] a/a.vmdk","capacityBytes":1073741824,"destination":"/staging/2000/disk.img"},
	{"key":2001,"fileName":"[ds] a/a_1.vmdk","capacityBytes":4096,"destination":"/staging/2001/disk.img"}]}`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "t.json"), []byte(spec), 0o444))
	mounts := map[string]string{"/etc/vm-transfer/spec": dir}
	pod := func(args ...string) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Args: args}}}}
	}

	code, msg := lightTransfer(pod("--spec=/etc/vm-transfer/spec/t.json", "--streams=2"), mounts)
	require.Zero(t, code, msg)
	res, err := wire.ParseResult([]byte(msg))
	require.NoError(t, err)
	assert.True(t, res.Succeeded)
	assert.Equal(t, []wire.DiskResult{
		{Key: 2000, Bytes: 1 << 30, SHA256: LightChecksum(2000)},
		{Key: 2001, Bytes: 4096, SHA256: LightChecksum(2001)},
	}, res.Disks)
	assert.Len(t, LightChecksum(2000), 64)
	assert.NotEqual(t, LightChecksum(2000), LightChecksum(2001))

	code, msg = lightTransfer(pod("--streams=2"), mounts)
	assert.NotZero(t, code)
	assert.Contains(t, msg, "no --spec")
	code, _ = lightTransfer(pod("--spec=/etc/vm-transfer/spec/missing.json"), mounts)
	assert.NotZero(t, code, "an unreadable spec fails the pod")
}
