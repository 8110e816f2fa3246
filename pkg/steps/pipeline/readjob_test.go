package pipeline

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/transfer/wire"
)

const inspectionRHEL = `<?xml version='1.0' encoding='utf-8'?>
<v2v-inspection>
  <program>virt-v2v-in-place</program>
  <disks>
    <disk index='0'/>
  </disks>
  <operatingsystem>
    <name>linux</name>
    <distro>rhel</distro>
    <osinfo>rhel9.4</osinfo>
    <arch>x86_64</arch>
    <major_version>9</major_version>
    <minor_version>4</minor_version>
    <product_name>Red Hat Enterprise Linux 9.4 (Plow)</product_name>
    <mountpoints>
      <mountpoint dev='/dev/sda2'>/</mountpoint>
    </mountpoints>
  </operatingsystem>
  <firmware type='bios'/>
</v2v-inspection>
`

// jobBuilder renders a migration's Job (so the labels and volumes are the
// real ones), gives it a UID, and applies modifiers.
func jobBuilder(t *testing.T, component string, mods ...func(*batchv1.Job)) *batchv1.Job {
	t.Helper()
	m := linuxBIOS()
	var job *batchv1.Job
	var err error
	if component == v1alpha1.ComponentConversion {
		job, err = RenderConversionJob(m, 1, testConfig, nil)
	} else {
		cfg := testConfig
		cfg.TransferProgress = true
		job, err = RenderTransferJob(m, 1, cfg, nil)
	}
	require.NoError(t, err, "rendering the %s Job", component)
	job.UID = types.UID("job-uid-" + component)
	for _, mod := range mods {
		mod(job)
	}
	return job
}

func condition(typ batchv1.JobConditionType, reason, msg string) func(*batchv1.Job) {
	return func(j *batchv1.Job) {
		j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: typ, Status: corev1.ConditionTrue, Reason: reason, Message: msg})
	}
}

// completedAt records the Job's completion time.
func completedAt(at time.Time) func(*batchv1.Job) {
	return func(j *batchv1.Job) { j.Status.CompletionTime = &metav1.Time{Time: at} }
}

// pod builds a pod of job whose container ended (or waits) as given.
func pod(job *batchv1.Job, name, labelKey string, created time.Time, state corev1.ContainerState) *corev1.Pod {
	yes := true
	container := TransferContainer
	if job.Labels["migration.platform.example/component"] == v1alpha1.ComponentConversion {
		container = ConversionContainer
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: job.Namespace, CreationTimestamp: metav1.NewTime(created),
			Labels:          podLabels(job, labelKey),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: &yes}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: container, State: state}}},
	}
	if t := state.Terminated; t != nil {
		p.Status.Phase = corev1.PodSucceeded
		if t.ExitCode != 0 {
			p.Status.Phase = corev1.PodFailed
		}
	}
	return p
}

// podLabels are the labels the Job controller gives job's pods: the
// template's and the job-name label (labelKey).
func podLabels(job *batchv1.Job, labelKey string) map[string]string {
	l := map[string]string{labelKey: job.Name}
	for k, v := range job.Spec.Template.Labels {
		l[k] = v
	}
	return l
}

func terminated(code int32, reason, msg string) corev1.ContainerState {
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, Message: msg}}
}

func resultMessage(t *testing.T, r *wire.Result) string {
	t.Helper()
	return string(wire.TerminationMessage(r))
}

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

