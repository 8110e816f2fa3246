package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/transfer/wire"
)

// converted marks m's disks converted, but for those listed by index.
func converted(m *v1alpha1.VirtualMachineMigration, except ...int) *v1alpha1.VirtualMachineMigration {
	for i := range m.Status.Disks {
		m.Status.Disks[i].Checksums = &v1alpha1.DiskChecksums{Converted: fmt.Sprintf("%064x", i)}
		for _, e := range except {
			if e == i {
				m.Status.Disks[i].Checksums = nil
			}
		}
	}
	return m
}

// TestVerificationJobGolden: the Job as rendered for the Windows fixture,
// its first disk's claim in Block mode, its last disk's converted
// checksum unknown (read from its staging claim too).
func TestVerificationJobGolden(t *testing.T) {
	m := converted(windowsEFI(), 2)
	job, err := RenderVerificationJob(m, 2, testConfig, map[string]bool{m.Status.Disks[0].DataVolume: true})
	require.NoError(t, err)
	golden(t, "windows-efi-verification", toYAML(t, job))
	c := job.Spec.Template.Spec.Containers[0]
	assert.Equal(t, []string{"hash", "--termination-log=/dev/termination-log",
		"target/disk-0=/verify/target/disk-0.dev:85899345920",
		"target/disk-1=/verify/target/disk-1/disk.img:536874057728",
		"target/disk-2=/verify/target/disk-2/disk.img:10737418240",
		"staged/disk-2=/verify/staged/disk-2/disk.img:10737418240"}, c.Args)
	for _, v := range job.Spec.Template.Spec.Volumes {
		assert.True(t, v.PersistentVolumeClaim.ReadOnly, "volume %s is mounted read-only", v.Name)
	}
}

// TestVerificationJobContainers: at most wire.MaxHashImages images per
// container, so each termination message holds its whole result.
func TestVerificationJobContainers(t *testing.T) {
	m := windowsEFI()
	var disks []v1alpha1.DiskStatus
	for i := range 30 {
		d := m.Status.Disks[0]
		d.Key, d.Name = int32(2000+i), naming.DiskName(i)
		d.DataVolume, d.StagingClaim = naming.DataVolume("sql-02", i), naming.StagingClaim(m.Name, d.Key)
		disks = append(disks, d)
	}
	m.Status.Disks = disks
	converted(m, 29)
	job, err := RenderVerificationJob(m, 1, testConfig, nil)
	require.NoError(t, err)
	cs := job.Spec.Template.Spec.Containers
	require.Len(t, cs, 3, "31 images: 12, 12 and 7")
	assert.Equal(t, []string{"verify", "verify-1", "verify-2"}, []string{cs[0].Name, cs[1].Name, cs[2].Name})
	assert.Len(t, cs[0].Args, 2+wire.MaxHashImages)
	assert.Len(t, cs[2].Args, 2+7)
	assert.Len(t, job.Spec.Template.Spec.Volumes, 31)
}

// verifyPod is a pod of job whose containers ended with these messages.
func verifyPod(job *batchv1.Job, messages ...string) corev1.Pod {
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-abcde"}, Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}
	for i, msg := range messages {
		exit := int32(0)
		if strings.Contains(msg, `"error"`) {
			exit = 1
		}
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{Name: verifyContainerName(i),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Message: msg}}})
	}
	return pod
}

func hashMessage(t *testing.T, images ...wire.ImageHash) string {
	t.Helper()
	data, err := json.Marshal(wire.HashResult{Kind: wire.KindHash, Images: images})
	require.NoError(t, err)
	return string(data)
}

func TestObserveVerificationJob(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "sql-02-verify-1"}, Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "verify"}, {Name: "verify-1"}}}}}}
	complete := job.DeepCopy()
	complete.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	failed := job.DeepCopy()
	failed.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"}}
	first := hashMessage(t, wire.ImageHash{Name: "target/disk-0", Bytes: 1 << 30, Size: 1<<30 + 1<<20, SHA256: sum})
	second := hashMessage(t, wire.ImageHash{Name: "staged/disk-1", Bytes: 2 << 30, Size: 2 << 30, SHA256: sum})

	o := ObserveVerificationJob(complete, []corev1.Pod{verifyPod(complete, first, second)})
	assert.True(t, o.Succeeded)
	assert.False(t, o.ResultMissing)
	assert.Equal(t, []statemachine.ImageChecksum{
		{Disk: "disk-0", Bytes: 1 << 30, Size: 1<<30 + 1<<20, SHA256: sum},
		{Disk: "disk-1", Staged: true, Bytes: 2 << 30, Size: 2 << 30, SHA256: sum},
	}, o.Checksums, "both containers' results")

	o = ObserveVerificationJob(complete, []corev1.Pod{verifyPod(complete, first)})
	assert.True(t, o.ResultMissing, "the second container's result is not in the cache yet")

	bad := hashMessage(t, wire.ImageHash{Name: "target/disk-0", Bytes: 1 << 30, Error: "open /verify/target/disk-0/disk.img: permission denied"})
	o = ObserveVerificationJob(failed, []corev1.Pod{verifyPod(failed, first, bad)})
	assert.True(t, o.Failed)
	assert.Contains(t, o.Message, "target/disk-0: open /verify/target/disk-0/disk.img: permission denied")
	assert.Contains(t, o.Message, "BackoffLimitExceeded")

	running := job.DeepCopy()
	waiting := corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "verify",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: "volume is Block"}}}}}}
	o = ObserveVerificationJob(running, []corev1.Pod{waiting})
	assert.False(t, o.Succeeded || o.Failed)
	assert.Equal(t, "waiting: CreateContainerConfigError: volume is Block", o.Message)
}

// TestCreateVerificationJobVolumeModes: a target claim's own volume mode
// (from its storage profile) wins over the mapping's.
func TestCreateVerificationJobVolumeModes(t *testing.T) {
	m := converted(linuxBIOS())
	block := corev1.PersistentVolumeBlock
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: m.Status.Disks[0].DataVolume, Namespace: m.Namespace,
		Labels: map[string]string{v1alpha1.LabelMigrationUID: string(m.UID)}}, Spec: corev1.PersistentVolumeClaimSpec{VolumeMode: &block}}
	f := newFakeStep(t, claim)
	require.NoError(t, f.step.CreateVerificationJob(context.Background(), m, 1))
	job, err := f.Kube.BatchV1().Jobs(m.Namespace).Get(context.Background(), naming.VerificationJob(m.Name, 1), metav1.GetOptions{})
	require.NoError(t, err)
	c := job.Spec.Template.Spec.Containers[0]
	require.Len(t, c.VolumeDevices, 1, "the Block claim as a device")
	assert.Empty(t, c.VolumeMounts)
	assert.Equal(t, "/verify/target/disk-0.dev", c.VolumeDevices[0].DevicePath)
	assert.Equal(t, v1alpha1.ComponentVerification, job.Labels[v1alpha1.LabelComponent])
	assert.Error(t, f.step.CreateVerificationJob(context.Background(), m, 0), "attempts count from 1")
}
