package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/steps"
	"platform.example/vm-migration/pkg/transfer/wire"
	"platform.example/vm-migration/test/builders"
)

// validating is linuxBIOS as it is in Validating: inventoried, nothing made.
func validating(name string, mods ...func(*v1alpha1.VirtualMachineMigration)) *v1alpha1.VirtualMachineMigration {
	m := linuxBIOS()
	m.Name, m.UID = name, types.UID("uid-"+name)
	m.Status = v1alpha1.VirtualMachineMigrationStatus{Phase: v1alpha1.PhaseValidating, Source: m.Status.Source}
	for _, f := range mods {
		f(m)
	}
	return m
}

func TestPullSecretsReachEveryPodAndServiceAccount(t *testing.T) {
	m := linuxBIOS()
	m.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "team-registry"}, {Name: "shared"}}
	m.Status.AppliedSpec = m.Spec.DeepCopy()
	cfg := testConfig
	cfg.ImagePullSecrets = []string{"shared", "platform-registry"}
	cfg.TransferProgress = true
	want := []corev1.LocalObjectReference{{Name: "team-registry"}, {Name: "shared"}, {Name: "platform-registry"}}
	assert.Equal(t, want, PullSecrets(m, cfg), "the migration's first, then the controller's, each once")

	tj, err := RenderTransferJob(m, 1, cfg, nil)
	require.NoError(t, err)
	assert.Equal(t, want, tj.Spec.Template.Spec.ImagePullSecrets, "transfer pod")
	cj, err := RenderConversionJob(m, 1, cfg, nil)
	require.NoError(t, err)
	assert.Equal(t, want, cj.Spec.Template.Spec.ImagePullSecrets, "conversion pod")
	a, err := renderAccess(m, 1, cfg)
	require.NoError(t, err)
	assert.Equal(t, want, a.ServiceAccount.ImagePullSecrets, "the transfer attempt's ServiceAccount")
	for _, component := range []string{v1alpha1.ComponentTransfer, v1alpha1.ComponentConversion} {
		job, sa, err := RenderProof(m, component, cfg)
		require.NoError(t, err)
		assert.Equal(t, want, job.Spec.Template.Spec.ImagePullSecrets, "%s proof pod", component)
		if sa != nil {
			assert.Equal(t, want, sa.ImagePullSecrets, "%s proof ServiceAccount", component)
		}
	}
	assert.Empty(t, PullSecrets(linuxBIOS(), testConfig), "none asked for: none set")
}

func TestPodIdentity(t *testing.T) {
	m := linuxBIOS()
	tj, err := RenderTransferJob(m, 1, testConfig, nil)
	require.NoError(t, err)
	sc := tj.Spec.Template.Spec.SecurityContext
	assert.Equal(t, ptr.To(StagingUID), sc.RunAsUser, "default: uid 107")
	assert.Equal(t, ptr.To(StagingUID), sc.FSGroup, "default: fsGroup 107")
	require.NotNil(t, sc.FSGroupChangePolicy)

	cfg := testConfig
	cfg.PodIdentity = &PodIdentity{}
	for _, render := range []func() (*batchv1.Job, error){
		func() (*batchv1.Job, error) { return RenderTransferJob(m, 1, cfg, nil) },
		func() (*batchv1.Job, error) { return RenderConversionJob(m, 1, cfg, nil) },
	} {
		job, err := render()
		require.NoError(t, err)
		sc := job.Spec.Template.Spec.SecurityContext
		assert.Nil(t, sc.RunAsUser, "no uid asked for: the image's, or the platform's (OpenShift)")
		assert.Nil(t, sc.RunAsGroup)
		assert.Nil(t, sc.FSGroup)
		assert.Nil(t, sc.FSGroupChangePolicy, "no fsGroup, no change policy")
		assert.Equal(t, ptr.To(true), sc.RunAsNonRoot, "still non-root")
		assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, sc.SeccompProfile.Type)
	}
	cfg.PodIdentity = &PodIdentity{RunAsUser: ptr.To[int64](1000680000)}
	job, err := RenderTransferJob(m, 1, cfg, nil)
	require.NoError(t, err)
	assert.Equal(t, ptr.To[int64](1000680000), job.Spec.Template.Spec.SecurityContext.RunAsUser)
}

