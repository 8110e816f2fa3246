//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/blocktree"
	cdiclient "platform.example/vm-migration/pkg/generated/cdi/clientset/versioned"
	kvclient "platform.example/vm-migration/pkg/generated/kubevirt/clientset/versioned"
	migclient "platform.example/vm-migration/pkg/generated/migration/clientset/versioned"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/steps/pipeline"
	"platform.example/vm-migration/test/builders"
	"platform.example/vm-migration/test/framework"
	"platform.example/vm-migration/test/framework/localpath"
	"platform.example/vm-migration/test/images"
	"platform.example/vm-migration/test/standins"
	"platform.example/vm-migration/test/vcsimlocal"
)

const (
	// transferImage is the controller's image, as make image builds it,
	// which the transfer Jobs run too (the controller reads its own pod's
	// image).
	transferImage = images.ControllerReference
	// conversionImage is the suite's default conversion image: the
	// simulated virt-v2v of test/images (the sample disks hold no guest).
	conversionImage = images.SimulatedConversionReference
	// launcherImage is the image of the KubeVirt stand-in's launcher pods
	// (QEMU under TCG: the sample VMs' random disks sit in firmware).
	launcherImage = images.LauncherReference
	// realConversionImage is the conversion image make conversion-image
	// builds (the shipped Deployment's default reference), which the
	// real-guest tests name per migration.
	realConversionImage = "platform.example/vm-migration-conversion:dev"
	// credentialsSecret holds the vcsim login in each test namespace.
	credentialsSecret = "vcsim-credentials"
	// controllerNamespace and controllerAccount are the controller's
	// identity from manifests/base/serviceaccount.yaml.
	controllerNamespace = "vm-migration-system"
	controllerAccount   = "migration-controller"
)

// stackOptions tune a test's stack.
type stackOptions struct {
	// maxTransfersPerHost bounds concurrent transfers (0: the shipped
	// default).
	maxTransfersPerHost int
	// cloneBytesPerSecond slows the CDI stand-in down.
	cloneBytesPerSecond int64
	// vmiStartDelay keeps instances Scheduling that long.
	vmiStartDelay time.Duration
	// vmiGracePeriod keeps a deleted instance that long (KubeVirt's
	// termination grace), so rollback must wait for it.
	vmiGracePeriod time.Duration
	// noController stops the controller's Deployment: the test runs the
	// controller as processes of its own.
	noController bool
	// transferStreams is the controller's streams per disk (0: the
	// shipped default).
	transferStreams int
	// extraControllerArgs are more flags of the controller.
	extraControllerArgs []string
	// launcherRuntimeClass runs the launcher pods under KVM through this
	// RuntimeClass (only where a probe booted a real guest under KVM).
	launcherRuntimeClass string
}

// controllerArgs are the flags a test adds to the suite's controller.
func (o stackOptions) controllerArgs() []string {
	var args []string
	if o.maxTransfersPerHost > 0 {
		args = append(args, "--max-transfers-per-host="+strconv.Itoa(o.maxTransfersPerHost))
	}
	if o.transferStreams > 0 {
		args = append(args, "--transfer-streams="+strconv.Itoa(o.transferStreams))
	}
	return append(args, o.extraControllerArgs...)
}

// stack is one test's world: a namespace enforcing PodSecurity
// `restricted` in the shared control plane with its real node, its own
// vcsim and stand-ins (CDI, KubeVirt, storage), and the controller's
// Deployment rolled out afresh for it.
type stack struct {
	t    *testing.T
	ctx  context.Context
	env  *framework.Environment
	ns   string
	opts stackOptions

	kube kubernetes.Interface
	mig  migclient.Interface
	kv   kvclient.Interface
	cdi  cdiclient.Interface

	vc       *vcsimlocal.Server
	standins standins.Config

	controllerRC *rest.Config
}

