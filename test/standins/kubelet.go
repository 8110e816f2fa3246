package standins

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"platform.example/vm-migration/pkg/transfer"
	"platform.example/vm-migration/pkg/transfer/wire"
	"platform.example/vm-migration/test/framework"
)

// Kubelet is the kubelet stand-in; see the package documentation.
type Kubelet struct {
	cfg Config
	c   *clients

	pods corelisters.PodLister

	mu      sync.Mutex
	running map[types.UID]*podRun
	wg      sync.WaitGroup
}

// podRun is a pod the stand-in is running.
type podRun struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// maxTerminationMessage is what a kubelet keeps of a termination message.
const maxTerminationMessage = 4096

// transferStopGrace is how long a transfer process has after SIGTERM.
const transferStopGrace = 5 * time.Second

// register creates the Node, marked Ready, and starts renewing its Lease.
func (k *Kubelet) register(ctx context.Context) error {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: k.cfg.NodeName, Labels: map[string]string{
			"kubernetes.io/hostname": k.cfg.NodeName, "kubernetes.io/os": "linux", LabelStandin: "true",
		}},
	}
	if _, err := k.c.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("standins: registering node %s: %w", k.cfg.NodeName, err)
	}
	if err := k.heartbeat(ctx); err != nil {
		return err
	}
	return nil
}

// heartbeat reports the node Ready and renews its Lease.
func (k *Kubelet) heartbeat(ctx context.Context) error {
	now := metav1.Now()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := k.c.kube.CoreV1().Nodes().Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		capacity := corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi"),
			corev1.ResourcePods: resource.MustParse("110"),
		}
		node.Status.Capacity, node.Status.Allocatable = capacity, capacity
		node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}, {Type: corev1.NodeHostName, Address: k.cfg.NodeName}}
		node.Status.NodeInfo.KubeletVersion = "standin"
		node.Status.Conditions = []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "simulated kubelet (test/standins) is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now,
		}}
		_, err = k.c.kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("standins: updating the status of node %s: %w", k.cfg.NodeName, err)
	}
	leases := k.c.kube.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	micro := metav1.NewMicroTime(now.Time)
	lease, err := leases.Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: k.cfg.NodeName, Namespace: corev1.NamespaceNodeLease},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(k.cfg.NodeName), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &micro},
		}
		_, err = leases.Create(ctx, lease, metav1.CreateOptions{})
		return ignoreExists(err)
	}
	if err != nil {
		return fmt.Errorf("standins: reading the lease of node %s: %w", k.cfg.NodeName, err)
	}
	lease.Spec.RenewTime = &micro
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	if err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("standins: renewing the lease of node %s: %w", k.cfg.NodeName, err)
	}
	return nil
}

func ignoreExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func (k *Kubelet) run(ctx context.Context) error {
	k.running = map[types.UID]*podRun{}
	factory := kubeinformers.NewSharedInformerFactoryWithOptions(k.c.kube, time.Minute, kubeinformers.WithNamespace(k.cfg.Namespace))
	pods := factory.Core().V1().Pods()
	k.pods = pods.Lister()
	l := newLoop("standin-kubelet", k.syncPod)
	if _, err := pods.Informer().AddEventHandler(l.handler()); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	go func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := k.heartbeat(ctx); err != nil && ctx.Err() == nil {
					klog.FromContext(ctx).Error(err, "node heartbeat")
				}
			}
		}
	}()
	if cache.WaitForCacheSync(ctx.Done(), pods.Informer().HasSynced) {
		l.run(ctx, k.cfg.workers(4))
	}
	// Stop every process still running: the stand-in goes, its pods go.
	k.mu.Lock()
	for _, r := range k.running {
		r.cancel()
	}
	k.mu.Unlock()
	k.wg.Wait()
	return nil
}

