package pipeline

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/preflight"
	"platform.example/vm-migration/pkg/statemachine"
)

// ObserveCluster asks the API server, where the caches cannot tell, what
// the cluster says of m: in Validating (inv is its inventory) the dry run
// of its objects, the refusals of its proof pods, what the namespace
// and KubeVirt say of launcher pods, whether its Multus networks are
// defined and what CDI's StorageProfiles give the claims; in Queued, once a transfer slot is
// free, the dry run again, right before the stop; while its Jobs run, why
// the API server refused their pods. It fills obs and returns what the
// preflight rules read of it (the dry run, the proofs, the conversion
// image's drivers, the launcher facts). It changes nothing in the cluster.
func (s *Step) ObserveCluster(ctx context.Context, m *v1alpha1.VirtualMachineMigration, inv *v1alpha1.SourceInventory, obs *statemachine.Observation) (preflight.ClusterFacts, error) {
	var facts preflight.ClusterFacts
	if m.DeletionTimestamp != nil || m.Spec.Policy.Paused {
		return facts, nil
	}
	var err error
	switch m.Status.Phase {
	case v1alpha1.PhaseValidating:
		if inv == nil {
			return facts, nil
		}
		if s.Config.DryRun {
			obs.DryRun = s.DryRun(ctx, m, inv)
		}
		if m.Status.Source == nil {
			// Its first look: the proofs' keys come from the pods of
			// the inventory just read.
			withInv := m.DeepCopy()
			withInv.Status.Source = inv
			s.observeProofs(withInv, obs)
		}
		if err = s.proofRefusals(ctx, m, obs); err == nil && s.Config.ClusterFacts {
			facts.Launcher, err = s.LauncherFacts(ctx, m.Namespace)
		}
		if err == nil && s.Config.ClusterFacts {
			facts.NetworkDefinitions, err = s.NetworkDefinitions(ctx, m)
		}
		if err == nil && s.Config.ClusterFacts {
			facts.StorageProfiles, err = s.StorageProfiles(ctx)
		}
	case v1alpha1.PhaseQueued:
		// Right before the stop: not while the migration waits for a
		// transfer slot or conversion capacity (a wave waiting there
		// would send each one's dry run every wait interval).
		if s.Config.DryRun && inv != nil && obs.TransferSlot.Available && !obs.ConversionCapacity.Full {
			obs.DryRun = s.DryRun(ctx, m, inv)
		}
	case v1alpha1.PhaseTransferringDisks, v1alpha1.PhaseConverting:
		if s.Config.ClusterFacts {
			err = s.jobRefusals(ctx, m, obs)
		}
	}
	preflightFacts(obs, &facts)
	return facts, err
}

// proofRefusals fails the running proofs whose pod the API server refused
// (the shared Job's FailedCreate events, read once per Job for every
// migration of its key).
func (s *Step) proofRefusals(ctx context.Context, m *v1alpha1.VirtualMachineMigration, obs *statemachine.Observation) error {
	for i := range obs.Proofs {
		p := &obs.Proofs[i]
		if p.Result != nil || !p.Running || p.Stale != nil {
			continue
		}
		job, err := s.Listers.Jobs.Jobs(m.Namespace).Get(p.JobName)
		if err != nil || !isProofObject(job, job.Labels[v1alpha1.LabelProofKey]) || job.DeletionTimestamp != nil {
			continue
		}
		now := s.now()
		problem, err := s.failedCreate(ctx, job, now)
		if err != nil {
			return err
		}
		if problem == nil {
			continue
		}
		key := job.Labels[v1alpha1.LabelProofKey]
		at := now
		if t, ok := s.proofs.failedAt(key, job.UID); ok {
			at = t
		}
		res := &v1alpha1.ImageProof{Component: p.Component, Image: jobImage(job), JobName: job.Name, Key: key,
			CheckedAt: metav1.NewTime(at), Result: v1alpha1.ProofFailed, Reason: problem.Reason, Message: problem.Message}
		if madeBefore(at, m) {
			// Refused before this validation began: proven again.
			ref := refTo(statemachine.KindJob, job)
			p.Running, p.Stale, p.Waiting = false, &ref, ""
			continue
		}
		s.proofs.put(*res, job.UID, now, s.Config.proofTTL())
		p.Result, p.Running, p.Waiting = res, false, ""
	}
	return nil
}

// jobRefusals says, of a transfer or conversion Job whose pod has not
// started, why: the API server refused its pod (it has none), or a claim
// it mounts is not provisioned.
func (s *Step) jobRefusals(ctx context.Context, m *v1alpha1.VirtualMachineMigration, obs *statemachine.Observation) error {
	for _, o := range []*statemachine.JobObservation{obs.TransferJob, obs.ConversionJob} {
		if o == nil || o.Succeeded || o.Failed || o.StartProblem != nil {
			continue
		}
		job, err := s.Listers.Jobs.Jobs(m.Namespace).Get(o.Name)
		if err != nil || !ours(job, m.UID) {
			continue
		}
		problem, err := s.failedCreate(ctx, job, s.now())
		if err == nil && problem == nil {
			problem, err = s.claimProblem(ctx, job, s.now())
		}
		if err != nil {
			return err
		}
		o.StartProblem = problem
	}
	return nil
}

// proofResults are the results of the observed proofs.
func proofResults(obs *statemachine.Observation) []v1alpha1.ImageProof {
	var out []v1alpha1.ImageProof
	for _, p := range obs.Proofs {
		if p.Result != nil {
			out = append(out, *p.Result)
		}
	}
	return out
}

// preflightFacts adds to facts what the pipeline observed for the
// preflight rules: the dry run, the proofs' results and the conversion
// image's virtio-win drivers as its self-check reported them.
func preflightFacts(obs *statemachine.Observation, facts *preflight.ClusterFacts) {
	if obs.DryRun != nil {
		facts.DryRun = obs.DryRun.Status
	}
	facts.Proofs = proofResults(obs)
	for _, p := range facts.Proofs {
		if p.Component != v1alpha1.ComponentConversion || p.Result != v1alpha1.ProofPassed {
			continue
		}
		if r, err := ParseConversionSelfCheck(p.Output); err == nil && r.VirtioWin != nil {
			facts.ConversionVirtioWin = &preflight.VirtioWin{Path: r.VirtioWin.Path, Present: r.VirtioWin.Present}
		}
	}
}
