//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/test/builders"
	"platform.example/vm-migration/test/images"
	"platform.example/vm-migration/test/vcsimlocal"
)

// fastRollbackImage is the transfer image of TestRollbackAfterStopIsFast:
// the controller's image under a reference of its own, which the test
// removes from the node without touching the controller's.
const fastRollbackImage = "platform.example/vm-migration-transfer:fast-rollback"

// TestRollbackAfterStopIsFast: the transfer image passes its proof, then
// vanishes from the node before the stop (the migration waits for its
// approval meanwhile). After the stop, the transfer pods cannot pull it:
// each attempt counts as failed once its pod has not started for
// --pod-start-timeout (30s here), the retry budget (one retry) is spent,
// and the rollback powers the source on again within 3 minutes of the
// stop, not at the 24h retry deadline, the condition naming what the
// kubelet reported.
func TestRollbackAfterStopIsFast(t *testing.T) {
	s := newStack(t, stackOptions{extraControllerArgs: []string{"--transfer-image=" + fastRollbackImage, "--pod-start-timeout=30s"}})
	img, err := images.Controller(s.ctx, fastRollbackImage)
	require.NoError(t, err, "building the controller's image as %s", fastRollbackImage)
	require.NoError(t, s.env.ImportImage(s.ctx, img.Tarball), "importing %s", fastRollbackImage)
	const vm = "fast-rollback-01"
	s.addVM(vm, 141)
	require.NoError(t, s.vc.SimulateGuest(s.ctx, vm, vcsimlocal.GuestOptions{}))
	mig := s.newMigration(vm, vm)
	builders.RequireApproval(mig)
	builders.RetryLimit(1)(mig)
	m := s.create(mig)

	m = s.waitPhase(m.Name, v1alpha1.PhaseAwaitingApproval, 2*time.Minute)
	proven := proofOf(m, v1alpha1.ComponentTransfer)
	require.NotNil(t, proven, "no proof of the transfer image recorded: %s", describe(m))
	assert.Equal(t, v1alpha1.ProofPassed, proven.Result)
	assert.Equal(t, fastRollbackImage, proven.Image)
	t.Logf("the transfer image's proof: %s", proven.Output)
	require.NoError(t, s.env.RemoveImage(s.ctx, fastRollbackImage), "removing %s from the node", fastRollbackImage)
	s.approve(m.Name)

	stop := s.waitPowerOp(vm, vcsimlocal.OpGuestOff, time.Minute)
	on := s.waitPowerOp(vm, vcsimlocal.OpPowerOn, 3*time.Minute)
	t.Logf("the source stopped at %s and was powered on again %s later", stop.At.Format(time.RFC3339), on.At.Sub(stop.At).Round(time.Second))
	assert.Less(t, on.At.Sub(stop.At), 3*time.Minute, "the source stayed off longer than 3 minutes")
	m = s.waitPhase(m.Name, v1alpha1.PhaseFailed, time.Minute)
	e := m.Status.LastError
	require.NotNil(t, e, describe(m))
	assert.Equal(t, statemachine.ReasonPodNotStarted, e.Reason, describe(m))
	assert.Equal(t, v1alpha1.PhaseTransferringDisks, e.Phase)
	assert.Contains(t, e.Message, "did not start within 30s")
	assert.True(t, containsAny(e.Message, "ErrImagePull", "ImagePullBackOff"), "the kubelet's reason: %s", e.Message)
	assert.Contains(t, e.Message, "retry budget spent")
	assert.Equal(t, int32(1), m.Status.Retries, "one retry, then the rollback")
	assert.Equal(t, "poweredOn", s.powerState(vm))
	c := condition(m, statemachine.ConditionFailed)
	require.NotNil(t, c)
	t.Logf("Failed condition: %s", c.Message)
	var left []string
	s.eventually(time.Minute, "no transfer pod left waiting", func() bool {
		left = left[:0]
		for _, p := range s.transferPods(m) {
			left = append(left, fmt.Sprintf("%s (%s)", p.Name, p.Status.Phase))
		}
		return len(left) == 0
	}, func() string { return "transfer pods left: " + strings.Join(left, ", ") })
}