func TestRenderProof(t *testing.T) {
	cfg := testConfig
	cfg.TransferProgress = true
	cfg.ConversionRuntimeClass = "kvm"
	m := validating("web-01")
	tj, sa, err := RenderProof(m, v1alpha1.ComponentTransfer, cfg)
	require.NoError(t, err)
	real, err := RenderTransferJob(plannedFor(m), 1, cfg, nil)
	require.NoError(t, err)
	pod, realPod := tj.Spec.Template.Spec, real.Spec.Template.Spec
	key := tj.Labels[v1alpha1.LabelProofKey]
	require.Len(t, key, 16, "the key: a short hash of the namespace and the pod's shape")
	assert.Equal(t, naming.ProofJob(v1alpha1.ComponentTransfer, key), tj.Name, "named by its key, not by a migration")
	assert.Equal(t, "vmm-proof-transfer-"+key, tj.Name)
	assert.Equal(t, v1alpha1.ComponentProof, tj.Labels[v1alpha1.LabelComponent])
	assert.Equal(t, v1alpha1.ComponentTransfer, tj.Labels[v1alpha1.LabelProofOf])
	uid, labelled := tj.Labels[v1alpha1.LabelMigrationUID]
	assert.True(t, labelled && uid == "", "an empty migration UID label: cached by the controller, no migration's")
	assert.NotContains(t, tj.Labels, v1alpha1.LabelMigrationName, "no migration's")
	assert.Empty(t, tj.OwnerReferences, "controlled by no migration: one migration's deletion must not take the proof others wait on")
	assert.True(t, isProofObject(tj, key))
	assert.Equal(t, tj.Labels, tj.Spec.Template.Labels, "its pod carries the proof's labels")
	assert.Equal(t, ptr.To(int32(DefaultProofTTL/time.Second)), tj.Spec.TTLSecondsAfterFinished, "removed by the Job controller once its result is older than the proof TTL")
	assert.Equal(t, []string{"--version", "--termination-log=/dev/termination-log"}, pod.Containers[0].Args)
	assert.Equal(t, realPod.Containers[0].Image, pod.Containers[0].Image)
	assert.Equal(t, realPod.Containers[0].Command, pod.Containers[0].Command)
	assert.Equal(t, realPod.SecurityContext, pod.SecurityContext, "the real pod's security context")
	assert.Equal(t, realPod.Containers[0].SecurityContext, pod.Containers[0].SecurityContext)
	assert.Equal(t, realPod.Containers[0].Resources, pod.Containers[0].Resources)
	require.NotNil(t, sa, "the transfer pods run as an account of their own: so does its proof")
	assert.Equal(t, naming.ProofAccess(key), sa.Name, "one ServiceAccount per key")
	assert.Empty(t, sa.OwnerReferences, "made the Job's once the Job exists (CreateProofJob)")
	assert.True(t, isProofObject(sa, key))
	assert.Equal(t, sa.Name, pod.ServiceAccountName)
	assert.Equal(t, ptr.To(false), pod.AutomountServiceAccountToken)
	for _, v := range pod.Volumes {
		assert.NotNil(t, v.EmptyDir, "volume %s: only scratch space, none of the migration's", v.Name)
	}
	assert.Equal(t, ptr.To[int32](0), tj.Spec.BackoffLimit)
	assert.NotNil(t, tj.Spec.ActiveDeadlineSeconds)

	cj, csa, err := RenderProof(m, v1alpha1.ComponentConversion, cfg)
	require.NoError(t, err)
	assert.Nil(t, csa, "the conversion pods run as the namespace's default account: so does its proof")
	cpod := cj.Spec.Template.Spec
	assert.Equal(t, ptr.To("kvm"), cpod.RuntimeClassName, "the conversion pods' runtime class")
	assert.Equal(t, "/bin/sh", cpod.Containers[0].Command[0])
	assert.Contains(t, cpod.Containers[0].Command[2], ConversionSelfCheck)
	assert.Len(t, cpod.Volumes, 3, "/tmp, /var/tmp and the tools")
	require.Len(t, cpod.InitContainers, 1, "the proof runs the conversion pod's init container too: vm-transfer copied in")
	assert.Equal(t, ToolsContainer, cpod.InitContainers[0].Name)

	again, _, err := RenderProof(validating("web-02"), v1alpha1.ComponentTransfer, cfg)
	require.NoError(t, err)
	assert.Equal(t, tj.Annotations[annotationProofKey], again.Annotations[annotationProofKey], "another migration of the namespace, same pods: same key")
	assert.Equal(t, tj.Name, again.Name, "and the same Job")
	other := cfg
	other.ImagePullSecrets = []string{"registry"}
	changed, _, err := RenderProof(m, v1alpha1.ComponentTransfer, other)
	require.NoError(t, err)
	assert.NotEqual(t, tj.Annotations[annotationProofKey], changed.Annotations[annotationProofKey], "other pull secrets: another key")
	_, _, err = RenderProof(linuxBIOSWithout(), v1alpha1.ComponentTransfer, cfg)
	assert.ErrorContains(t, err, "not inventoried")
}

