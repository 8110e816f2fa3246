package standins

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func TestTranslateText(t *testing.T) {
	mounts := map[string]string{
		"/etc/virt-v2v":        "/pods/p/volumes/config",
		"/tmp":                 "/pods/p/volumes/tmp",
		"/var/tmp":             "/pods/p/volumes/var-tmp",
		"/mnt/disks/disk-0":    "/volumes/pv-1",
		"/dev/termination-log": "/pods/p/termination-log",
	}
	script := `events=/var/tmp/virt-v2v-events.json
virt-v2v-in-place --machine-readable=file:"$events" -i libvirtxml /etc/virt-v2v/domain.xml "$@" 2>&1
grep -F x "$events" 2>/dev/null
} >/dev/termination-log
exec /bin/sh -c 'cat /tmp/x'
`
	want := `events=/pods/p/volumes/var-tmp/virt-v2v-events.json
virt-v2v-in-place --machine-readable=file:"$events" -i libvirtxml /pods/p/volumes/config/domain.xml "$@" 2>&1
grep -F x "$events" 2>/dev/null
} >/pods/p/termination-log
exec /bin/sh -c 'cat /pods/p/volumes/tmp/x'
`
	assert.Equal(t, want, translateText(mounts, script), "the conversion script with the pod's paths on the node")
	xml := `<source file="/mnt/disks/disk-0/disk.img"></source><source file='/mnt/disks/disk-10/disk.img'/>`
	wantXML := `<source file="/volumes/pv-1/disk.img"></source><source file='/mnt/disks/disk-10/disk.img'/>`
	assert.Equal(t, wantXML, translateText(mounts, xml), "the domain XML: disk-0 translated, disk-10 under no mount")
	assert.Equal(t, "/pods/p/volumes/var-tmp", translateText(mounts, "/var/tmp"), "a HOME value that is a mount itself")
}

func TestPodIdentity(t *testing.T) {
	pod := func(psc *corev1.PodSecurityContext, sc *corev1.SecurityContext, limits corev1.ResourceList) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{SecurityContext: psc, Containers: []corev1.Container{{
			SecurityContext: sc, Resources: corev1.ResourceRequirements{Limits: limits}}}}}
	}
	tests := map[string]struct {
		pod     *corev1.Pod
		want    identity
		wantErr bool
	}{
		"pod level, fsGroup, kvm": {
			pod: pod(&corev1.PodSecurityContext{RunAsUser: ptr.To[int64](107), RunAsGroup: ptr.To[int64](107), FSGroup: ptr.To[int64](107)}, nil,
				corev1.ResourceList{"devices.kubevirt.io/kvm": resource.MustParse("1")}),
			want: identity{uid: 107, gid: 107, fsGroup: 107, kvm: true},
		},
		"container overrides, group defaults to the user": {
			pod:  pod(&corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1)}, &corev1.SecurityContext{RunAsUser: ptr.To[int64](2000)}, nil),
			want: identity{uid: 2000, gid: 2000, fsGroup: -1},
		},
		"root":    {pod: pod(&corev1.PodSecurityContext{RunAsUser: ptr.To[int64](0)}, nil, nil), wantErr: true},
		"no user": {pod: pod(nil, nil, nil), wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := podIdentity(tc.pod)
			if tc.wantErr {
				assert.Error(t, err, "podIdentity must refuse (got %+v)", got)
				return
			}
			assert.NoError(t, err, "podIdentity")
			assert.Equal(t, tc.want, got, "the identity the conversion runs as")
		})
	}
}

func TestApplyFSGroupAndReachable(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("changing group ownership needs root")
	}
	root := t.TempDir()
	vol := filepath.Join(root, "volumes", "pv-1")
	require.NoError(t, os.MkdirAll(vol, 0o755), "making the volume")
	img := filepath.Join(vol, "disk.img")
	require.NoError(t, os.WriteFile(img, []byte("x"), 0o644), "writing disk.img")
	id := identity{uid: 107, gid: 107, fsGroup: 107}
	require.NoError(t, applyFSGroup(vol, id), "applyFSGroup")
	fi, err := os.Stat(img)
	require.NoError(t, err, "disk.img")
	assert.Equal(t, uint32(107), fi.Sys().(*syscall.Stat_t).Gid, "disk.img belongs to the fsGroup")
	assert.Equal(t, os.FileMode(0o664), fi.Mode().Perm(), "disk.img is group-writable")
	require.NoError(t, os.Chmod(root, 0o700), "closing the volume's parent")
	assert.ErrorContains(t, reachable(vol, id), "cannot reach", "a volume under a 0700 directory is not reachable")
	// t.TempDir's own parent is 0700 too: open both.
	for _, d := range []string{filepath.Dir(root), root} {
		require.NoError(t, os.Chmod(d, 0o755), "opening %s", d)
	}
	assert.NoError(t, reachable(vol, id), "a volume under open directories is reachable")
}

// TestWaitStoppable: a process group whose leader ignores SIGTERM and a
// child that left the group are all gone once the context ends.
func TestWaitStoppable(t *testing.T) {
	defer func(g time.Duration) { conversionStopGrace = g }(conversionStopGrace)
	conversionStopGrace = time.Second
	pidFile := filepath.Join(t.TempDir(), "pid")
	cmd := exec.Command("/bin/sh", "-c", `trap '' TERM; setsid sleep 300 & echo $! >`+pidFile+`; sleep 300 & wait`)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start(), "starting the process group")
	ctx, cancel := context.WithCancel(context.Background())
	var escaped int
	for range 50 {
		if data, err := os.ReadFile(pidFile); err == nil && len(data) > 1 {
			escaped, _ = strconv.Atoi(strings.TrimSpace(string(data)))
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.NotZero(t, escaped, "the escaping child never started")
	cancel()
	start := time.Now()
	code := waitStoppable(ctx, cmd, conversionStopGrace, nil)
	assert.Equal(t, 128+int32(syscall.SIGKILL), code, "the exit code is SIGKILL's: the leader ignored SIGTERM")
	assert.LessOrEqual(t, time.Since(start), 10*time.Second, "stopping took too long")
	time.Sleep(200 * time.Millisecond)
	if alive(escaped) {
		_ = syscall.Kill(escaped, syscall.SIGKILL)
		assert.Fail(t, "the child that left the process group survived")
	}
}

// alive says a process exists and is not a zombie waiting for its reaper.
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}
