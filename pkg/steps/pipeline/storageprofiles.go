package pipeline

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"platform.example/vm-migration/pkg/preflight"
)

// storageProfileTTL is how long one read of CDI's StorageProfiles serves
// every migration.
const storageProfileTTL = time.Minute

// storageProfileCache keeps the last read of the StorageProfiles.
type storageProfileCache struct {
	mu       sync.Mutex
	at       time.Time
	profiles map[string]preflight.StorageProfileFact
}

// StorageProfiles lists CDI's StorageProfiles (one per storage class, a
// few objects), at most once a minute for all migrations: what access
// modes CDI gives the claims of each class when a DataVolume names none.
// Nil when the cluster has none to tell (no CDI) or they may not be read.
func (s *Step) StorageProfiles(ctx context.Context) (map[string]preflight.StorageProfileFact, error) {
	if s.CDI == nil {
		return nil, nil
	}
	now := s.now()
	c := &s.storageProfiles
	c.mu.Lock()
	if !c.at.IsZero() && now.Sub(c.at) < storageProfileTTL {
		defer c.mu.Unlock()
		return c.profiles, nil
	}
	c.mu.Unlock()
	list, err := s.CDI.CdiV1beta1().StorageProfiles().List(ctx, metav1.ListOptions{})
	var profiles map[string]preflight.StorageProfileFact
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsMethodNotSupported(err):
	case err != nil:
		return nil, fmt.Errorf("listing CDI's StorageProfiles: %w", err)
	default:
		profiles = map[string]preflight.StorageProfileFact{}
		for _, p := range list.Items {
			sets := p.Spec.ClaimPropertySets
			if len(sets) == 0 {
				sets = p.Status.ClaimPropertySets
			}
			fact := preflight.StorageProfileFact{ClaimPropertySets: len(sets)}
			if len(sets) > 0 {
				fact.AccessModes, fact.VolumeMode = slices.Clone(sets[0].AccessModes), sets[0].VolumeMode
			}
			for _, set := range sets {
				fact.Sets = append(fact.Sets, preflight.ClaimProperties{AccessModes: slices.Clone(set.AccessModes), VolumeMode: set.VolumeMode})
			}
			if p.Status.Provisioner != nil {
				fact.Provisioner = *p.Status.Provisioner
			}
			profiles[p.Name] = fact
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at, c.profiles = now, profiles
	return profiles, nil
}