func TestObserveJob(t *testing.T) {
	m := linuxBIOS()
	sum := strings.Repeat("ab", 32)
	okResult := &wire.Result{Kind: wire.KindResult, Succeeded: true, Disks: []wire.DiskResult{{Key: 2000, Bytes: 20 * gib, SHA256: sum, DurationSeconds: 12.5}}}
	failResult := &wire.Result{Kind: wire.KindResult, Reason: wire.ReasonNotAuthorized,
		Error: "vSphere refused the credentials:\n ServerFaultCode: Cannot complete login", Disks: []wire.DiskResult{{Key: 2000}}}
	progress, _ := json.Marshal(wire.Progress{Kind: wire.KindProgress, Time: t0, Disks: []wire.DiskProgress{
		{Key: 2000, State: wire.StateCopying, BytesDone: 5 * gib, TotalBytes: 20 * gib, RateBytesPerSecond: 100 << 20}}})
	okJSON, _ := json.Marshal(okResult)
	cmName := naming.TransferProgressConfigMap(m.Name, 1)
	progressCM := func(data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: childMeta(m, cmName, v1alpha1.ComponentTransfer, true), Data: data}
	}

	tests := map[string]struct {
		job     *batchv1.Job
		objects func(job *batchv1.Job) []runtime.Object
		want    statemachine.JobObservation
	}{
		"transfer succeeded": {
			job: jobBuilder(t, v1alpha1.ComponentTransfer, condition(batchv1.JobComplete, "", "")),
			objects: func(j *batchv1.Job) []runtime.Object {
				return []runtime.Object{pod(j, "p1", labelJobName, t0, terminated(0, "Completed", resultMessage(t, okResult)))}
			},
			want: statemachine.JobObservation{Succeeded: true, Results: []statemachine.DiskResult{{Key: 2000, Bytes: 20 * gib, SHA256: sum}}},
		},
		"transfer succeeded, allocated areas only on one disk, whole on the other": {
			job: jobBuilder(t, v1alpha1.ComponentTransfer, condition(batchv1.JobComplete, "", "")),
			objects: func(j *batchv1.Job) []runtime.Object {
				res := &wire.Result{Kind: wire.KindResult, Succeeded: true, Disks: []wire.DiskResult{
					{Key: 2000, Bytes: 20 * gib, SHA256: sum, AllocatedOnly: true, AllocatedBytes: ptr.To[int64](5 * gib), BytesRead: 5 * gib},
					{Key: 2001, Bytes: gib, SHA256: sum, BytesRead: gib, FullCopyReason: "changed block tracking is off\non the VM" + strings.Repeat(" and more", 40)},
				}}
				return []runtime.Object{pod(j, "p1", labelJobName, t0, terminated(0, "Completed", resultMessage(t, res)))}
			},
			want: statemachine.JobObservation{Succeeded: true, Results: []statemachine.DiskResult{
				{Key: 2000, Bytes: 20 * gib, SHA256: sum, AllocatedOnly: true, AllocatedBytes: ptr.To[int64](5 * gib), BytesRead: 5 * gib},
				{Key: 2001, Bytes: gib, SHA256: sum, BytesRead: gib, FullCopyReason: truncate("changed block tracking is off on the VM"+strings.Repeat(" and more", 40), maxReason)},
			}},
		},
		"transfer succeeded, pod gone, result in the config map": {
			job: jobBuilder(t, v1alpha1.ComponentTransfer, condition(batchv1.JobComplete, "", "")),
			objects: func(*batchv1.Job) []runtime.Object {
				return []runtime.Object{progressCM(map[string]string{wire.ConfigMapKeyResult: string(okJSON)})}
			},
			want: statemachine.JobObservation{Succeeded: true, Results: []statemachine.DiskResult{{Key: 2000, Bytes: 20 * gib, SHA256: sum}}},
		},
		"transfer succeeded without a result": {
			job: jobBuilder(t, v1alpha1.ComponentTransfer, condition(batchv1.JobComplete, "", "")),
			objects: func(j *batchv1.Job) []runtime.Object {
				return []runtime.Object{pod(j, "p1", labelJobName, t0, terminated(0, "Completed", ""))}
			},
			want: statemachine.JobObservation{Succeeded: true, Message: "the transfer reported no result"},
		},
		"transfer completed before its pod's last status reached the cache": {
			job: jobBuilder(t, v1alpha1.ComponentTransfer, condition(batchv1.JobComplete, "", ""), completedAt(t0)),
			objects: func(j *batchv1.Job) []runtime.Object {
				return []runtime.Object{pod(j, "p1", labelJobName, t0, corev1.ContainerState{Running: &corev1.ContainerStateRunning{}})}
			},
			want: statemachine.JobObservation{Succeeded: true, Message: "the transfer reported no result", ResultMissing: true, CompletedAt: t0},
		},
		"transfer failed with a result": {
			job: jobBuilder(t, v1alpha1.ComponentTransfer, condition(batchv1.JobFailed, "BackoffLimitExceeded", "Job has reached the specified backoff limit")),
			objects: func(j *batchv1.Job) []runtime.Object {
				return []runtime.Object{pod(j, "p1", labelJobName, t0, terminated(1, "Error", resultMessage(t, failResult)))}
			},
			want: statemachine.JobObservation{Failed: true, Results: []statemachine.DiskResult{{Key: 2000}},
				Message: "NotAuthorized: vSphere refused the credentials: ServerFaultCode: Cannot complete login; BackoffLimitExceeded: Job has reached the specified backoff limit"},
		},
		"transfer killed without a result": {
			job: jobBuilder(t, v1alpha1.ComponentTransfer, condition(batchv1.JobFailed, "BackoffLimitExceeded", "Job has reached the specified backoff limit")),
			objects: func(j *batchv1.Job) []runtime.Object {
				return []runtime.Object{pod(j, "p1", labelJobName, t0, terminated(137, "OOMKilled", ""))}
			},
			want: statemachine.JobObservation{Failed: true,
				Message: "BackoffLimitExceeded: Job has reached the specified backoff limit; container p1: OOMKilled (exit code 137)"},
		},
		"transfer running with progress": {
			job: jobBuilder(t, v1alpha1.ComponentTransfer),
			objects: func(j *batchv1.Job) []runtime.Object {
				return []runtime.Object{
					pod(j, "p1", labelJobName, t0, corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}),
					progressCM(map[string]string{wire.ConfigMapKeyProgress: string(progress)}),
				}
			},
			want: statemachine.JobObservation{Progress: []statemachine.DiskProgress{{Key: 2000, BytesDone: 5 * gib, BytesTotal: 20 * gib, RateBytesPerSecond: 100 << 20}}},
		},
		"transfer progress of a foreign config map is ignored": {
			job: jobBuilder(t, v1alpha1.ComponentTransfer),
			objects: func(*batchv1.Job) []runtime.Object {
				cm := progressCM(map[string]string{wire.ConfigMapKeyProgress: string(progress)})
				cm.Labels = nil
				return []runtime.Object{cm}
			},
			want: statemachine.JobObservation{},
		},
		"transfer pod cannot pull its image": {
			job: jobBuilder(t, v1alpha1.ComponentTransfer),
			objects: func(j *batchv1.Job) []runtime.Object {
				return []runtime.Object{pod(j, "p1", labelJobName, t0, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
					Reason: "ImagePullBackOff", Message: "Back-off pulling image"}})}
			},
			want: statemachine.JobObservation{Message: "waiting: ImagePullBackOff: Back-off pulling image",
				StartProblem: &statemachine.PodStartProblem{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}},
		},
		"legacy job-name label, newest terminated pod, other job's pod ignored": {
			job: jobBuilder(t, v1alpha1.ComponentTransfer, condition(batchv1.JobComplete, "", "")),
			objects: func(j *batchv1.Job) []runtime.Object {
				stale := pod(j, "p0", labelLegacyJobName, t0.Add(time.Hour), terminated(0, "Completed", resultMessage(t, failResult)))
				stale.OwnerReferences[0].UID = "previous-job-with-same-name"
				return []runtime.Object{
					stale,
					pod(j, "p1", labelLegacyJobName, t0, terminated(1, "Error", resultMessage(t, failResult))),
					pod(j, "p2", labelLegacyJobName, t0.Add(time.Minute), terminated(0, "Completed", resultMessage(t, okResult))),
					pod(j, "p3", labelLegacyJobName, t0.Add(2*time.Minute), corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}),
				}
			},
			want: statemachine.JobObservation{Succeeded: true, Results: []statemachine.DiskResult{{Key: 2000, Bytes: 20 * gib, SHA256: sum}}},
		},
		"conversion succeeded": {
			job: jobBuilder(t, v1alpha1.ComponentConversion, condition(batchv1.JobComplete, "", "")),
			objects: func(j *batchv1.Job) []runtime.Object {
				return []runtime.Object{pod(j, "c1", labelJobName, t0, terminated(0, "Completed", inspectionRHEL))}
			},
			want: statemachine.JobObservation{Succeeded: true, OperatingSystem: "rhel 9.4 (Red Hat Enterprise Linux 9.4 (Plow))"},
		},
		"conversion found no guest": {
			job: jobBuilder(t, v1alpha1.ComponentConversion, condition(batchv1.JobFailed, "BackoffLimitExceeded", "Job has reached the specified backoff limit")),
			objects: func(j *batchv1.Job) []runtime.Object {
				return []runtime.Object{pod(j, "c1", labelJobName, t0, terminated(1, "Error",
					"[   1.0] Setting up the source\n[  20.3] Opening the source\nvirt-v2v-in-place: error: inspection could not detect the source guest (or \nphysical machine).\n\nAssuming that you are running virt-v2v/virt-p2v on a source which is \nsupported (and not, for example, a blank disk), then this should not \nhappen.\n\nNo root device found in this operating system image.\n\nIf reporting bugs, run virt-v2v with debugging enabled and include the \ncomplete output:\n\n  virt-v2v -v -x [...]\n"))}
			},
			want: statemachine.JobObservation{Failed: true, Reason: statemachine.ConversionInspectionFailed},
		},
		"conversion of an unsupported guest": {
			job: jobBuilder(t, v1alpha1.ComponentConversion, condition(batchv1.JobFailed, "BackoffLimitExceeded", "")),
			objects: func(j *batchv1.Job) []runtime.Object {
				return []runtime.Object{pod(j, "c1", labelJobName, t0, terminated(1, "Error",
					"virt-v2v-in-place: error: virt-v2v is unable to convert this guest type \n(linux/debian)\n"))}
			},
			want: statemachine.JobObservation{Failed: true, Reason: statemachine.ConversionUnsupportedGuest,
				Message: "virt-v2v-in-place: error: virt-v2v is unable to convert this guest type (linux/debian); BackoffLimitExceeded"},
		},
		"conversion failed otherwise": {
			job: jobBuilder(t, v1alpha1.ComponentConversion, condition(batchv1.JobFailed, "DeadlineExceeded", "Job was active longer than specified deadline")),
			objects: func(j *batchv1.Job) []runtime.Object {
				return []runtime.Object{pod(j, "c1", labelJobName, t0, terminated(137, "Error", "libguestfs: error: appliance closed the connection unexpectedly\n"))}
			},
			want: statemachine.JobObservation{Failed: true,
				Message: "libguestfs: error: appliance closed the connection unexpectedly; DeadlineExceeded: Job was active longer than specified deadline"},
		},
		"conversion completed, its pod not in the cache": {
			job:     jobBuilder(t, v1alpha1.ComponentConversion, condition(batchv1.JobComplete, "", ""), completedAt(t0)),
			objects: func(*batchv1.Job) []runtime.Object { return nil },
			want:    statemachine.JobObservation{Succeeded: true, ResultMissing: true, CompletedAt: t0},
		},
		"conversion running": {
			job:     jobBuilder(t, v1alpha1.ComponentConversion),
			objects: func(*batchv1.Job) []runtime.Object { return nil },
			want:    statemachine.JobObservation{},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFakeStep(t, append(tc.objects(tc.job), tc.job)...)
			obs := f.step.observeJob(m, tc.job.Name)
			require.NotNil(t, obs, "the Job was not observed")
			got := *obs
			want := tc.want
			want.Name = tc.job.Name
			want.Ref = statemachine.ObjectRef{Kind: statemachine.KindJob, Name: tc.job.Name, UID: tc.job.UID, MigrationUID: m.UID}
			want.CreatedAt = tc.job.CreationTimestamp.Time
			if name == "conversion found no guest" {
				// The whole error, on one line, is kept.
				assert.True(t, strings.HasPrefix(got.Message, "virt-v2v-in-place: error: inspection could not detect the source guest (or physical machine)."),
					"message %q does not start with virt-v2v's error, on one line", got.Message)
				assert.Contains(t, got.Message, "No root device found", "the message lost virt-v2v's explanation")
				want.Message = got.Message
			}
			assert.Equal(t, want, got, "what observeJob reads from the Job, its pods and its progress configmap")
		})
	}
}