// proofOf is the migration's recorded proof of a component's image.
func proofOf(m *v1alpha1.VirtualMachineMigration, component string) *v1alpha1.ImageProof {
	for i := range m.Status.ImageProofs {
		if m.Status.ImageProofs[i].Component == component {
			return &m.Status.ImageProofs[i]
		}
	}
	return nil
}

// approve approves a migration's cutover.
func (s *stack) approve(name string) {
	s.t.Helper()
	_, err := s.mig.MigrationV1alpha1().VirtualMachineMigrations(s.ns).Patch(s.ctx, name, types.MergePatchType,
		[]byte(`{"spec":{"policy":{"approved":true}}}`), metav1.PatchOptions{})
	require.NoError(s.t, err, "approving %s", name)
}

// TestPullSecretsReachThePods: the migration names a pull secret and the
// controller adds its own; every pod of the migration the node ran (the
// image proofs', the transfer's and the conversion's) carries both, in
// that order, and the migration succeeds.
func TestPullSecretsReachThePods(t *testing.T) {
	s := newStack(t, stackOptions{extraControllerArgs: []string{"--image-pull-secret=platform-registry"}})
	for _, name := range []string{"team-registry", "platform-registry"} {
		s.createPullSecret(name)
	}
	const vm = "pull-secrets-01"
	s.addVM(vm, 151)
	pods := s.recordPods()
	mig := s.newMigration(vm, vm)
	mig.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "team-registry"}}
	m := s.create(mig)
	m = s.waitPhase(m.Name, v1alpha1.PhaseSucceeded, 3*time.Minute)

	if took, ok := checkpointGap(m, v1alpha1.PhasePending, v1alpha1.PhaseValidating); ok {
		t.Logf("Validating took %s (inventory, dry run of every object, both image proofs)", took)
	}
	seen := pods.waitEnded(s, string(m.UID), 4) // no verification: the disks were written in place
	var kinds []string
	want := []corev1.LocalObjectReference{{Name: "team-registry"}, {Name: "platform-registry"}}
	for _, p := range seen {
		kinds = append(kinds, p.kind)
		assert.Equal(t, want, p.pullSecrets, "pod %s (%s)", p.name, p.kind)
		assert.Equal(t, s.env.NodeName(), p.node, "pod %s (%s) ran on the node", p.name, p.kind)
		assert.Equal(t, corev1.PodSucceeded, p.phase, "pod %s (%s) ran to its end", p.name, p.kind)
		t.Logf("pod %s (%s) on %s: imagePullSecrets %v, %s", p.name, p.kind, p.node, p.pullSecrets, p.phase)
	}
	sort.Strings(kinds)
	assert.Equal(t, []string{"conversion", "proof:conversion", "proof:transfer", "transfer"}, kinds, "the pods the migration ran")
}

// createPullSecret creates a (dummy) registry Secret in the namespace.
func (s *stack) createPullSecret(name string) {
	s.t.Helper()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns}, Type: corev1.SecretTypeDockerConfigJson,
		StringData: map[string]string{corev1.DockerConfigJsonKey: `{"auths":{"registry.example":{"auth":"dXNlcjpwYXNz"}}}`}}
	_, err := s.kube.CoreV1().Secrets(s.ns).Create(s.ctx, secret, metav1.CreateOptions{})
	require.NoError(s.t, err, "creating pull secret %s", name)
}

// seenPod is what a test saw of a pod of a migration.
type seenPod struct {
	name, kind, node string
	// uid and fsGroup of its security context, "" when unset.
	uid, fsGroup string
	pullSecrets  []corev1.LocalObjectReference
	phase        corev1.PodPhase
}

// podRecorder keeps what a watch saw of the migrations' pods.
type podRecorder struct {
	mu   sync.Mutex
	pods map[string]map[string]*seenPod // by migration UID, then pod name
}

// of lists the pods seen of a migration.
func (r *podRecorder) of(uid string) []seenPod {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []seenPod
	for _, p := range r.pods[uid] {
		out = append(out, *p)
	}
	return out
}

