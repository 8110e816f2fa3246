package controller

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/cache"
)

// stubInformer is one namespace's informer as the joined informer uses
// it: it records handlers and may refuse them; synced is what it and its
// registrations report. Methods it does not override are not called.
type stubInformer struct {
	cache.SharedIndexInformer
	synced   bool
	refuse   bool
	handlers map[*stubRegistration]bool
}

type stubRegistration struct {
	cache.ResourceEventHandlerRegistration
	informer *stubInformer
}

func (r *stubRegistration) HasSynced() bool { return r.informer.synced }

func newStub(synced, refuse bool) *stubInformer {
	return &stubInformer{synced: synced, refuse: refuse, handlers: map[*stubRegistration]bool{}}
}

func (s *stubInformer) AddEventHandler(cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	if s.refuse {
		return nil, errors.New("stopped")
	}
	r := &stubRegistration{informer: s}
	s.handlers[r] = true
	return r, nil
}

func (s *stubInformer) RemoveEventHandler(h cache.ResourceEventHandlerRegistration) error {
	delete(s.handlers, h.(*stubRegistration))
	return nil
}

func (s *stubInformer) HasSynced() bool { return s.synced }
func (s *stubInformer) GetIndexer() cache.Indexer {
	return cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil)
}

// TestFanOutInformerHandlers registers a handler on every namespace's
// informer, is synced only when all are, and removes it from all; a
// member that refuses the handler leaves none registered.
func TestFanOutInformerHandlers(t *testing.T) {
	tests := []struct {
		name       string
		a, b       *stubInformer
		wantErr    bool
		wantSynced bool
	}{
		{name: "both synced", a: newStub(true, false), b: newStub(true, false), wantSynced: true},
		{name: "one not synced", a: newStub(true, false), b: newStub(false, false)},
		{name: "one refuses", a: newStub(true, false), b: newStub(true, true), wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			joined := fanOut(map[string]cache.SharedIndexInformer{"a": tc.a, "b": tc.b})
			reg, err := joined.AddEventHandler(cache.ResourceEventHandlerFuncs{})
			if tc.wantErr {
				require.ErrorContains(t, err, `namespace "b"`)
				assert.Empty(t, tc.a.handlers, "the handler stays registered in namespace a")
				return
			}
			require.NoError(t, err)
			assert.Len(t, tc.a.handlers, 1)
			assert.Len(t, tc.b.handlers, 1)
			assert.Equal(t, tc.wantSynced, reg.HasSynced(), "registration synced")
			assert.Equal(t, tc.wantSynced, joined.HasSynced(), "informer synced")
			require.NoError(t, joined.RemoveEventHandler(reg))
			assert.Empty(t, tc.a.handlers)
			assert.Empty(t, tc.b.handlers)
		})
	}
}

// TestFanOutOfOneIsTheInformer keeps a controller of one namespace (or of
// all) on its informer itself.
func TestFanOutOfOneIsTheInformer(t *testing.T) {
	one := newStub(true, false)
	assert.Same(t, one, fanOut(map[string]cache.SharedIndexInformer{"a": one}))
	assert.NotSame(t, one, fanOut(map[string]cache.SharedIndexInformer{"a": one, "b": newStub(true, false)}))
}

// TestWatchedNamespaces normalises the namespace list.
func TestWatchedNamespaces(t *testing.T) {
	tests := []struct {
		name string
		in   []string
		want []string
	}{
		{"none is all", nil, []string{""}},
		{"all among others is all", []string{"b", "", "a"}, []string{""}},
		{"sorted, each once", []string{"b", "a", "b"}, []string{"a", "b"}},
		{"one", []string{"a"}, []string{"a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, WatchedNamespaces(tc.in))
		})
	}
}