// newStack starts vcsim and the stand-ins for t and rolls the controller
// out with t's flags; t's cleanup stops them all.
func newStack(t *testing.T, opts stackOptions) *stack {
	t.Helper()
	env := framework.Env(t)
	setupSuite(t, env)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s := &stack{t: t, ctx: ctx, env: env, ns: env.Namespace(t), opts: opts}
	cfg := env.Config()
	s.kube = kubernetes.NewForConfigOrDie(cfg)
	s.mig = migclient.NewForConfigOrDie(cfg)
	s.kv = kvclient.NewForConfigOrDie(cfg)
	s.cdi = cdiclient.NewForConfigOrDie(cfg)
	s.enforceRestricted()
	rc, err := env.ServiceAccountConfig(ctx, controllerNamespace, controllerAccount)
	require.NoError(t, err, "a client config for the controller's ServiceAccount %s/%s", controllerNamespace, controllerAccount)
	s.controllerRC = rc

	// The transfer pods reach vcsim at the machine's end of the node's link.
	vc, err := vcsimlocal.Start(ctx, vcsimlocal.Options{Address: env.HostAddress() + ":0"})
	require.NoError(t, err, "starting vcsim")
	t.Cleanup(vc.Close)
	s.vc = vc
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: credentialsSecret, Namespace: s.ns,
			Labels: map[string]string{v1alpha1.LabelVSphereCredentials: "true"}},
		StringData: map[string]string{"username": vc.Username, "password": vc.Password, "thumbprint": vc.Thumbprint, "endpoints": vc.URL},
	}
	_, err = s.kube.CoreV1().Secrets(s.ns).Create(ctx, secret, metav1.CreateOptions{})
	require.NoError(t, err, "creating the credentials Secret %s/%s", s.ns, credentialsSecret)

	s.standins = standins.Config{
		RestConfig: cfg, Root: t.TempDir(), Namespace: s.ns, LocalVolumeNode: env.NodeName(),
		CloneBytesPerSecond: opts.cloneBytesPerSecond, VMIStartDelay: opts.vmiStartDelay, VMIGracePeriod: opts.vmiGracePeriod,
		LauncherImage: launcherImage, LauncherRuntimeClass: opts.launcherRuntimeClass, RealKubeVirt: realKubeVirt(), RealKubeVirtNode: realKubeVirtNode(),
		RealCDI: realCDI(), RealProvisioners: []string{localpath.Provisioner},
	}
	s.startStandins()
	if opts.noController {
		s.scaleControllerToZero()
	} else {
		s.rolloutController(opts.controllerArgs())
	}
	return s
}

