package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/steps/pipeline"
)

// podFlags are the flags of what the cluster is asked before the source
// is stopped (the dry run, the image proofs) and of the pods the
// controller runs: their pull secrets, identity, and how long one may
// take to start once the source is off.
type podFlags struct {
	runAsUser, runAsGroup, fsGroup idValue
}

// idValue is a flag holding a numeric id, or "none" for none.
type idValue struct {
	id  *int64
	set bool
}

func (v *idValue) String() string {
	if v == nil || v.id == nil {
		return "none"
	}
	return strconv.FormatInt(*v.id, 10)
}

func (v *idValue) Set(s string) error {
	v.set = true
	if s == "none" || s == "" {
		v.id = nil
		return nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("%q is not a numeric id or none", s)
	}
	v.id = &n
	return nil
}

// addPodFlags registers the flags.
func (f *flags) addPodFlags(fs *flag.FlagSet) {
	p, def := &f.pods, pipeline.DefaultPodIdentity()
	p.runAsUser, p.runAsGroup, p.fsGroup = idValue{id: def.RunAsUser}, idValue{id: def.RunAsGroup}, idValue{id: def.FSGroup}
	fs.BoolVar(&f.opts.Pipeline.DryRun, "dry-run-before-stop", true, "send every object a migration creates to the API server with dryRun=All in Validating and again right before the source is stopped; a refusal fails the migration with the source untouched")
	fs.BoolVar(&f.opts.Pipeline.ImageProofs, "image-proofs", true, "in Validating, run a short pod per image (transfer, conversion) in the migration's namespace, shaped as the pods that will run it, with the image's self-check; a pod that is refused, does not start or fails its self-check fails the migration with the source untouched")
	fs.DurationVar(&f.opts.Pipeline.ProofTimeout, "image-proof-timeout", pipeline.DefaultProofTimeout, "how long an image proof's pod may take (waiting for a node, its image) before the proof fails")
	fs.DurationVar(&f.opts.Pipeline.ProofTTL, "image-proof-ttl", pipeline.DefaultProofTTL, "how long a passed image proof serves the migrations of its namespace whose pods have the same image and shape")
	fs.DurationVar(&f.opts.Decisions.PodStartTimeout, "pod-start-timeout", statemachine.DefaultPodStartTimeout, "how long, once the source is off, a transfer or conversion pod may stay unstarted for a reason a person must fix (image pull, admission, scheduling, container config) before the attempt counts as failed; the retries then roll the source back")
	fs.Func("image-pull-secret", "a Secret (by name, in each migration's namespace; repeat the flag or separate with commas) every transfer, conversion and proof pod, and every transfer ServiceAccount, pulls its image with, beside the migration's spec.imagePullSecrets", f.addPullSecrets)
	fs.Var(&p.runAsUser, "pod-run-as-user", "uid of the transfer, conversion and proof pods, or none to leave it to the image and the platform (OpenShift's restricted-v2 SCC assigns one from the namespace's range)")
	fs.Var(&p.runAsGroup, "pod-run-as-group", "gid of those pods, or none")
	fs.Var(&p.fsGroup, "pod-fs-group", "fsGroup of those pods' volumes, or none (OpenShift assigns the namespace's)")
}

// addPullSecrets adds comma-separated Secret names.
func (f *flags) addPullSecrets(v string) error {
	for _, name := range strings.Split(v, ",") {
		if name = strings.TrimSpace(name); name != "" {
			if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
				return fmt.Errorf("%q is not a Secret name: %s", name, strings.Join(errs, "; "))
			}
			f.opts.Pipeline.ImagePullSecrets = append(f.opts.Pipeline.ImagePullSecrets, name)
		}
	}
	return nil
}

// completePods checks the pod flags and sets the pipeline's pod identity.
func (f *flags) completePods() error {
	p := &f.pods
	switch {
	case f.opts.Decisions.PodStartTimeout < 10*time.Second:
		return fmt.Errorf("--pod-start-timeout must be at least 10s, got %s", f.opts.Decisions.PodStartTimeout)
	case f.opts.Pipeline.ProofTimeout < 10*time.Second || f.opts.Pipeline.ProofTTL < 0:
		return fmt.Errorf("--image-proof-timeout must be at least 10s and --image-proof-ttl not negative")
	}
	if p.runAsUser.set || p.runAsGroup.set || p.fsGroup.set {
		f.opts.Pipeline.PodIdentity = &pipeline.PodIdentity{RunAsUser: p.runAsUser.id, RunAsGroup: p.runAsGroup.id, FSGroup: p.fsGroup.id}
	}
	// What the caches cannot tell is read where it matters (a Job's
	// refused pod, the launcher's admission in Validating).
	f.opts.Pipeline.ClusterFacts = true
	return nil
}

// seccompProfile reads --conversion-seccomp-profile: RuntimeDefault,
// Unconfined, or a Localhost profile (localhost/<path> or <path>).
func seccompProfile(v string) *corev1.SeccompProfile {
	switch v {
	case "":
		return nil
	case string(corev1.SeccompProfileTypeRuntimeDefault), string(corev1.SeccompProfileTypeUnconfined):
		return &corev1.SeccompProfile{Type: corev1.SeccompProfileType(v)}
	}
	path := strings.TrimPrefix(v, "localhost/")
	return &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: &path}
}