func TestInspectedOS(t *testing.T) {
	tests := map[string]string{
		inspectionRHEL: "rhel 9.4 (Red Hat Enterprise Linux 9.4 (Plow))",
		`<v2v-inspection><operatingsystem><name>windows</name><distro>windows</distro><major_version>10</major_version><minor_version>0</minor_version><product_name>Windows Server 2019 Standard</product_name>`: "windows 10.0 (Windows Server 2019 Standard)",
		inspectionRHEL[:strings.Index(inspectionRHEL, "<product_name>")+20]: "rhel 9.4",
		"<v2v-inspection><operatingsystem><name>linux</name><distro>debian</distro><major_version>12</major_version><minor_version>15</minor_version><product_name>12.15</product_name>": "debian 12.15",
		"<v2v-inspection><operatingsystem><name>linux</name><distro>unknown</distro><product_name>unknown</product_name>":                                                                "linux",
		"<v2v-inspection><disks/></v2v-inspection>": "",
		"":           "",
		"not xml <<": "",
	}
	for doc, want := range tests {
		assert.Equal(t, want, InspectedOS([]byte(doc)), "InspectedOS(%.40q...)", doc)
	}
}

func TestClassifyConversionFailure(t *testing.T) {
	tests := map[string]string{
		"virt-v2v-in-place: error: inspection could not detect the source guest (or physical machine).": statemachine.ConversionInspectionFailed,
		"No root device found in this operating system image.":                                          statemachine.ConversionInspectionFailed,
		"virt-v2v: error: virt-v2v is unable to convert this guest type (linux/gentoo)":                 statemachine.ConversionUnsupportedGuest,
		"virt-v2v: error: multi-boot operating systems are \nnot supported by virt-v2v. Use the --root": statemachine.ConversionUnsupportedGuest,
		"virt-v2v: only Xen kernels are installed in this guest.":                                       statemachine.ConversionUnsupportedGuest,
		"virt-v2v: no installed kernel packages were found.\n\nThis probably indicates that":            statemachine.ConversionUnsupportedGuest,
		"virt-v2v: no bootloader detected":                                                              statemachine.ConversionUnsupportedGuest,
		"virt-v2v: nbdkit did not start up.  There may be errors printed by nbdkit above.":              "",
		"virt-v2v: warning: there are no virtio drivers available for this version of Windows":          "",
		"libguestfs: error: /usr/bin/supermin exited with error status 1":                               "",
	}
	for out, want := range tests {
		assert.Equal(t, want, ClassifyConversionFailure(out), "ClassifyConversionFailure(%q)", out)
	}
}