func plannedFor(m *v1alpha1.VirtualMachineMigration) *v1alpha1.VirtualMachineMigration {
	mp := m.DeepCopy()
	mp.Status = statemachine.PlannedStatus(m)
	return mp
}

func linuxBIOSWithout() *v1alpha1.VirtualMachineMigration {
	m := validating("web-03")
	m.Status.Source = nil
	return m
}

// proofJob is a proof Job created at t0 and its pod in a state.
func proofJob(t *testing.T, component string, conds ...batchv1.JobCondition) *batchv1.Job {
	t.Helper()
	job, _, err := RenderProof(validating("web-01"), component, testConfig)
	require.NoError(t, err)
	job.UID = "job-uid-" + "1"
	job.CreationTimestamp = metav1.NewTime(t0)
	job.Status.Conditions = conds
	if len(conds) > 0 && conds[0].Type == batchv1.JobComplete {
		job.Status.CompletionTime = ptr.To(metav1.NewTime(t0.Add(3 * time.Second)))
	}
	return job
}

func proofPodIn(job *batchv1.Job, state corev1.ContainerState, conds ...corev1.PodCondition) corev1.Pod {
	pp := pod(job, job.Name+"-x", labelJobName, t0, state)
	pp.Status.ContainerStatuses[0].Name = job.Spec.Template.Spec.Containers[0].Name
	pp.Status.Conditions = conds
	if state.Terminated != nil {
		pp.Status.Phase = corev1.PodSucceeded
		if state.Terminated.ExitCode != 0 {
			pp.Status.Phase = corev1.PodFailed
		}
	}
	return *pp
}