// syncPod binds, starts, stops and finalises one pod.
func (k *Kubelet) syncPod(ctx context.Context, key string) (time.Duration, error) {
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	pod, err := k.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if pod.Spec.NodeName == "" {
		if pod.DeletionTimestamp != nil {
			return 0, nil
		}
		binding := &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: k.cfg.NodeName},
		}
		err := k.c.kube.CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{})
		if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return 0, fmt.Errorf("binding pod %s: %w", key, err)
		}
		return 0, nil
	}
	if pod.Spec.NodeName != k.cfg.NodeName {
		return 0, nil
	}
	if pod.DeletionTimestamp != nil {
		return 0, k.finalize(ctx, pod)
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return 0, nil
	}
	k.mu.Lock()
	_, running := k.running[pod.UID]
	k.mu.Unlock()
	if running {
		return 0, nil
	}
	return k.start(ctx, pod)
}

// finalize stops a deleted pod's process, then removes the pod, as a
// kubelet confirms a deletion.
func (k *Kubelet) finalize(ctx context.Context, pod *corev1.Pod) error {
	k.mu.Lock()
	r := k.running[pod.UID]
	k.mu.Unlock()
	if r != nil {
		r.cancel()
		<-r.done
	}
	_ = os.RemoveAll(k.podDir(pod))
	uid := pod.UID
	err := k.c.kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("removing pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

func (k *Kubelet) podDir(pod *corev1.Pod) string {
	return filepath.Join(k.cfg.Root, "pods", string(pod.UID))
}

// podKind says what the stand-in does with a pod.
type podKind int

const (
	kindUnsupported podKind = iota
	kindTransfer
	kindConversion
)

func (k *Kubelet) kindOf(pod *corev1.Pod) podKind {
	if len(pod.Spec.Containers) != 1 || len(pod.Spec.InitContainers) > 0 {
		return kindUnsupported
	}
	c := pod.Spec.Containers[0]
	switch {
	case k.cfg.TransferImage != "" && c.Image == k.cfg.TransferImage && len(c.Command) == 1:
		return kindTransfer
	case pod.Labels["migration.platform.example/component"] == "conversion":
		return kindConversion
	}
	return kindUnsupported
}

// start begins running a pod: it waits (requeues) while a claim is not
// bound, as a kubelet waits for volumes.
func (k *Kubelet) start(ctx context.Context, pod *corev1.Pod) (time.Duration, error) {
	if k.cfg.PodHook != nil {
		if out := k.cfg.PodHook(pod); out != nil {
			now := metav1.Now()
			return 0, k.setTerminated(ctx, pod, now, out.ExitCode, out.Message)
		}
	}
	kind := k.kindOf(pod)
	if kind == kindUnsupported {
		now := metav1.Now()
		msg := fmt.Sprintf("simulated kubelet (test/standins): cannot run image %q; it runs only the transfer image %q and conversion pods",
			pod.Spec.Containers[0].Image, k.cfg.TransferImage)
		return 0, k.setTerminated(ctx, pod, now, 128, msg)
	}
	var mounts map[string]string
	if kind == kindTransfer || k.realConversionImage(pod) {
		var ready bool
		var err error
		mounts, ready, err = k.prepareVolumes(ctx, pod)
		if err != nil {
			return 0, err
		}
		if !ready {
			return time.Second, nil
		}
	}
	runCtx, cancel := context.WithCancel(ctx)
	r := &podRun{cancel: cancel, done: make(chan struct{})}
	k.mu.Lock()
	k.running[pod.UID] = r
	k.mu.Unlock()
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		defer close(r.done)
		defer cancel()
		logger := klog.FromContext(ctx).WithValues("pod", klog.KObj(pod))
		started := metav1.Now()
		if err := k.setRunning(ctx, pod, started); err != nil {
			logger.Error(err, "reporting the pod running")
		}
		var code int32
		var msg string
		switch kind {
		case kindTransfer:
			if k.cfg.Light {
				code, msg = lightTransfer(pod, mounts)
			} else {
				code, msg = k.runTransfer(runCtx, pod, mounts)
			}
		default:
			code, msg = k.runConversion(runCtx, pod, mounts)
		}
		if runCtx.Err() != nil && ctx.Err() != nil {
			return // the stand-in stops: report nothing
		}
		if err := k.setTerminated(context.WithoutCancel(ctx), pod, started, code, msg); err != nil {
			logger.Error(err, "reporting the pod terminated")
		}
		k.mu.Lock()
		delete(k.running, pod.UID)
		k.mu.Unlock()
	}()
	return 0, nil
}

// realConversionImage says the pod's image is Config.RealConversionImage.
func (k *Kubelet) realConversionImage(pod *corev1.Pod) bool {
	return k.cfg.RealConversionImage != "" && pod.Spec.Containers[0].Image == k.cfg.RealConversionImage
}

// inspectionDocument is what the simulated conversion reports: the shape
// of virt-v2v's -O inspection output.
const inspectionDocument = `<?xml version="1.0" encoding="utf-8"?>
<v2v-inspection>
  <program>virt-v2v-in-place (SIMULATED by test/standins: no conversion ran)</program>
  <operatingsystem>
    <name>linux</name>
    <distro>rhel</distro>
    <major_version>9</major_version>
    <minor_version>4</minor_version>
    <product_name>Red Hat Enterprise Linux 9.4 (simulated)</product_name>
  </operatingsystem>
</v2v-inspection>
`

func simulateConversion(ctx context.Context, d time.Duration) (int32, string) {
	select {
	case <-ctx.Done():
		return 137, "killed"
	case <-time.After(d):
	}
	return 0, inspectionDocument
}

// prepareVolumes writes the pod's ConfigMaps and Secrets into its
// directory and resolves its claims; it returns each mount path's local
// directory, and false while a claim is not bound yet.
func (k *Kubelet) prepareVolumes(ctx context.Context, pod *corev1.Pod) (map[string]string, bool, error) {
	dir := k.podDir(pod)
	local := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		vdir := filepath.Join(dir, "volumes", v.Name)
		switch {
		case v.ConfigMap != nil:
			cm, err := k.c.kube.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
			if err != nil {
				return nil, false, fmt.Errorf("reading config map %s of pod %s: %w", v.ConfigMap.Name, pod.Name, err)
			}
			files := map[string][]byte{}
			for key, val := range cm.Data {
				files[key] = []byte(val)
			}
			for key, val := range cm.BinaryData {
				files[key] = val
			}
			if err := writeVolume(vdir, files, v.ConfigMap.Items, 0o444); err != nil {
				return nil, false, err
			}
		case v.Secret != nil:
			secret, err := k.c.kube.CoreV1().Secrets(pod.Namespace).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
			if err != nil {
				return nil, false, fmt.Errorf("reading secret %s of pod %s: %w", v.Secret.SecretName, pod.Name, err)
			}
			if err := writeVolume(vdir, secret.Data, v.Secret.Items, 0o400); err != nil {
				return nil, false, err
			}
		case v.EmptyDir != nil:
			if err := os.MkdirAll(vdir, 0o777); err != nil {
				return nil, false, err
			}
		case v.PersistentVolumeClaim != nil:
			cdir, ok, err := claimDir(ctx, k.c, k.cfg.Root, pod.Namespace, v.PersistentVolumeClaim.ClaimName)
			if err != nil || !ok {
				return nil, false, err
			}
			vdir = cdir
		default:
			return nil, false, fmt.Errorf("pod %s: volume %s has a type the stand-in does not support", pod.Name, v.Name)
		}
		local[v.Name] = vdir
	}
	mounts := map[string]string{}
	c := pod.Spec.Containers[0]
	for _, m := range c.VolumeMounts {
		d, ok := local[m.Name]
		if !ok {
			return nil, false, fmt.Errorf("pod %s mounts unknown volume %s", pod.Name, m.Name)
		}
		mounts[filepath.Clean(m.MountPath)] = filepath.Join(d, m.SubPath)
	}
	term := c.TerminationMessagePath
	if term == "" {
		term = corev1.TerminationMessagePathDefault
	}
	termFile := filepath.Join(dir, "termination-log")
	if err := os.WriteFile(termFile, nil, 0o666); err != nil {
		return nil, false, err
	}
	mounts[filepath.Clean(term)] = termFile
	return mounts, true, nil
}

