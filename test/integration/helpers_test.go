//go:build integration

package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	migrationclient "platform.example/vm-migration/pkg/generated/migration/clientset/versioned"
	"platform.example/vm-migration/pkg/manager"
	"platform.example/vm-migration/test/builders"
	"platform.example/vm-migration/test/framework"
)

// migrationGVR is the VirtualMachineMigration resource.
var migrationGVR = schema.GroupVersionResource{Group: "migration.platform.example", Version: "v1alpha1", Resource: "virtualmachinemigrations"}

// testContext returns a context bounded for one API round trip sequence.
func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// migrations returns a dynamic client for migrations in ns.
func migrations(t *testing.T, env *framework.Environment, ns string) dynamic.ResourceInterface {
	t.Helper()
	return env.Dynamic(t).Resource(migrationGVR).Namespace(ns)
}

// migrationClient returns the project's typed clientset.
func migrationClient(t *testing.T, env *framework.Environment) migrationclient.Interface {
	t.Helper()
	cs, err := migrationclient.NewForConfig(env.Config())
	require.NoError(t, err, "creating migration clientset")
	return cs
}

// modifier changes a migration under construction.
type modifier func(obj map[string]any)

// newMigration returns a valid minimal migration named name (the shared
// builder's, as a client sends it), changed by mods.
func newMigration(name string, mods ...modifier) *unstructured.Unstructured {
	u := builders.Unstructured(builders.Migration(builders.Named(name),
		builders.Credentials("vcenter-credentials"), builders.SourceVM("web-01")))
	for _, m := range mods {
		m(u.Object)
	}
	return u
}

// set sets the value at the dotted path (spec.source.url), creating maps
// on the way.
func set(path string, value any) modifier {
	return func(obj map[string]any) {
		keys := strings.Split(path, ".")
		m := obj
		for _, k := range keys[:len(keys)-1] {
			next, ok := m[k].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[k] = next
			}
			m = next
		}
		m[keys[len(keys)-1]] = value
	}
}

// del removes the value at the dotted path.
func del(path string) modifier {
	return func(obj map[string]any) {
		keys := strings.Split(path, ".")
		m := obj
		for _, k := range keys[:len(keys)-1] {
			next, ok := m[k].(map[string]any)
			if !ok {
				return
			}
			m = next
		}
		delete(m, keys[len(keys)-1])
	}
}

// network is one entry of spec.target.networks.
func network(source, typ, multus string) map[string]any {
	n := map[string]any{"source": source, "type": typ}
	if multus != "" {
		n["multusNetworkName"] = multus
	}
	return n
}

// networks sets spec.target.networks.
func networks(entries ...map[string]any) modifier {
	list := make([]any, len(entries))
	for i, e := range entries {
		list[i] = e
	}
	return set("spec.target.networks", list)
}

// runController runs the controller in-process with manager.Run until the
// test ends, and returns once its caches synced, with a channel that
// receives manager.Run's result should it stop early. The cleanup stops it
// and fails the test when it returns an error or does not stop.
func runController(t *testing.T, cfg *rest.Config, opts manager.Options) <-chan error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	opts.Ready = ready
	go func() { done <- manager.Run(ctx, cfg, opts) }()
	// The cleanup runs on the test's goroutine, after the test.
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err, "the controller returned an error on shutdown")
		case <-time.After(20 * time.Second):
			assert.Fail(t, "the controller did not stop within 20s of its context ending")
		}
	})
	select {
	case <-ready:
	case err := <-done:
		require.FailNow(t, fmt.Sprintf("the controller stopped before it was ready: %v", err))
	case <-time.After(30 * time.Second):
		require.FailNow(t, "the controller's caches did not sync within 30s")
	}
	return done
}