// waitEnded waits until the watch saw n pods of the migration uid (and
// of the image proofs of its namespace, shared, no migration's), each
// in a final phase (Succeeded or Failed), and returns them: the watch
// delivers pod updates asynchronously, after the Jobs' status that the
// controller reads. It fails after 30s naming each pod's last phase.
func (r *podRecorder) waitEnded(s *stack, uid string, n int) []seenPod {
	s.t.Helper()
	var seen []seenPod
	s.eventually(30*time.Second, fmt.Sprintf("the pod watch saw %d pods of the migration end", n), func() bool {
		seen = append(r.of(uid), r.of("")...)
		if len(seen) != n {
			return false
		}
		for _, p := range seen {
			if p.phase != corev1.PodSucceeded && p.phase != corev1.PodFailed {
				return false
			}
		}
		return true
	}, func() string {
		var last []string
		for _, p := range seen {
			last = append(last, fmt.Sprintf("%s (%s): %q", p.name, p.kind, p.phase))
		}
		return fmt.Sprintf("%d pods seen: %s", len(seen), strings.Join(last, ", "))
	})
	return seen
}

// recordPods watches the namespace's pods of migrations until the test
// ends, keeping each pod's spec and the last phase and node it had.
func (s *stack) recordPods() *podRecorder {
	s.t.Helper()
	r := &podRecorder{pods: map[string]map[string]*seenPod{}}
	w, err := s.kube.CoreV1().Pods(s.ns).Watch(s.ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelMigrationUID})
	require.NoError(s.t, err, "watching the pods")
	ctx, cancel := context.WithCancel(s.ctx)
	var wg sync.WaitGroup
	s.t.Cleanup(func() { cancel(); wg.Wait() })
	consumeWatch(s.t, ctx, &wg, w, "pod", func(ev watch.Event) {
		// KubeVirt's launcher pods carry the VM's labels (the migration's
		// among them) but are KubeVirt's, not the migration's.
		if p, isPod := ev.Object.(*corev1.Pod); isPod && ev.Type != watch.Deleted && !launcherPod(p) {
			r.see(p)
		}
	})
	return r
}

// launcherPod reports whether a pod is a VirtualMachineInstance's launcher.
func launcherPod(p *corev1.Pod) bool {
	c := metav1.GetControllerOf(p)
	return c != nil && c.Kind == "VirtualMachineInstance"
}

// see records a pod's state.
func (r *podRecorder) see(p *corev1.Pod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	uid := p.Labels[v1alpha1.LabelMigrationUID]
	if r.pods[uid] == nil {
		r.pods[uid] = map[string]*seenPod{}
	}
	kind := p.Labels[v1alpha1.LabelComponent]
	if kind == v1alpha1.ComponentProof {
		kind += ":" + p.Labels[v1alpha1.LabelProofOf]
	}
	sp := r.pods[uid][p.Name]
	if sp == nil {
		sp = &seenPod{name: p.Name, kind: kind, pullSecrets: p.Spec.ImagePullSecrets}
		if sc := p.Spec.SecurityContext; sc != nil {
			sp.uid, sp.fsGroup = idString(sc.RunAsUser), idString(sc.FSGroup)
		}
		r.pods[uid][p.Name] = sp
	}
	if p.Spec.NodeName != "" {
		sp.node = p.Spec.NodeName
	}
	if p.Status.Phase != "" {
		sp.phase = p.Status.Phase
	}
}

// idString is an id as text, "" for none.
func idString(id *int64) string {
	if id == nil {
		return ""
	}
	return strconv.FormatInt(*id, 10)
}

// checkpointGap is the time between two checkpoints' evidence.
func checkpointGap(m *v1alpha1.VirtualMachineMigration, from, to v1alpha1.Phase) (time.Duration, bool) {
	var a, b *metav1.Time
	for i := range m.Status.Evidence {
		switch e := &m.Status.Evidence[i]; e.Phase {
		case from:
			a = &e.ReachedAt
		case to:
			b = &e.ReachedAt
		}
	}
	if a == nil || b == nil {
		return 0, false
	}
	return b.Sub(a.Time), true
}