// TestConversionWarningsRead: the warnings after the script's heading are
// read from virt-v2v's JSON lines; a line the kubelet cut at 4 KiB keeps
// what there is of its message; without the heading there are none.
func TestConversionWarningsRead(t *testing.T) {
	grub := `{ "message": "could not determine a way to update the configuration of Grub2", "timestamp": "2026-11-30T09:32:48.055663251+00:00", "type": "warning" }`
	cases := map[string]struct {
		msg          string
		wantOS       string
		wantWarnings []string
	}{
		"inspection lines, then warnings": {
			msg:          "i_distro = debian\ni_major_version = 12\ni_minor_version = 15\n" + warningsHeading + "\n" + grub + "\n",
			wantOS:       "debian 12.15",
			wantWarnings: []string{"could not determine a way to update the configuration of Grub2"},
		},
		"a warning cut short": {
			msg:          "i_distro = debian\n" + warningsHeading + "\n" + grub + "\n" + `{ "message": "the guest has no dis`,
			wantOS:       "debian",
			wantWarnings: []string{"could not determine a way to update the configuration of Grub2", "the guest has no dis..."},
		},
		"a line cut before its message": {
			msg: "i_distro = debian\n" + warningsHeading + "\n" + `{ "mess`, wantOS: "debian",
		},
		"the heading cut off its line": {msg: "i_distro = debian\n" + warningsHeading, wantOS: "debian"},
		"no warnings":                  {msg: "i_distro = debian\n", wantOS: "debian"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var o statemachine.JobObservation
			o.Succeeded = true
			observeConversion(&o, tc.msg, true)
			assert.Equal(t, tc.wantOS, o.OperatingSystem)
			assert.Equal(t, tc.wantWarnings, o.Warnings)
		})
	}
}