// writeVolume writes a ConfigMap's or Secret's keys as files.
func writeVolume(dir string, data map[string][]byte, items []corev1.KeyToPath, mode os.FileMode) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	paths := map[string]string{}
	if len(items) == 0 {
		for key := range data {
			paths[key] = key
		}
	}
	for _, it := range items {
		paths[it.Key] = it.Path
	}
	for key, rel := range paths {
		val, ok := data[key]
		if !ok {
			return fmt.Errorf("key %s is missing", key)
		}
		p := filepath.Join(dir, filepath.Clean("/"+rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, val, mode); err != nil {
			return err
		}
	}
	return nil
}

// translate maps a path inside the container to the local path: the
// longest mount path that holds it is replaced by its directory. ok is
// false for a path under no mount.
func translate(mounts map[string]string, p string) (string, bool) {
	clean := filepath.Clean(p)
	keys := make([]string, 0, len(mounts))
	for m := range mounts {
		keys = append(keys, m)
	}
	sort.Slice(keys, func(i, j int) bool { return len(keys[i]) > len(keys[j]) })
	for _, m := range keys {
		if clean == m {
			return mounts[m], true
		}
		if strings.HasPrefix(clean, m+"/") {
			return filepath.Join(mounts[m], strings.TrimPrefix(clean, m+"/")), true
		}
	}
	return p, false
}