func TestProofOutcome(t *testing.T) {
	version := `{"command":"vm-transfer","version":"v0.1.0","goVersion":"go1.26.8","specVersion":"` + wire.SpecVersion + `"}`
	selfCheck := `{"virtV2V":"2.2.0","outputXMLOption":false,"virtioWin":{"path":"/usr/share/virtio-win","present":false},"ok":true,"problems":[]}`
	complete := batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}
	failedJob := batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "DeadlineExceeded", Message: "Job was active longer than specified deadline"}
	unschedulable := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/1 nodes are available: 1 Insufficient memory."}
	waiting := func(reason, msg string) corev1.ContainerState {
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
	}
	tests := map[string]struct {
		component string
		job       *batchv1.Job
		pod       func(*batchv1.Job) []corev1.Pod
		at        time.Duration
		result    v1alpha1.ProofResult // "" while waiting
		reason    string
		contains  string
	}{
		"transfer: its version, the spec format we write": {v1alpha1.ComponentTransfer, proofJob(t, v1alpha1.ComponentTransfer, complete),
			func(j *batchv1.Job) []corev1.Pod {
				return []corev1.Pod{proofPodIn(j, terminated(0, "Completed", version))}
			}, 5 * time.Second,
			v1alpha1.ProofPassed, "", ""},
		"transfer: another spec format": {v1alpha1.ComponentTransfer, proofJob(t, v1alpha1.ComponentTransfer, complete),
			func(j *batchv1.Job) []corev1.Pod {
				return []corev1.Pod{proofPodIn(j, terminated(0, "Completed", `{"command":"vm-transfer","version":"v9","specVersion":"v9"}`))}
			}, 5 * time.Second, v1alpha1.ProofFailed, ReasonIncompatibleImage, "reads job spec v9"},
		"conversion: the self-check says it can convert": {v1alpha1.ComponentConversion, proofJob(t, v1alpha1.ComponentConversion, complete),
			func(j *batchv1.Job) []corev1.Pod {
				return []corev1.Pod{proofPodIn(j, terminated(0, "Completed", selfCheck))}
			}, 5 * time.Second,
			v1alpha1.ProofPassed, "", ""},
		"conversion: the self-check names its problems": {v1alpha1.ComponentConversion, proofJob(t, v1alpha1.ComponentConversion, failedJob),
			func(j *batchv1.Job) []corev1.Pod {
				return []corev1.Pod{proofPodIn(j, terminated(1, "Error", `{"ok":false,"problems":["nbdkit is not installed"]}`))}
			}, 5 * time.Second, v1alpha1.ProofFailed, ReasonSelfCheckFailed, "exited with code 1: nbdkit is not installed"},
		"an image that is not there fails at once": {v1alpha1.ComponentTransfer, proofJob(t, v1alpha1.ComponentTransfer),
			func(j *batchv1.Job) []corev1.Pod {
				return []corev1.Pod{proofPodIn(j, waiting("ErrImageNeverPull", `Container image "x:1" is not present with pull policy of Never`))}
			}, 2 * time.Second, v1alpha1.ProofFailed, "ErrImageNeverPull", "is not present"},
		"no node yet, before the timeout: wait": {v1alpha1.ComponentConversion, proofJob(t, v1alpha1.ComponentConversion),
			func(j *batchv1.Job) []corev1.Pod {
				return []corev1.Pod{proofPodIn(j, corev1.ContainerState{}, unschedulable)}
			}, 10 * time.Second,
			"", "", "Unschedulable: 0/1 nodes are available"},
		"no node at the timeout: the scheduler's words": {v1alpha1.ComponentConversion, proofJob(t, v1alpha1.ComponentConversion),
			func(j *batchv1.Job) []corev1.Pod {
				return []corev1.Pod{proofPodIn(j, corev1.ContainerState{}, unschedulable)}
			}, DefaultProofTimeout,
			v1alpha1.ProofFailed, ReasonUnschedulable, "Insufficient memory"},
		"no pod yet: wait": {v1alpha1.ComponentTransfer, proofJob(t, v1alpha1.ComponentTransfer),
			func(*batchv1.Job) []corev1.Pod { return nil }, time.Second, "", "", "no pod yet"},
		"the Job ended without a run": {v1alpha1.ComponentTransfer, proofJob(t, v1alpha1.ComponentTransfer, failedJob),
			func(*batchv1.Job) []corev1.Pod { return nil }, 3 * time.Minute, v1alpha1.ProofFailed, ReasonNotStarted, "DeadlineExceeded"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res, wait := ProofOutcome(tc.component, tc.job, tc.pod(tc.job), t0.Add(tc.at), DefaultProofTimeout)
			if tc.result == "" {
				assert.Nil(t, res, "a result while the proof runs: %+v", res)
				assert.Contains(t, wait, tc.contains)
				return
			}
			require.NotNil(t, res, "no result; waiting: %s", wait)
			assert.Equal(t, tc.result, res.Result, "%+v", res)
			assert.Equal(t, tc.reason, res.Reason, "%+v", res)
			assert.Contains(t, res.Message, tc.contains)
			assert.Equal(t, tc.job.Name, res.JobName)
		})
	}
}

func TestStartProblem(t *testing.T) {
	job := proofJob(t, v1alpha1.ComponentTransfer)
	running := proofPodIn(job, corev1.ContainerState{Running: &corev1.ContainerStateRunning{}})
	assert.Nil(t, StartProblem(&running), "a pod that started")
	creating := proofPodIn(job, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}})
	assert.Nil(t, StartProblem(&creating), "a pod whose volumes and image come by themselves")
	config := proofPodIn(job, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: `secret "x" not found`}})
	assert.Equal(t, &statemachine.PodStartProblem{Reason: "CreateContainerConfigError", Message: `secret "x" not found`}, StartProblem(&config))
	assert.Nil(t, StartProblem(nil))
}

