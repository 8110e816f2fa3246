package controller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/preflight"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/steps/pipeline"
)

// observe builds the observation the decision needs. It reads the informer
// caches and, for what the phase needs of the source, vSphere; it changes
// nothing (a transfer slot or a conversion slot is only looked at here:
// reserveSlot and reserveConversion take them).
// Failures of the source are returned inside the observation, classified;
// only a failure to read the controller's own caches is an error.
func (c *Controller) observe(ctx context.Context, m *v1alpha1.VirtualMachineMigration) (statemachine.Observation, error) {
	var obs statemachine.Observation
	err := c.steps.Pipeline.Observe(m, &obs)
	if err != nil {
		return obs, err
	}
	need := statemachine.NeedsSource(m)
	if looksAtSlot(m) {
		holders, err := c.slotCounted(m)
		if err != nil {
			return obs, err
		}
		obs.TransferSlot = c.slots.look(m, holders, c.limits(), c.clock.Now())
		if !obs.TransferSlot.Available {
			// A migration waiting for a slot does not look at its source.
			need = statemachine.SourceNeedNothing
		}
	}
	if waitsForSlot(m) && m.Status.Phase == v1alpha1.PhaseQueued && obs.TransferSlot.Available {
		if obs.ConversionCapacity, err = c.lookConversion(m); err != nil {
			return obs, err
		}
		if obs.ConversionCapacity.Full {
			// Nor does one waiting for a conversion slot.
			need = statemachine.SourceNeedNothing
		}
	}
	if recorded := statemachine.RecordedSource(m, c.clock.Now()); need == statemachine.SourceNeedInventory && recorded != nil {
		obs.Source = *recorded
	} else if need != statemachine.SourceNeedNothing {
		obs.Source = c.steps.Source.Observe(ctx, m, need)
		if m.DeletionTimestamp != nil && obs.Source.Error != nil {
			obs.NamespaceTerminating = c.namespaceTerminating(ctx, m.Namespace)
		}
	}
	if statemachine.NeedsLiveTargetInstance(m, &obs) {
		// The instance cache can lag behind KubeVirt: before the source
		// may be powered on again, the API server itself is asked.
		obs.LiveVMI = c.steps.Pipeline.ReadTargetInstance(ctx, m)
	}
	inv := m.Status.Source
	if need == statemachine.SourceNeedInventory {
		inv = nil
		if obs.Source.Error == nil {
			inv = obs.Source.Inventory
		}
	}
	seen, err := c.steps.Pipeline.ObserveCluster(ctx, m, inv, &obs)
	if err != nil {
		return obs, err
	}
	if m.Status.Phase == v1alpha1.PhaseQueued && seen.DryRun != nil {
		obs.Preflight = preflight.DryRunFindings(seen.DryRun)
	}
	if need == statemachine.SourceNeedInventory && inv != nil {
		facts, err := c.clusterFacts(m, inv, seen)
		if err != nil {
			return obs, err
		}
		obs.Preflight = preflight.Check(m.SpecInForce(), inv, facts)
		obs.SourceCopies = facts.SourceCopies
		for i := range obs.Proofs {
			if why := preflight.ImageRefused(obs.Preflight, obs.Proofs[i].Component); why != "" {
				obs.Proofs[i].NotRun = why
			}
		}
		if obs.Claims, err = c.lookClaims(m, inv); err != nil {
			return obs, err
		}
	}
	return obs, nil
}

// lookClaims names the migrations in flight that already migrate m's
// source VM or create its target VM (read-only: reserveClaims takes them).
func (c *Controller) lookClaims(m *v1alpha1.VirtualMachineMigration, inv *v1alpha1.SourceInventory) (statemachine.ClaimObservation, error) {
	spec := m.SpecInForce()
	want := claim{sources: sourceClaimKeys(spec.Source.URL, inv), target: m.Namespace + "/" + statemachine.TargetName(spec, inv)}
	holders, err := c.claimHolders(want)
	if err != nil {
		return statemachine.ClaimObservation{}, err
	}
	return c.claims.look(m, want, holders, c.clock.Now()), nil
}

// clusterFacts is what the preflight rules need of the cluster: what the
// pipeline asked the API server (seen, whole), and from the caches the
// storage classes and whether the target VM's name is taken.
func (c *Controller) clusterFacts(m *v1alpha1.VirtualMachineMigration, inv *v1alpha1.SourceInventory, seen preflight.ClusterFacts) (preflight.ClusterFacts, error) {
	facts := seen
	facts.StorageClasses, facts.DefaultConversionImage = map[string]bool{}, c.cfg.DefaultConversionImage
	var err error
	classes, err := c.storageClasses.List(labels.Everything())
	if err != nil {
		return facts, fmt.Errorf("listing storage classes: %w", err)
	}
	for _, sc := range classes {
		facts.StorageClasses[sc.Name] = true
		if sc.Annotations[pipeline.AnnotationDefaultStorageClass] == "true" {
			facts.DefaultStorageClass = sc.Name
		}
	}
	facts.TargetName = statemachine.TargetName(m.SpecInForce(), inv)
	facts.TargetNameTaken, facts.TakenNames, err = c.takenNames(m, inv, facts.TargetName)
	if err != nil {
		return facts, err
	}
	if err := c.migratedFacts(m, inv, &facts); err != nil {
		return facts, err
	}
	facts.AllowedConversionImages = c.cfg.AllowedConversionImages
	if sc := m.Status.SourceControl; sc != nil {
		for _, snap := range sc.Snapshots {
			facts.ControllerSnapshots = append(facts.ControllerSnapshots, snap.Name)
		}
	}
	return facts, nil
}

// limits are the transfer slot limits in force.
func (c *Controller) limits() slotLimits {
	return slotLimits{perHost: c.cfg.MaxTransfersPerHost, perDatastore: c.cfg.MaxTransfersPerDatastore}
}