// translateArgs rewrites the container paths in "--flag=/path" and
// "/path" arguments.
func translateArgs(mounts map[string]string, args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		if flag, val, ok := strings.Cut(a, "="); ok && strings.HasPrefix(flag, "-") && strings.HasPrefix(val, "/") {
			if t, ok := translate(mounts, val); ok {
				out[i] = flag + "=" + t
			}
		} else if strings.HasPrefix(a, "/") {
			if t, ok := translate(mounts, a); ok {
				out[i] = t
			}
		}
	}
	return out
}

// runTransfer runs the real vm-transfer command for a transfer pod.
func (k *Kubelet) runTransfer(ctx context.Context, pod *corev1.Pod, mounts map[string]string) (int32, string) {
	c := pod.Spec.Containers[0]
	dir := k.podDir(pod)
	if k.cfg.TransferBinary == "" {
		return 128, "simulated kubelet: no transfer binary configured"
	}
	args := translateArgs(mounts, c.Args)
	var progressRef string
	for i, a := range args {
		if ref, ok := strings.CutPrefix(a, "--progress-configmap="); ok {
			progressRef = ref
			args[i] = "--progress-file=" + filepath.Join(dir, "progress.json")
		}
		if specPath, ok := strings.CutPrefix(a, "--spec="); ok {
			// The job spec names destinations inside the container.
			if err := rewriteSpec(specPath, mounts); err != nil {
				return 1, "simulated kubelet: " + err.Error()
			}
		}
	}
	termFile := mounts[filepath.Clean(orDefault(c.TerminationMessagePath, corev1.TerminationMessagePathDefault))]
	logPath := filepath.Join(dir, c.Name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return 128, "simulated kubelet: " + err.Error()
	}
	defer logFile.Close()
	cmd := exec.Command(k.cfg.TransferBinary, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	env := []string{"HOME=" + dir, "PATH=/usr/bin:/bin"}
	if tmp, ok := mounts["/tmp"]; ok {
		env = append(env, "TMPDIR="+tmp)
	}
	for _, e := range c.Env {
		env = append(env, e.Name+"="+e.Value)
	}
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return 128, "simulated kubelet: starting the transfer: " + err.Error()
	}
	exited := make(chan struct{})
	var relayDone chan struct{}
	if progressRef != "" {
		relayDone = make(chan struct{})
		go func() {
			defer close(relayDone)
			k.relayProgress(ctx, pod, progressRef, filepath.Join(dir, "progress.json"), termFile, exited)
		}()
	}
	code := waitStoppable(ctx, cmd, transferStopGrace, exited)
	if relayDone != nil {
		<-relayDone
	}
	msg := readCapped(termFile, maxTerminationMessage)
	if msg == "" && code != 0 && c.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError {
		msg = framework.TailBytes(logPath, 2048)
	}
	return code, msg
}