// TestProofsObservedAndShared: a proof's result is read from its shared
// Job and pod, kept, and serves every migration of the namespace with
// pods of the same shape, under the one Job's name; no migration deletes
// the Job. Once its pass is older than the TTL, a Job still there is
// stale: deleted, and the image proven again.
func TestProofsObservedAndShared(t *testing.T) {
	skip := func(m *v1alpha1.VirtualMachineMigration) { m.Spec.Conversion.Skip = true }
	m := validating("web-01", skip)
	job := proofJob(t, v1alpha1.ComponentTransfer, batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue})
	version := `{"command":"vm-transfer","version":"v1","specVersion":"` + wire.SpecVersion + `"}`
	p := proofPodIn(job, terminated(0, "Completed", version))
	f := newFakeStep(t, job, &p)
	clock := clocktesting.NewFakePassiveClock(t0.Add(10 * time.Second))
	f.step.Clock, f.step.Config.ImageProofs = clock, true

	var obs statemachine.Observation
	require.NoError(t, f.step.Observe(m, &obs))
	require.Len(t, obs.Proofs, 1, "conversion skipped: the transfer image only")
	got := obs.Proofs[0]
	require.NotNil(t, got.Result, "waiting: %s", got.Waiting)
	assert.Equal(t, v1alpha1.ProofPassed, got.Result.Result)
	assert.Equal(t, version, got.Result.Output)
	assert.Equal(t, job.Labels[v1alpha1.LabelProofKey], got.Result.Key)
	assert.Equal(t, job.Name, got.Result.JobName)
	assert.Equal(t, *job.Status.CompletionTime, got.Result.CheckedAt, "as old as the Job's run")
	assert.Nil(t, got.Stale, "a fresh pass: nothing to delete")

	other := validating("web-02", skip)
	var obs2 statemachine.Observation
	require.NoError(t, f.step.Observe(other, &obs2))
	require.NotNil(t, obs2.Proofs[0].Result, "the namespace's proof serves it")
	assert.Equal(t, job.Name, obs2.Proofs[0].Result.JobName, "the one shared Job")
	assert.Equal(t, job.Name, obs2.Proofs[0].JobName)

	clock.SetTime(t0.Add(DefaultProofTTL + time.Minute))
	var obs3 statemachine.Observation
	require.NoError(t, f.step.Observe(other, &obs3))
	assert.Nil(t, obs3.Proofs[0].Result, "an old proof serves nobody")
	require.NotNil(t, obs3.Proofs[0].Stale, "its Job outlived the TTL: stale")
	assert.Equal(t, job.UID, obs3.Proofs[0].Stale.UID)
	assert.Empty(t, obs3.Proofs[0].Stale.MigrationUID, "no migration's")

	deleting := job.DeepCopy()
	deleting.DeletionTimestamp = ptr.To(metav1.NewTime(clock.Now()))
	deleting.Finalizers = []string{metav1.FinalizerDeleteDependents}
	f = newFakeStep(t, deleting)
	f.step.Clock, f.step.Config.ImageProofs = clock, true
	var obs4 statemachine.Observation
	require.NoError(t, f.step.Observe(other, &obs4))
	assert.True(t, obs4.Proofs[0].Running, "the stale Job on its way out: waited for, not created again beside it")
	assert.Contains(t, obs4.Proofs[0].Waiting, "being deleted")
	assert.Nil(t, obs4.Proofs[0].Stale, "deleted once")
}

