package controller

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// A controller that watches several namespaces runs one informer per
// namespace and resource (the API server watches one namespace or all of
// them, nothing in between). fanOut joins the informers of one resource
// into one cache.SharedIndexInformer, so that what reads and listens
// (listers built by the generated New...Lister functions, event handlers,
// HasSynced) stays as it is with one namespace:
//   - reads of one namespace (Get, GetByKey, the namespace index that a
//     lister's namespaced List uses) go to that namespace's informer only;
//     a namespace that is not watched holds nothing;
//   - reads of every namespace (List, ListKeys, other indexes)
//     concatenate the informers', in namespace order;
//   - a handler is registered on every informer and is synced when all
//     its registrations are;
//   - the joined cache is read-only: each informer writes its own.

// errReadOnly is the error of a write to a joined cache.
var errReadOnly = errors.New("the cache of several namespaces is read-only: each namespace's informer writes its own")

// fanOut joins the informers of one resource, keyed by namespace. One
// informer is returned as it is, so that a controller of one namespace, or
// of all of them, reads its informer directly.
func fanOut(byNamespace map[string]cache.SharedIndexInformer) cache.SharedIndexInformer {
	if len(byNamespace) == 1 {
		for _, informer := range byNamespace {
			return informer
		}
	}
	indexers := make(map[string]cache.Indexer, len(byNamespace))
	for ns, informer := range byNamespace {
		indexers[ns] = informer.GetIndexer()
	}
	indexer := newFanoutIndexer(indexers)
	return &fanoutInformer{namespaces: indexer.namespaces, members: byNamespace, indexer: indexer}
}

// newFanoutIndexer joins the indexers, keyed by namespace.
func newFanoutIndexer(byNamespace map[string]cache.Indexer) *fanoutIndexer {
	return &fanoutIndexer{namespaces: slices.Sorted(maps.Keys(byNamespace)), members: byNamespace}
}

// fanoutIndexer is a read-only cache.Indexer over the indexers of several
// namespaces. members never changes after construction, and each member
// is safe for concurrent use, so the joined indexer is too.
type fanoutIndexer struct {
	namespaces []string
	members    map[string]cache.Indexer
}

var _ cache.Indexer = &fanoutIndexer{}

// owner is the indexer that holds the objects of namespace ns: its own,
// or the all-namespaces member's if there is one; nil when ns is not
// watched.
func (x *fanoutIndexer) owner(ns string) cache.Indexer {
	if m, ok := x.members[ns]; ok {
		return m
	}
	return x.members[metav1.NamespaceAll]
}

// each concatenates what read returns of every member, in namespace order.
func each[T any](x *fanoutIndexer, read func(cache.Indexer) ([]T, error)) ([]T, error) {
	var out []T
	for _, ns := range x.namespaces {
		got, err := read(x.members[ns])
		if err != nil {
			return nil, fmt.Errorf("reading the cache of namespace %q: %w", ns, err)
		}
		out = append(out, got...)
	}
	return out, nil
}

// Add refuses: the joined cache is read-only.
func (x *fanoutIndexer) Add(any) error { return errReadOnly }

// Update refuses: the joined cache is read-only.
func (x *fanoutIndexer) Update(any) error { return errReadOnly }

// Delete refuses: the joined cache is read-only.
func (x *fanoutIndexer) Delete(any) error { return errReadOnly }

// Replace refuses: the joined cache is read-only.
func (x *fanoutIndexer) Replace([]any, string) error { return errReadOnly }

// Resync does nothing, as it does in an informer's own cache.
func (x *fanoutIndexer) Resync() error { return nil }

// Bookmark does nothing: each member follows its own watch.
func (x *fanoutIndexer) Bookmark(string) {}

// LastStoreSyncResourceVersion is empty: no one version describes several
// watches.
func (x *fanoutIndexer) LastStoreSyncResourceVersion() string { return "" }

// List returns the objects of every watched namespace.
func (x *fanoutIndexer) List() []any {
	out, _ := each(x, func(m cache.Indexer) ([]any, error) { return m.List(), nil })
	return out
}

// ListKeys returns the keys of every watched namespace.
func (x *fanoutIndexer) ListKeys() []string {
	out, _ := each(x, func(m cache.Indexer) ([]string, error) { return m.ListKeys(), nil })
	return out
}

// Get looks obj up in its namespace's cache.
func (x *fanoutIndexer) Get(obj any) (any, bool, error) {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return nil, false, fmt.Errorf("looking up an object in the cache: %w", err)
	}
	m := x.owner(acc.GetNamespace())
	if m == nil {
		return nil, false, nil
	}
	return m.Get(obj)
}

// GetByKey looks a namespace/name key up in its namespace's cache.
func (x *fanoutIndexer) GetByKey(key string) (any, bool, error) {
	ns, _, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil, false, fmt.Errorf("looking up %q in the cache: %w", key, err)
	}
	m := x.owner(ns)
	if m == nil {
		return nil, false, nil
	}
	return m.GetByKey(key)
}

// Index returns the objects that share an index value with obj: from
// obj's namespace alone for the namespace index, from every namespace
// otherwise.
func (x *fanoutIndexer) Index(indexName string, obj any) ([]any, error) {
	if indexName == cache.NamespaceIndex {
		acc, err := meta.Accessor(obj)
		if err != nil {
			return nil, fmt.Errorf("reading the namespace to index by: %w", err)
		}
		m := x.owner(acc.GetNamespace())
		if m == nil {
			return nil, nil
		}
		return m.Index(indexName, obj)
	}
	return each(x, func(m cache.Indexer) ([]any, error) { return m.Index(indexName, obj) })
}

// IndexKeys returns the keys of the objects with that index value.
func (x *fanoutIndexer) IndexKeys(indexName, indexedValue string) ([]string, error) {
	if indexName == cache.NamespaceIndex {
		m := x.owner(indexedValue)
		if m == nil {
			return nil, nil
		}
		return m.IndexKeys(indexName, indexedValue)
	}
	return each(x, func(m cache.Indexer) ([]string, error) { return m.IndexKeys(indexName, indexedValue) })
}

// ByIndex returns the objects with that index value.
func (x *fanoutIndexer) ByIndex(indexName, indexedValue string) ([]any, error) {
	if indexName == cache.NamespaceIndex {
		m := x.owner(indexedValue)
		if m == nil {
			return nil, nil
		}
		return m.ByIndex(indexName, indexedValue)
	}
	return each(x, func(m cache.Indexer) ([]any, error) { return m.ByIndex(indexName, indexedValue) })
}

// ListIndexFuncValues returns the values of an index in any namespace,
// each once, sorted.
func (x *fanoutIndexer) ListIndexFuncValues(indexName string) []string {
	all, _ := each(x, func(m cache.Indexer) ([]string, error) { return m.ListIndexFuncValues(indexName), nil })
	slices.Sort(all)
	return slices.Compact(all)
}

// GetIndexers returns the indexers, the same in every member.
func (x *fanoutIndexer) GetIndexers() cache.Indexers {
	return x.members[x.namespaces[0]].GetIndexers()
}

// AddIndexers adds the indexers to every member.
func (x *fanoutIndexer) AddIndexers(newIndexers cache.Indexers) error {
	var errs []error
	for _, ns := range x.namespaces {
		if err := x.members[ns].AddIndexers(newIndexers); err != nil {
			errs = append(errs, fmt.Errorf("namespace %q: %w", ns, err))
		}
	}
	return errors.Join(errs...)
}
