package source

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/soap"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/vsphere"
	"platform.example/vm-migration/test/builders"
)

// countingEnv is newEnv with the simulator's SOAP requests counted.
func countingEnv(t *testing.T) (*env, *atomic.Int64, *simulator.Server) {
	t.Helper()
	model := simulator.VPX()
	require.NoError(t, model.Create())
	model.Service.TLS = new(tls.Config)
	model.Service.Listen = &url.URL{User: url.UserPassword(user, password)}
	server := model.Service.NewServer()
	t.Cleanup(func() { server.Close(); model.Remove() })
	var calls atomic.Int64
	next := server.Config.Handler
	server.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/sdk" {
			calls.Add(1)
		}
		next.ServeHTTP(w, r)
	})
	secrets := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	secret := credentials(password)(soap.ThumbprintSHA256(server.Certificate()))
	secret.Data["endpoints"] = []byte(server.URL.Host)
	require.NoError(t, secrets.Add(secret))
	sessions := vsphere.NewSessionCache()
	t.Cleanup(func() { _ = sessions.Close(context.Background()) })
	m := builders.Migration(builders.InNamespace("ns"), builders.Credentials("creds"),
		builders.SourceAt("https://"+server.URL.Host+"/sdk"), builders.SourceVM("DC0_H0_VM0"))
	return &env{step: &Step{Secrets: corelisters.NewSecretLister(secrets), Sessions: sessions, CallTimeout: 20 * time.Second}, m: m},
		&calls, server
}

// TestInventoriedVMIsNotLookedUpAgain: once inventoried, observing the
// source's state is one vSphere call (its power state), not a lookup of
// the VM first; and a VM gone since is still seen gone.
func TestInventoriedVMIsNotLookedUpAgain(t *testing.T) {
	e, calls, server := countingEnv(t)
	ctx := context.Background()
	obs := e.step.Observe(ctx, e.m, statemachine.SourceNeedInventory)
	require.Nil(t, obs.Error)
	e.m.Status.Source = obs.Inventory

	before := calls.Load()
	obs = e.step.Observe(ctx, e.m, statemachine.SourceNeedState)
	require.Nil(t, obs.Error)
	assert.Equal(t, statemachine.PowerStateOn, obs.PowerState)
	assert.Equal(t, int64(1), calls.Load()-before, "one call: the power state")

	// The VM goes away behind the controller's back.
	require.NoError(t, e.step.PowerOff(ctx, e.m))
	waitOff(t, e)
	sess, err := vsphere.Connect(ctx, vsphere.Endpoint{URL: "https://" + server.URL.Host + "/sdk"},
		vsphere.Credentials{Username: user, Password: password, Thumbprint: soap.ThumbprintSHA256(server.Certificate())})
	require.NoError(t, err)
	defer func() { _ = sess.Logout(ctx) }()
	task, err := vsphere.KnownVM(sess, e.m.Status.Source.MoRef).Destroy(ctx)
	require.NoError(t, err)
	require.NoError(t, task.Wait(ctx))
	obs = e.step.Observe(ctx, e.m, statemachine.SourceNeedState)
	require.NotNil(t, obs.Error)
	assert.Equal(t, statemachine.ErrorGone, obs.Error.Class, obs.Error.Message)
	assert.Equal(t, ReasonSourceVMNotFound, obs.Error.Reason)
	err = e.step.PowerOn(ctx, e.m)
	var oerr *statemachine.ObservedError
	require.ErrorAs(t, err, &oerr)
	assert.Equal(t, statemachine.ErrorGone, oerr.Class, oerr.Message)
}