// enforceRestricted labels the test's namespace so that the API server's
// PodSecurity admission holds every pod in it to the restricted profile.
func (s *stack) enforceRestricted() {
	s.t.Helper()
	patch := []byte(`{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"restricted","pod-security.kubernetes.io/enforce-version":"latest"}}}`)
	_, err := s.kube.CoreV1().Namespaces().Patch(s.ctx, s.ns, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(s.t, err, "labelling namespace %s to enforce PodSecurity restricted", s.ns)
}

// startStandins runs the stand-ins until the test ends.
func (s *stack) startStandins() {
	s.t.Helper()
	// Local volumes live under the stand-ins' root: its folders must be
	// reachable by the pods' non-root users (t.TempDir makes them 0700).
	for _, d := range []string{filepath.Dir(s.standins.Root), s.standins.Root} {
		require.NoError(s.t, os.Chmod(d, 0o755), "opening %s to the pods' users", d)
	}
	sctx, scancel := context.WithCancel(s.ctx)
	sdone := make(chan error, 1)
	sready := make(chan struct{})
	runCfg := s.standins
	runCfg.Ready = sready
	go func() { sdone <- standins.Run(sctx, runCfg) }()
	s.t.Cleanup(func() {
		scancel()
		assert.NoError(s.t, <-sdone, "the stand-ins ended with an error")
	})
	select {
	case <-sready:
	case err := <-sdone:
		sdone <- err
		require.FailNow(s.t, fmt.Sprintf("stand-ins exited before they were ready: %v", err))
	case <-time.After(time.Minute):
		require.FailNow(s.t, "stand-ins not ready after a minute")
	}
}

// addVM creates a sample VM in vcsim.
func (s *stack) addVM(name string, seed uint64) *vcsimlocal.VM {
	s.t.Helper()
	vm, err := s.vc.AddVM(s.ctx, vcsimlocal.SampleVM(name, seed))
	require.NoError(s.t, err, "adding VM %s to vcsim", name)
	return vm
}

// newMigration is a migration of a vcsim VM into a VM of the same name,
// each network mapped, conversion with the default (simulated) image.
func (s *stack) newMigration(name, vm string) *v1alpha1.VirtualMachineMigration {
	return builders.Migration(builders.Named(name), builders.InNamespace(s.ns), builders.WithoutUID,
		builders.SourceAt(s.vc.URL), builders.Credentials(credentialsSecret), builders.Datacenter(vcsimlocal.Datacenter),
		builders.SourceVM(vm), builders.TargetName(name), builders.DefaultStorage(suiteStorageClass()),
		builders.Networks(builders.PodNetwork(vcsimlocal.NetworkVM), builders.MultusNetwork(vcsimlocal.NetworkDVPG, "default/backend")),
		builders.StagingClass(suiteStorageClass()), builders.ShutdownTimeout(2*time.Second))
}

// create creates a migration.
func (s *stack) create(m *v1alpha1.VirtualMachineMigration) *v1alpha1.VirtualMachineMigration {
	s.t.Helper()
	got, err := s.mig.MigrationV1alpha1().VirtualMachineMigrations(s.ns).Create(s.ctx, m, metav1.CreateOptions{})
	require.NoError(s.t, err, "creating migration %s", m.Name)
	return got
}

// get reads a migration.
func (s *stack) get(name string) *v1alpha1.VirtualMachineMigration {
	s.t.Helper()
	m, err := s.mig.MigrationV1alpha1().VirtualMachineMigrations(s.ns).Get(s.ctx, name, metav1.GetOptions{})
	require.NoError(s.t, err, "reading migration %s", name)
	return m
}

// waitFor polls a migration until cond holds, failing after timeout with
// the migration's last status.
func (s *stack) waitFor(name string, timeout time.Duration, what string, cond func(*v1alpha1.VirtualMachineMigration) bool) *v1alpha1.VirtualMachineMigration {
	s.t.Helper()
	var last *v1alpha1.VirtualMachineMigration
	err := wait.PollUntilContextTimeout(s.ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		m, err := s.mig.MigrationV1alpha1().VirtualMachineMigrations(s.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = m
		return cond(m), nil
	})
	if err != nil {
		require.NoError(s.t, err, "migration %s: %s not reached within %s\n%s%s", name, what, timeout, describe(last), s.describeInstances())
	}
	return last
}

// describeInstances says how each VirtualMachineInstance of the namespace
// and its launcher pod stand, for a wait that failed.
func (s *stack) describeInstances() string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), 10*time.Second)
	defer cancel()
	vmis, err := s.kv.KubevirtV1().VirtualMachineInstances(s.ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(vmis.Items) == 0 {
		return ""
	}
	var b strings.Builder
	for _, vmi := range vmis.Items {
		fmt.Fprintf(&b, "  instance %s: phase %s reason %q node %q%s\n", vmi.Name, vmi.Status.Phase, vmi.Status.Reason, vmi.Status.NodeName, deleting(&vmi.ObjectMeta))
		for _, c := range vmi.Status.Conditions {
			fmt.Fprintf(&b, "    condition %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
		}
	}
	pods, err := s.kube.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return b.String()
	}
	for _, p := range pods.Items {
		if !strings.HasPrefix(p.Name, "virt-launcher-") {
			continue
		}
		fmt.Fprintf(&b, "  pod %s: %s %s%s\n", p.Name, p.Status.Phase, p.Status.Message, deleting(&p.ObjectMeta))
		for _, cs := range p.Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil {
				fmt.Fprintf(&b, "    container %s ended %d %s: %s\n", cs.Name, t.ExitCode, t.Reason, t.Message)
			}
			if w := cs.State.Waiting; w != nil {
				fmt.Fprintf(&b, "    container %s waiting %s: %s\n", cs.Name, w.Reason, w.Message)
			}
		}
	}
	return b.String()
}

// deleting says since when an object is being deleted and what holds it.
func deleting(o *metav1.ObjectMeta) string {
	if o.DeletionTimestamp == nil {
		return ""
	}
	return fmt.Sprintf(" deleting since %s, finalizers %v", o.DeletionTimestamp.Format(time.RFC3339), o.Finalizers)
}

