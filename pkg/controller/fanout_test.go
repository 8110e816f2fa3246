package controller

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	miglisters "platform.example/vm-migration/pkg/generated/migration/listers/migration/v1alpha1"
	"platform.example/vm-migration/test/builders"
)

// byPhase indexes migrations by phase: an index other than the
// namespace's, which a joined cache answers from every namespace.
const byPhase = "phase"

// migrationIndexer is one namespace's cache, as an informer builds it,
// holding ms.
func migrationIndexer(t *testing.T, ms ...*v1alpha1.VirtualMachineMigration) cache.Indexer {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{
		cache.NamespaceIndex: cache.MetaNamespaceIndexFunc,
		byPhase: func(obj any) ([]string, error) {
			return []string{string(obj.(*v1alpha1.VirtualMachineMigration).Status.Phase)}, nil
		},
	})
	for _, m := range ms {
		require.NoError(t, idx.Add(m))
	}
	return idx
}

// migrationIn is a migration named name in ns, in phase, with labels.
func migrationIn(ns, name string, phase v1alpha1.Phase, lbls map[string]string) *v1alpha1.VirtualMachineMigration {
	m := builders.Migration(builders.Named(name), builders.InNamespace(ns))
	m.Status.Phase = phase
	m.Labels = lbls
	return m
}

// keysOf are the namespace/name keys of ms.
func keysOf(ms []*v1alpha1.VirtualMachineMigration) []string {
	keys := []string{}
	for _, m := range ms {
		keys = append(keys, m.Namespace+"/"+m.Name)
	}
	return keys
}

// joinedMigrations is a joined cache of namespaces a and b (c is not
// watched): a/web and b/web labelled env=prod, a/db, and b/db Queued.
func joinedMigrations(t *testing.T) *fanoutIndexer {
	t.Helper()
	prod := map[string]string{"env": "prod"}
	return newFanoutIndexer(map[string]cache.Indexer{
		"a": migrationIndexer(t, migrationIn("a", "web", v1alpha1.PhasePending, prod), migrationIn("a", "db", v1alpha1.PhasePending, nil)),
		"b": migrationIndexer(t, migrationIn("b", "web", v1alpha1.PhasePending, prod), migrationIn("b", "db", v1alpha1.PhaseQueued, nil)),
	})
}