// TestAFailedProofRefusesThoseWaitingOnIt: a failed proof refuses every
// migration of its key whose validation began before the failure was
// known, with the same result; one whose validation began after (a
// person fixed the cause and changed the spec, or a new migration) finds
// the Job stale and proves again. The failure's time is the one this
// controller first knew, whichever migration read it.
func TestAFailedProofRefusesThoseWaitingOnIt(t *testing.T) {
	job := proofJob(t, v1alpha1.ComponentTransfer)
	pull := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "no registry"}}
	p := proofPodIn(job, pull)
	f := newFakeStep(t, job, &p)
	clock := clocktesting.NewFakePassiveClock(t0.Add(10 * time.Second))
	f.step.Clock, f.step.Config.ImageProofs = clock, true
	began := func(name string, at time.Duration) *v1alpha1.VirtualMachineMigration {
		return validating(name, func(m *v1alpha1.VirtualMachineMigration) {
			m.Spec.Conversion.Skip = true
			m.Status.PhaseStartTime = ptr.To(metav1.NewTime(t0.Add(at)))
		})
	}
	observe := func(m *v1alpha1.VirtualMachineMigration) statemachine.ProofObservation {
		t.Helper()
		var obs statemachine.Observation
		require.NoError(t, f.step.Observe(m, &obs))
		return obs.Proofs[0]
	}

	first := observe(began("web-01", 0))
	require.NotNil(t, first.Result, "waiting: %s", first.Waiting)
	require.Equal(t, v1alpha1.ProofFailed, first.Result.Result)
	assert.Equal(t, t0.Add(10*time.Second), first.Result.CheckedAt.Time, "known at the first look")

	clock.SetTime(t0.Add(30 * time.Second))
	waiting := observe(began("web-02", 5*time.Second))
	require.NotNil(t, waiting.Result, "a migration that waited on the proof is refused by it")
	assert.Equal(t, *first.Result, *waiting.Result, "with the same result, message and time")
	assert.Nil(t, waiting.Stale)

	fresh := observe(began("web-03", 20*time.Second))
	assert.Nil(t, fresh.Result, "a validation that began after the failure was served it")
	require.NotNil(t, fresh.Stale, "the failed Job, want it deleted as stale")
	assert.Equal(t, job.UID, fresh.Stale.UID)

	again := began("web-01", 20*time.Second)
	again.Status.ImageProofs = []v1alpha1.ImageProof{*first.Result}
	assert.Nil(t, observe(again).Result, "its own earlier failure, in status, serves no later validation")

	passed := *first.Result
	passed.Result, passed.Reason, passed.Message = v1alpha1.ProofPassed, "", ""
	again.Status.ImageProofs = []v1alpha1.ImageProof{passed}
	f = newFakeStep(t)
	f.step.Clock, f.step.Config.ImageProofs = clock, true
	got := observe(again)
	require.NotNil(t, got.Result, "a passed proof in status, within its TTL")
	assert.Equal(t, v1alpha1.ProofPassed, got.Result.Result)
}

// TestAWaveCreatesOneProof: migrations of a key reconciled together
// create its proof once: the first creates the ServiceAccount, the Job,
// and makes the Job the account's owner; the others, before the informer
// shows the Job, wait for it; one that creates it anyway meets
// AlreadyExists, which is no failure. A Job of the name that is no proof
// object is not taken over.
func TestAWaveCreatesOneProof(t *testing.T) {
	cfg := testConfig
	cfg.TransferProgress, cfg.ImageProofs = true, true
	f := newFakeStep(t)
	f.step.Config = cfg
	f.step.Clock = clocktesting.NewFakePassiveClock(t0)
	skip := func(m *v1alpha1.VirtualMachineMigration) { m.Spec.Conversion.Skip = true }
	first, second := validating("web-01", skip), validating("web-02", skip)

	require.NoError(t, f.step.CreateProofJob(context.Background(), first, v1alpha1.ComponentTransfer))
	var verbs []string
	for _, a := range f.Actions() {
		verbs = append(verbs, a.GetVerb()+" "+a.GetResource().Resource)
	}
	assert.Equal(t, []string{"create serviceaccounts", "create jobs", "patch serviceaccounts"}, verbs)
	job, sa, err := RenderProof(first, v1alpha1.ComponentTransfer, cfg)
	require.NoError(t, err)
	got, err := f.Kube.CoreV1().ServiceAccounts(sa.Namespace).Get(context.Background(), sa.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, got.OwnerReferences, 1, "the account goes with the Job")
	assert.Equal(t, "Job", got.OwnerReferences[0].Kind)
	assert.Equal(t, job.Name, got.OwnerReferences[0].Name)

	var obs statemachine.Observation
	require.NoError(t, f.step.Observe(second, &obs), "before the informer shows the Job")
	assert.True(t, obs.Proofs[0].Running, "waits for the Job just created instead of creating it")
	assert.Contains(t, obs.Proofs[0].Waiting, "just created")

	f.Clear()
	require.NoError(t, f.step.CreateProofJob(context.Background(), second, v1alpha1.ComponentTransfer), "AlreadyExists: shared")
	for _, a := range f.Actions() {
		assert.NotEqual(t, "delete", a.GetVerb(), "no migration deletes a shared proof")
	}

	f.sync()
	obs = statemachine.Observation{}
	require.NoError(t, f.step.Observe(second, &obs))
	assert.True(t, obs.Proofs[0].Running)
	assert.Contains(t, obs.Proofs[0].Waiting, "no pod yet", "the Job, from the cache")

	taken := newFakeStep(t, builders.Job(first, job.Name, v1alpha1.ComponentTransfer))
	taken.step.Config, taken.step.Clock = cfg, clocktesting.NewFakePassiveClock(t0)
	err = taken.step.CreateProofJob(context.Background(), first, v1alpha1.ComponentTransfer)
	var oe *statemachine.ObservedError
	require.ErrorAs(t, err, &oe, "a migration's Job under the proof's name")
	assert.Equal(t, steps.ReasonNameTaken, oe.Reason)
}

