package controller

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/steps/pipeline"
	"platform.example/vm-migration/test/builders"
	"platform.example/vm-migration/test/fakes"
)

// TestCachesDropManagedFields: what the running informers of a Watch cache
// (migrations, children, credentials Secrets, names), for all namespaces
// or for a list of them, carries no managedFields.
func TestCachesDropManagedFields(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1"}}
	m := builders.Migration(builders.InNamespace("team-a"))
	claim := builders.StagingClaim(m, "child")
	secret := builders.CredentialsSecret("team-a", builders.SecretName, map[string]string{"username": "u", "password": "p"})
	for _, o := range []metav1.Object{m, claim, secret} {
		o.SetManagedFields(managed)
		o.SetAnnotations(map[string]string{corev1.LastAppliedConfigAnnotation: `{"spec":"a copy"}`, "team": "a"})
	}
	for name, namespaces := range map[string][]string{"all namespaces": nil, "listed namespaces": {"team-a", "team-b"}} {
		t.Run(name, func(t *testing.T) {
			cl := fakes.NewCluster(t, m, claim, secret)
			clients := Clients{Kube: cl.Kube, Migration: cl.Mig, KubeVirt: cl.KV, CDI: cl.CDI, Metadata: cl.Meta}
			w := NewWatch(clients, namespaces, 0)
			inf := w.Informers(w.Children(pipeline.ChildInformers))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			w.Start(ctx)
			defer func() {
				cancel()
				w.Shutdown()
			}()
			caches := map[string]cache.SharedIndexInformer{
				"migration": inf.Migrations, "claim": inf.Children["persistentvolumeclaims"], "secret": inf.Secrets,
			}
			for what, informer := range caches {
				require.True(t, cache.WaitForCacheSync(ctx.Done(), informer.HasSynced), what)
				objs := informer.GetIndexer().List()
				require.Len(t, objs, 1, what)
				acc, err := meta.Accessor(objs[0])
				require.NoError(t, err)
				assert.Empty(t, acc.GetManagedFields(), "the cached %s keeps its managedFields", what)
				if what != "claim" { // the step's own transform keeps a child's metadata
					assert.Equal(t, map[string]string{"team": "a"}, acc.GetAnnotations(), "the cached %s's annotations, want kubectl's last applied configuration dropped and the rest kept", what)
				}
			}
		})
	}
}

// TestNameCachesKeepNamesAndMigrationUID: the name caches keep what
// foreign reads of an object, its name and its migration UID label, and
// nothing else, in a form the informer's keys and indexes read.
func TestNameCachesKeepNamesAndMigrationUID(t *testing.T) {
	tests := []struct {
		name   string
		obj    *metav1.PartialObjectMetadata
		labels map[string]string
	}{
		{name: "foreign VM applied by a GitOps tool", obj: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
			Name: "web-01", Namespace: "apps", Labels: map[string]string{"app": "web"}, ResourceVersion: "7",
			Annotations:     map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"a":"very long document"}`},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "argocd"}},
			OwnerReferences: []metav1.OwnerReference{{Name: "app-set"}}, Finalizers: []string{"argocd"},
		}}},
		{name: "a migration's claim", obj: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
			Name: "web-01-disk-0", Namespace: "apps", ResourceVersion: "8", UID: "claim-uid",
			Labels: map[string]string{v1alpha1.LabelMigrationUID: "u1", v1alpha1.LabelComponent: "import", "app": "web"},
		}}, labels: map[string]string{v1alpha1.LabelMigrationUID: "u1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := stripNameMetadata(tt.obj.DeepCopy())
			require.NoError(t, err)
			acc, err := meta.Accessor(got)
			require.NoError(t, err)
			assert.Equal(t, &metav1.ObjectMeta{Name: tt.obj.Name, Namespace: tt.obj.Namespace, Labels: tt.labels}, acc)
			key, err := cache.MetaNamespaceKeyFunc(got)
			require.NoError(t, err)
			assert.Equal(t, "apps/"+tt.obj.Name, key)
			ns, err := cache.MetaNamespaceIndexFunc(got)
			require.NoError(t, err)
			assert.Equal(t, []string{"apps"}, ns)
		})
	}
}
