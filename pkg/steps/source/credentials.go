package source

import (
	"context"

	"github.com/vmware/govmomi/object"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/vsphere"
)

// Credentials a restore may need after their Secret is gone.
//
// Deleting a migration's namespace deletes its credentials Secret, and a
// Terminating namespace accepts no new one, while a source the migration
// stopped must still be powered on again before its finalizer goes. So
// the step keeps, in memory only (vsphere.SessionCache.Keep), the
// credentials of each migration from the moment it stopped its source
// until its restore is done, and a restore whose Secret is gone uses them.
// The controller calls Remember for every migration it reconciles and
// Forget for one that is gone.

// credentialsOwner is the key credentials are kept under for m.
func credentialsOwner(m *v1alpha1.VirtualMachineMigration) string {
	return cache.MetaObjectToName(m).String()
}

// holdsSource reports whether m stopped a source it may still have to power
// on again: the credentials to do so are kept.
func holdsSource(m *v1alpha1.VirtualMachineMigration) bool {
	return m.Status.Phase != v1alpha1.PhaseSucceeded && statemachine.SourceNeedsRestore(&m.Status)
}

// endpointOf is the endpoint m's source is reached at.
func endpointOf(m *v1alpha1.VirtualMachineMigration) vsphere.Endpoint {
	spec := m.SpecInForce()
	return vsphere.Endpoint{URL: spec.Source.URL, Datacenter: spec.Source.Datacenter, InsecureSkipVerify: spec.Source.InsecureSkipVerify}
}

// Remember keeps the credentials of a migration that stopped its source
// (from its Secret in the cache, checked against its endpoint), and
// forgets them once it needs them no more.
func (s *Step) Remember(m *v1alpha1.VirtualMachineMigration) {
	if !holdsSource(m) {
		s.Sessions.Forget(credentialsOwner(m))
		return
	}
	secret, err := s.Secrets.Secrets(m.Namespace).Get(m.SpecInForce().Source.CredentialsSecretRef.Name)
	if err == nil {
		s.keep(m, endpointOf(m), secret)
	}
}

// Forget drops the credentials kept for the migration of key (it is gone).
func (s *Step) Forget(key cache.ObjectName) { s.Sessions.Forget(key.String()) }

// keep keeps the credentials of secret for m when m holds its source.
func (s *Step) keep(m *v1alpha1.VirtualMachineMigration, ep vsphere.Endpoint, secret *corev1.Secret) {
	if holdsSource(m) {
		// A Secret that may not be used for ep is never kept (the caller
		// checked it; Keep checks again).
		_ = s.Sessions.Keep(credentialsOwner(m), ep, secret)
	}
}

// connectKept connects m with the credentials kept for it, its Secret
// being gone, and finds its VM.
func (s *Step) connectKept(ctx context.Context, m *v1alpha1.VirtualMachineMigration, leave *func()) (*vsphere.Session, *object.VirtualMachine, *statemachine.ObservedError) {
	ep := endpointOf(m)
	gateLeave, err := s.Sessions.Enter(ep.URL)
	if err != nil {
		return nil, nil, classify(err)
	}
	*leave = gateLeave
	sess, err := s.Sessions.GetKept(ctx, credentialsOwner(m), ep)
	if err != nil {
		return nil, nil, classify(err)
	}
	return s.findVM(ctx, m, sess)
}