// TestFanOutListers reads a joined cache through the generated lister,
// as the controller does: reads of one namespace see that namespace, an
// unwatched namespace holds nothing, reads of all see every namespace.
func TestFanOutListers(t *testing.T) {
	lister := miglisters.NewVirtualMachineMigrationLister(joinedMigrations(t))
	prod := labels.SelectorFromSet(labels.Set{"env": "prod"})
	lists := []struct {
		name string
		list func() ([]*v1alpha1.VirtualMachineMigration, error)
		want []string
	}{
		{"every namespace", func() ([]*v1alpha1.VirtualMachineMigration, error) { return lister.List(labels.Everything()) },
			[]string{"a/db", "a/web", "b/db", "b/web"}},
		{"every namespace, by label", func() ([]*v1alpha1.VirtualMachineMigration, error) { return lister.List(prod) },
			[]string{"a/web", "b/web"}},
		{"one namespace", func() ([]*v1alpha1.VirtualMachineMigration, error) {
			return lister.VirtualMachineMigrations("b").List(labels.Everything())
		}, []string{"b/db", "b/web"}},
		{"one namespace, by label", func() ([]*v1alpha1.VirtualMachineMigration, error) {
			return lister.VirtualMachineMigrations("a").List(prod)
		}, []string{"a/web"}},
		{"a namespace not watched", func() ([]*v1alpha1.VirtualMachineMigration, error) {
			return lister.VirtualMachineMigrations("c").List(labels.Everything())
		}, []string{}},
	}
	for _, tc := range lists {
		t.Run("list "+tc.name, func(t *testing.T) {
			got, err := tc.list()
			require.NoError(t, err)
			assert.ElementsMatch(t, tc.want, keysOf(got))
		})
	}
	gets := []struct{ namespace, name, wantKey string }{
		{"a", "db", "a/db"},
		{"b", "web", "b/web"},
		{"b", "nope", ""},
		{"c", "web", ""},
	}
	for _, tc := range gets {
		t.Run("get "+tc.namespace+"/"+tc.name, func(t *testing.T) {
			m, err := lister.VirtualMachineMigrations(tc.namespace).Get(tc.name)
			if tc.wantKey == "" {
				assert.True(t, apierrors.IsNotFound(err), "want NotFound, got %v", err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.wantKey, m.Namespace+"/"+m.Name)
		})
	}
}

// TestFanOutIndexes answers the namespace index from one namespace and
// other indexes from all of them.
func TestFanOutIndexes(t *testing.T) {
	x := joinedMigrations(t)
	tests := []struct {
		name string
		read func() ([]string, error)
		want []string
	}{
		{"keys of one namespace", func() ([]string, error) { return x.IndexKeys(cache.NamespaceIndex, "b") }, []string{"b/db", "b/web"}},
		{"keys of a namespace not watched", func() ([]string, error) { return x.IndexKeys(cache.NamespaceIndex, "c") }, nil},
		{"keys by phase, across namespaces", func() ([]string, error) { return x.IndexKeys(byPhase, string(v1alpha1.PhasePending)) },
			[]string{"a/db", "a/web", "b/web"}},
		{"objects by phase, across namespaces", func() ([]string, error) {
			objs, err := x.ByIndex(byPhase, string(v1alpha1.PhaseQueued))
			return objectKeys(t, objs), err
		}, []string{"b/db"}},
		{"objects of one namespace", func() ([]string, error) {
			objs, err := x.ByIndex(cache.NamespaceIndex, "a")
			return objectKeys(t, objs), err
		}, []string{"a/db", "a/web"}},
		{"objects like one", func() ([]string, error) {
			objs, err := x.Index(byPhase, migrationIn("z", "any", v1alpha1.PhaseQueued, nil))
			return objectKeys(t, objs), err
		}, []string{"b/db"}},
		{"every key", func() ([]string, error) { return x.ListKeys(), nil }, []string{"a/db", "a/web", "b/db", "b/web"}},
		{"every object", func() ([]string, error) { return objectKeys(t, x.List()), nil }, []string{"a/db", "a/web", "b/db", "b/web"}},
		{"index values, each once", func() ([]string, error) { return x.ListIndexFuncValues(byPhase), nil },
			[]string{string(v1alpha1.PhasePending), string(v1alpha1.PhaseQueued)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.read()
			require.NoError(t, err)
			assert.ElementsMatch(t, tc.want, got)
		})
	}
	_, err := x.ByIndex("no-such-index", "x")
	assert.Error(t, err, "an unknown index is an error, as in one namespace's cache")
}

// objectKeys are the keys of cached objects.
func objectKeys(t *testing.T, objs []any) []string {
	t.Helper()
	keys := []string{}
	for _, o := range objs {
		k, err := cache.MetaNamespaceKeyFunc(o)
		require.NoError(t, err)
		keys = append(keys, k)
	}
	return keys
}

// TestFanOutRoutesByNamespace reads a namespace from its own cache only:
// an object that another namespace's cache holds (which never happens
// with real informers) is not seen through the namespace it names.
func TestFanOutRoutesByNamespace(t *testing.T) {
	stray := migrationIn("b", "stray", v1alpha1.PhasePending, nil)
	x := newFanoutIndexer(map[string]cache.Indexer{
		"a": migrationIndexer(t, stray),
		"b": migrationIndexer(t),
	})
	_, exists, err := x.GetByKey("b/stray")
	require.NoError(t, err)
	assert.False(t, exists, "GetByKey read another namespace's cache")
	_, exists, err = x.Get(stray)
	require.NoError(t, err)
	assert.False(t, exists, "Get read another namespace's cache")
	inB, err := x.ByIndex(cache.NamespaceIndex, "b")
	require.NoError(t, err)
	assert.Empty(t, inB)
}

// TestFanOutOfAllNamespaces reads every namespace from an all-namespaces
// member.
func TestFanOutOfAllNamespaces(t *testing.T) {
	x := newFanoutIndexer(map[string]cache.Indexer{"": migrationIndexer(t, migrationIn("c", "web", v1alpha1.PhasePending, nil))})
	m, err := miglisters.NewVirtualMachineMigrationLister(x).VirtualMachineMigrations("c").Get("web")
	require.NoError(t, err)
	assert.Equal(t, "c", m.Namespace)
}

// TestFanOutIsReadOnly refuses every write and leaves the members as
// they were.
func TestFanOutIsReadOnly(t *testing.T) {
	x := joinedMigrations(t)
	m := migrationIn("a", "new", v1alpha1.PhasePending, nil)
	writes := map[string]func() error{
		"add":     func() error { return x.Add(m) },
		"update":  func() error { return x.Update(migrationIn("a", "web", v1alpha1.PhaseQueued, nil)) },
		"delete":  func() error { return x.Delete(migrationIn("a", "web", v1alpha1.PhasePending, nil)) },
		"replace": func() error { return x.Replace([]any{m}, "1") },
	}
	for name, write := range writes {
		t.Run(name, func(t *testing.T) {
			assert.True(t, errors.Is(write(), errReadOnly))
			assert.ElementsMatch(t, []string{"a/db", "a/web", "b/db", "b/web"}, x.ListKeys())
			web, _, err := x.GetByKey("a/web")
			require.NoError(t, err)
			assert.Equal(t, v1alpha1.PhasePending, web.(*v1alpha1.VirtualMachineMigration).Status.Phase)
		})
	}
}