// LightChecksum is the SHA-256 a light-mode transfer reports for a disk:
// no bytes were read, so it is the checksum of a name, not of a disk.
func LightChecksum(key int32) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "standins light mode: disk %d, no bytes moved", key))
	return hex.EncodeToString(sum[:])
}

// lightTransfer ends a transfer pod at once with the result vm-transfer
// writes for a complete copy: every disk of its job spec with its
// capacity in bytes and a checksum (Config.Light). No byte moves.
func lightTransfer(pod *corev1.Pod, mounts map[string]string) (int32, string) {
	for _, a := range translateArgs(mounts, pod.Spec.Containers[0].Args) {
		specPath, ok := strings.CutPrefix(a, "--spec=")
		if !ok {
			continue
		}
		spec, err := wire.LoadJobSpec(specPath)
		if err != nil {
			return 1, "simulated kubelet (light mode): " + err.Error()
		}
		res := &wire.Result{Kind: wire.KindResult, Succeeded: true}
		for _, d := range spec.Disks {
			res.Disks = append(res.Disks, wire.DiskResult{Key: d.Key, Bytes: d.CapacityBytes, SHA256: LightChecksum(d.Key)})
		}
		return 0, string(wire.TerminationMessage(res))
	}
	return 1, "simulated kubelet (light mode): the transfer pod has no --spec argument"
}

// rewriteSpec rewrites the destinations (and checkpoints) of the job spec
// at path, inside the pod's own copy of its ConfigMap.
func rewriteSpec(path string, mounts map[string]string) error {
	spec, err := wire.LoadJobSpec(path)
	if err != nil {
		return err
	}
	for i := range spec.Disks {
		d := &spec.Disks[i]
		var ok bool
		if d.Destination, ok = translate(mounts, d.Destination); !ok {
			return fmt.Errorf("destination %s is on no volume of the pod", d.Destination)
		}
		if d.Checkpoint != "" {
			d.Checkpoint, _ = translate(mounts, d.Checkpoint)
		}
	}
	data, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	if err := os.Chmod(path, 0o644); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o444)
}

// relayProgress copies the progress file into the progress ConfigMap as
// the pod's ServiceAccount (a token the API server issues for the pod),
// and the result once the command exits: what vm-transfer does itself
// with in-cluster credentials.
func (k *Kubelet) relayProgress(ctx context.Context, pod *corev1.Pod, ref, progressFile, termFile string, exited <-chan struct{}) {
	logger := klog.FromContext(ctx).WithValues("pod", klog.KObj(pod))
	client, err := k.podClient(ctx, pod)
	if err != nil {
		logger.Error(err, "no credentials for the progress relay")
		<-exited
		return
	}
	sink, err := transfer.NewConfigMapSink(client, ref)
	if err != nil {
		logger.Error(err, "progress relay")
		<-exited
		return
	}
	sink.MinInterval = time.Second
	var last []byte
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-exited:
			if msg := readCapped(termFile, maxTerminationMessage); msg != "" {
				var res wire.Result
				if json.Unmarshal([]byte(msg), &res) == nil {
					rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
					if err := sink.ReportResult(rctx, &res); err != nil {
						logger.Error(err, "relaying the transfer result")
					}
					cancel()
				}
			}
			return
		case <-t.C:
			data, err := os.ReadFile(progressFile)
			if err != nil || bytes.Equal(data, last) {
				continue
			}
			last = data
			var p wire.Progress
			if json.Unmarshal(data, &p) != nil {
				continue
			}
			if err := sink.Report(ctx, p); err != nil && ctx.Err() == nil {
				logger.Info("relaying progress failed", "err", err.Error())
			}
		}
	}
}