// TestDeleteStaleProof deletes a shared proof Job only as the proof
// object it was observed as: the proof labels, the same UID (as a
// precondition); never a migration's Job of the name.
func TestDeleteStaleProof(t *testing.T) {
	job := proofJob(t, v1alpha1.ComponentTransfer)
	f := newFakeStep(t, job)
	m := validating("web-01")
	ref := refTo(statemachine.KindJob, job)
	require.NoError(t, f.step.DeleteStaleProof(context.Background(), m, []statemachine.ObjectRef{ref}))
	var deletes []k8stesting.DeleteActionImpl
	for _, a := range f.Actions() {
		if d, ok := a.(k8stesting.DeleteActionImpl); ok {
			deletes = append(deletes, d)
		}
	}
	require.Len(t, deletes, 1)
	assert.Equal(t, job.Name, deletes[0].Name)
	require.NotNil(t, deletes[0].DeleteOptions.Preconditions)
	assert.Equal(t, job.UID, *deletes[0].DeleteOptions.Preconditions.UID)

	theirs := builders.Job(m, job.Name, v1alpha1.ComponentTransfer)
	theirs.UID = job.UID
	f = newFakeStep(t, theirs)
	assert.ErrorContains(t, f.step.DeleteStaleProof(context.Background(), m, []statemachine.ObjectRef{ref}), "not observed as an image proof Job")
	for _, a := range f.Actions() {
		assert.NotEqual(t, "delete", a.GetVerb(), "deleted a migration's Job as a proof")
	}
}

// TestFailedCreateReadFromTheJobsEvents: a Job whose pod the API server
// refused has no pod; the refusal is read from its FailedCreate event.
func TestFailedCreateReadFromTheJobsEvents(t *testing.T) {
	job := proofJob(t, v1alpha1.ComponentConversion)
	event := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e1", Namespace: job.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Job", Name: job.Name, UID: job.UID}, Reason: ReasonFailedCreate,
		Message:       `Error creating: pods "x" is forbidden: violates PodSecurity "restricted:latest": seccompProfile (pod must not set securityContext.seccompProfile.type to "Unconfined")`,
		LastTimestamp: metav1.NewTime(t0.Add(time.Second))}
	f := newFakeStep(t, job, event)
	got, err := f.step.failedCreate(context.Background(), job, t0.Add(time.Second))
	require.NoError(t, err)
	assert.Nil(t, got, "too young to say")
	got, err = f.step.failedCreate(context.Background(), job, t0.Add(5*time.Second))
	require.NoError(t, err)
	require.NotNil(t, got)
	assert.Equal(t, ReasonFailedCreate, got.Reason)
	assert.Contains(t, got.Message, `violates PodSecurity "restricted:latest"`)

	f.Kube.PrependReactor("list", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, "", nil)
	})
	_, err = f.step.failedCreate(context.Background(), job, t0.Add(20*time.Second))
	assert.Error(t, err, "an unreadable answer is not a refusal")
}

// TestProofThatCannotBeRenderedIsNotRun: without a conversion image the
// conversion pod cannot be rendered; its proof says why it is not made,
// so that a validation failing on that refuses without waiting for it.
func TestProofThatCannotBeRenderedIsNotRun(t *testing.T) {
	f := newFakeStep(t)
	f.step.Clock, f.step.Config.ImageProofs, f.step.Config.ConversionImage = clocktesting.NewFakePassiveClock(t0), true, ""
	var obs statemachine.Observation
	require.NoError(t, f.step.Observe(validating("web-01"), &obs))
	require.Len(t, obs.Proofs, 2)
	assert.Empty(t, obs.Proofs[0].NotRun, "the transfer image's proof")
	assert.Contains(t, obs.Proofs[1].NotRun, "its pod cannot be rendered")
	assert.Contains(t, obs.Proofs[1].NotRun, "no conversion image")
}