// waitPhase waits for a migration's phase.
func (s *stack) waitPhase(name string, phase v1alpha1.Phase, timeout time.Duration) *v1alpha1.VirtualMachineMigration {
	s.t.Helper()
	return s.waitFor(name, timeout, "phase "+string(phase), func(m *v1alpha1.VirtualMachineMigration) bool {
		if m.Status.Phase == phase {
			return true
		}
		if statemachine.IsTerminal(m.Status.Phase) && phase != m.Status.Phase {
			// The condition runs in this goroutine: the test stops here.
			require.FailNow(s.t, fmt.Sprintf("migration %s ended %s, want %s\n%s", name, m.Status.Phase, phase, describe(m)))
		}
		return false
	})
}

// waitGone waits for a migration to be deleted.
func (s *stack) waitGone(name string, timeout time.Duration) {
	s.t.Helper()
	var last *v1alpha1.VirtualMachineMigration
	err := wait.PollUntilContextTimeout(s.ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		m, err := s.mig.MigrationV1alpha1().VirtualMachineMigrations(s.ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			last = m
		}
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		require.NoError(s.t, err, "migration %s still exists after %s\n%s%s", name, timeout, describe(last), s.describeInstances())
	}
}

// describe is a migration's status for failure messages.
func describe(m *v1alpha1.VirtualMachineMigration) string {
	if m == nil {
		return "(never read)"
	}
	out := fmt.Sprintf("phase=%s progress=%s retries=%d", m.Status.Phase, m.Status.Progress, m.Status.Retries)
	if m.Status.LastError != nil {
		out += fmt.Sprintf(" lastError=%+v", *m.Status.LastError)
	}
	for _, c := range m.Status.Conditions {
		out += fmt.Sprintf("\n  condition %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
	}
	return out
}

// powerState reads a vcsim VM's power state.
func (s *stack) powerState(vm string) string {
	s.t.Helper()
	st, err := s.vc.PowerState(s.ctx, vm)
	require.NoError(s.t, err, "reading the power state of VM %s", vm)
	return st
}

// claimFiles lists the files at the root of a claim's volume.
func (s *stack) claimFiles(claim string) (string, []string) {
	s.t.Helper()
	dir := s.claimDir(claim)
	entries, err := os.ReadDir(dir)
	require.NoError(s.t, err, "listing the volume of claim %s", claim)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return dir, names
}

// claimDir is the folder on the node of a bound claim's volume: a local
// (or hostPath) volume of local-path or of the storage stand-in.
func (s *stack) claimDir(claim string) string {
	s.t.Helper()
	pvc, err := s.kube.CoreV1().PersistentVolumeClaims(s.ns).Get(s.ctx, claim, metav1.GetOptions{})
	require.NoError(s.t, err, "reading claim %s", claim)
	require.NotEmpty(s.t, pvc.Spec.VolumeName, "claim %s is not bound", claim)
	pv, err := s.kube.CoreV1().PersistentVolumes().Get(s.ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	require.NoError(s.t, err, "reading the volume %s of claim %s", pvc.Spec.VolumeName, claim)
	switch {
	case pv.Spec.Local != nil:
		return pv.Spec.Local.Path
	case pv.Spec.HostPath != nil:
		return pv.Spec.HostPath.Path
	}
	require.FailNow(s.t, fmt.Sprintf("volume %s of claim %s is neither local nor hostPath", pv.Name, claim))
	return ""
}

// leftovers lists the migration's children that still exist: staging
// claims, Jobs, ConfigMaps, pods of its Jobs, and transfer access objects.
func (s *stack) leftovers(m *v1alpha1.VirtualMachineMigration) []string {
	s.t.Helper()
	sel := metav1.ListOptions{LabelSelector: v1alpha1.LabelMigrationUID + "=" + string(m.UID)}
	var out []string
	pvcs, err := s.kube.CoreV1().PersistentVolumeClaims(s.ns).List(s.ctx, sel)
	require.NoError(s.t, err, "listing the claims of migration %s", m.Name)
	for _, p := range pvcs.Items {
		if p.Labels[v1alpha1.LabelComponent] == "staging" {
			out = append(out, "pvc/"+p.Name)
		}
	}
	jobs, err := s.kube.BatchV1().Jobs(s.ns).List(s.ctx, sel)
	require.NoError(s.t, err, "listing the Jobs of migration %s", m.Name)
	for _, j := range jobs.Items {
		out = append(out, "job/"+j.Name)
	}
	cms, err := s.kube.CoreV1().ConfigMaps(s.ns).List(s.ctx, sel)
	require.NoError(s.t, err, "listing the ConfigMaps of migration %s", m.Name)
	for _, c := range cms.Items {
		out = append(out, "configmap/"+c.Name)
	}
	pods, err := s.kube.CoreV1().Pods(s.ns).List(s.ctx, sel)
	require.NoError(s.t, err, "listing the pods of migration %s", m.Name)
	for _, p := range pods.Items {
		// A launcher pod carries its instance's labels (as KubeVirt's
		// do), taken from the VM template the migration labelled: it is
		// the VM's, not a child of the migration.
		if p.Labels[kubevirtv1.AppLabel] != "virt-launcher" {
			out = append(out, "pod/"+p.Name)
		}
	}
	for _, kind := range []string{"serviceaccount", "role", "rolebinding"} {
		var n int
		switch kind {
		case "serviceaccount":
			l, err := s.kube.CoreV1().ServiceAccounts(s.ns).List(s.ctx, sel)
			if err == nil {
				n = len(l.Items)
			}
		case "role":
			l, err := s.kube.RbacV1().Roles(s.ns).List(s.ctx, sel)
			if err == nil {
				n = len(l.Items)
			}
		default:
			l, err := s.kube.RbacV1().RoleBindings(s.ns).List(s.ctx, sel)
			if err == nil {
				n = len(l.Items)
			}
		}
		for range n {
			out = append(out, kind)
		}
	}
	return out
}

// waitNoLeftovers waits until the migration's children are all gone (the
// garbage collector removes pods after their Jobs).
func (s *stack) waitNoLeftovers(m *v1alpha1.VirtualMachineMigration, timeout time.Duration) {
	s.t.Helper()
	var left []string
	err := wait.PollUntilContextTimeout(s.ctx, 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		left = s.leftovers(m)
		return len(left) == 0, nil
	})
	require.NoError(s.t, err, "children of migration %s left after %s: %v", m.Name, timeout, left)
}

// verifyTargetDisks checks that each target disk holds exactly the
// converted disk's bytes, and beside them its block tree: the source
// disk's bytes where the conversion wrote nothing (the simulated one
// writes only into the first disk), the root status gives of the
// converted image, and the tree file the conversion left.
func (s *stack) verifyTargetDisks(m *v1alpha1.VirtualMachineMigration, vm *vcsimlocal.VM) {
	s.t.Helper()
	require.Len(s.t, m.Status.Disks, len(vm.Disks), "disks in status: one per source disk")
	for i, d := range m.Status.Disks {
		src := vm.Disks[i]
		assert.Equal(s.t, src.Key, d.Key, "disk %d status: key, want the source disk's", i)
		assert.Equal(s.t, src.SHA256, d.SHA256, "disk %d status: sha256, want the source disk's", i)
		assert.Equal(s.t, blocktree.Scheme, d.ChecksumScheme, "disk %d status: the block tree's root", i)
		assert.Equal(s.t, src.SizeBytes, d.BytesTransferred, "disk %d status: bytes transferred, want the source disk's size", i)
		dir, files := s.claimFiles(d.DataVolume)
		assert.Equal(s.t, []string{pipeline.ImageFile, pipeline.ImageFile + pipeline.TreeSuffix}, files,
			"target volume of %s, want only %s and its block tree", d.DataVolume, pipeline.ImageFile)
		root, err := vcsimlocal.FileRoot(filepath.Join(dir, pipeline.ImageFile))
		require.NoError(s.t, err, "hashing the target disk %s", d.DataVolume)
		want := src.SHA256
		if c := d.Checksums; c != nil && c.Converted != "" {
			want = c.Converted
		}
		if i > 0 {
			assert.Equal(s.t, src.SHA256, want, "disk %d: the simulated conversion writes only into the first disk", i)
		}
		stored, err := os.ReadFile(filepath.Join(dir, pipeline.ImageFile+pipeline.TreeSuffix))
		require.NoError(s.t, err, "reading the tree file of %s", d.DataVolume)
		assert.Contains(s.t, string(stored), " root="+want+"\n", "target disk %s: its tree file is the converted image's", d.DataVolume)
		if assert.Equal(s.t, want, root, "target disk %s: its root, want the converted image's", d.DataVolume) {
			s.t.Logf("disk %d (%d MiB): target %s holds the converted image (root %s)", i, src.SizeBytes>>20, d.DataVolume, root[:16])
		}
	}
}