// podClient is a client authenticated as the pod's ServiceAccount, with a
// token bound to the pod.
func (k *Kubelet) podClient(ctx context.Context, pod *corev1.Pod) (kubernetes.Interface, error) {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	tr, err := k.c.kube.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: ptr.To[int64](3600),
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("requesting a token for service account %s/%s: %w", pod.Namespace, sa, err)
	}
	cfg := rest.AnonymousClientConfig(k.cfg.RestConfig)
	cfg.BearerToken = tr.Status.Token
	cfg.UserAgent = "vm-transfer (relayed by the simulated kubelet)"
	return kubernetes.NewForConfig(cfg)
}

func readCapped(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	buf := make([]byte, n)
	m, _ := f.Read(buf)
	return string(buf[:m])
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// setRunning reports the pod Running with its container started.
func (k *Kubelet) setRunning(ctx context.Context, pod *corev1.Pod, started metav1.Time) error {
	return k.updateStatus(ctx, pod, func(st *corev1.PodStatus) {
		st.Phase = corev1.PodRunning
		st.StartTime = &started
		st.HostIP, st.PodIP = "127.0.0.1", "127.0.0.1"
		st.Conditions = podConditions(started, true)
		c := pod.Spec.Containers[0]
		st.ContainerStatuses = []corev1.ContainerStatus{{
			Name: c.Name, Image: c.Image, ImageID: "standin://" + c.Image, Ready: true, Started: ptr.To(true),
			ContainerID: "standin://" + string(pod.UID),
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
		}}
	})
}

// setTerminated reports the pod's container terminated, and the pod
// Succeeded (exit code 0) or Failed.
func (k *Kubelet) setTerminated(ctx context.Context, pod *corev1.Pod, started metav1.Time, code int32, msg string) error {
	finished := metav1.Now()
	return k.updateStatus(ctx, pod, func(st *corev1.PodStatus) {
		st.Phase, st.Reason, st.Message = corev1.PodSucceeded, "", ""
		reason := "Completed"
		if code != 0 {
			st.Phase, reason = corev1.PodFailed, "Error"
		}
		if st.StartTime == nil {
			st.StartTime = &started
		}
		st.HostIP, st.PodIP = "127.0.0.1", "127.0.0.1"
		st.Conditions = podConditions(finished, false)
		c := pod.Spec.Containers[0]
		st.ContainerStatuses = []corev1.ContainerStatus{{
			Name: c.Name, Image: c.Image, ImageID: "standin://" + c.Image, Started: ptr.To(false),
			ContainerID: "standin://" + string(pod.UID),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: code, Reason: reason, Message: msg, StartedAt: started, FinishedAt: finished,
				ContainerID: "standin://" + string(pod.UID),
			}},
		}}
	})
}

func podConditions(at metav1.Time, ready bool) []corev1.PodCondition {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: at},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: at},
		{Type: corev1.ContainersReady, Status: status, LastTransitionTime: at},
		{Type: corev1.PodReady, Status: status, LastTransitionTime: at},
	}
}

// updateStatus applies change to the pod's current status and writes it.
func (k *Kubelet) updateStatus(ctx context.Context, pod *corev1.Pod, change func(*corev1.PodStatus)) error {
	api := k.c.kube.CoreV1().Pods(pod.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := api.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != pod.UID || cur.Status.Phase == corev1.PodSucceeded || cur.Status.Phase == corev1.PodFailed {
			return nil
		}
		change(&cur.Status)
		_, err = api.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("updating the status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}
