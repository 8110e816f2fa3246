package source

import (
	"context"
	"crypto/tls"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/soap"
	corev1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/vsphere"
	"platform.example/vm-migration/test/builders"
)

const (
	user     = "migrator@vsphere.local"
	password = "S3cret-Source-Step!"
)

type env struct {
	step   *Step
	m      *v1alpha1.VirtualMachineMigration
	model  *simulator.Model
	server *simulator.Server
}

// newEnv starts an in-process vCenter simulator and a migration of its
// first VM; secret, when not nil, builds the Secret in the step's cache
// from the simulator's thumbprint.
func newEnv(t *testing.T, secret func(thumbprint string) *corev1.Secret) *env {
	t.Helper()
	model := simulator.VPX()
	require.NoError(t, model.Create())
	model.Service.TLS = new(tls.Config)
	model.Service.Listen = &url.URL{User: url.UserPassword(user, password)}
	server := model.Service.NewServer()
	t.Cleanup(func() { server.Close(); model.Remove() })

	secrets := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if secret != nil {
		s := secret(soap.ThumbprintSHA256(server.Certificate()))
		if _, ok := s.Data["endpoints"]; !ok {
			s.Data["endpoints"] = []byte(server.URL.Host)
		}
		require.NoError(t, secrets.Add(s))
	}
	sessions := vsphere.NewSessionCache()
	t.Cleanup(func() { _ = sessions.Close(context.Background()) })
	m := builders.Migration(builders.InNamespace("ns"), builders.Credentials("creds"),
		builders.SourceAt("https://"+server.URL.Host+"/sdk"), builders.SourceVM("DC0_H0_VM0"))
	return &env{
		step:   &Step{Secrets: corelisters.NewSecretLister(secrets), Sessions: sessions, CallTimeout: 20 * time.Second},
		m:      m,
		model:  model,
		server: server,
	}
}

// credentials is the Secret with password.
func credentials(password string) func(string) *corev1.Secret {
	return func(thumbprint string) *corev1.Secret {
		s := builders.CredentialsSecret("ns", "creds", map[string]string{"username": user, "password": password, "thumbprint": thumbprint})
		s.ResourceVersion = "1"
		return s
	}
}

func TestObserveMissingSecretNeedsUser(t *testing.T) {
	e := newEnv(t, nil)
	obs := e.step.Observe(context.Background(), e.m, statemachine.SourceNeedInventory)
	require.NotNil(t, obs.Error)
	assert.Equal(t, statemachine.ErrorNeedsUser, obs.Error.Class)
	assert.Equal(t, ReasonCredentialsSecretNotFound, obs.Error.Reason)
	assert.Contains(t, obs.Error.Message, `"creds"`)
	assert.Contains(t, obs.Error.Message, v1alpha1.LabelVSphereCredentials+"=true", "the message says how to opt the Secret in")
	assert.False(t, obs.Observed)
}

// TestObserveIncompleteSecretSaysItOnce: a Secret without a password is
// named once, with what it lacks (issue 25: "credentials Secret "x":
// reading vsphere credentials from secret default/x: ...").
func TestObserveIncompleteSecretSaysItOnce(t *testing.T) {
	e := newEnv(t, credentials(""))
	obs := e.step.Observe(context.Background(), e.m, statemachine.SourceNeedInventory)
	require.NotNil(t, obs.Error)
	assert.Equal(t, statemachine.ErrorNeedsUser, obs.Error.Class)
	assert.Equal(t, ReasonCredentialsInvalid, obs.Error.Reason)
	assert.Equal(t, "reading vsphere credentials from secret ns/creds: missing or empty keys: password", obs.Error.Message)
}

func TestObserveWrongPasswordNeedsUserWithoutLeaking(t *testing.T) {
	e := newEnv(t, credentials("wrong-Password-42"))
	obs := e.step.Observe(context.Background(), e.m, statemachine.SourceNeedState)
	require.NotNil(t, obs.Error)
	assert.Equal(t, statemachine.ErrorNeedsUser, obs.Error.Class, obs.Error.Message)
	assert.Equal(t, ReasonSourceAuthFailed, obs.Error.Reason)
	assert.NotContains(t, obs.Error.Message, "wrong-Password-42")
}

func TestObserveUnknownVMIsGone(t *testing.T) {
	e := newEnv(t, credentials(password))
	e.m.Spec.Source.VM = v1alpha1.VMSelector{Name: "no-such-vm"}
	obs := e.step.Observe(context.Background(), e.m, statemachine.SourceNeedInventory)
	require.NotNil(t, obs.Error)
	assert.Equal(t, statemachine.ErrorGone, obs.Error.Class, "a VM that cannot be found is gone: permanent, and the end of a restore")
	assert.Equal(t, ReasonSourceVMNotFound, obs.Error.Reason)
}

func TestObserveInventoryAndPowerCycle(t *testing.T) {
	e := newEnv(t, credentials(password))
	ctx := context.Background()
	obs := e.step.Observe(ctx, e.m, statemachine.SourceNeedInventory)
	require.Nil(t, obs.Error)
	require.NotNil(t, obs.Inventory)
	assert.Equal(t, "DC0_H0_VM0", obs.Inventory.Name)
	assert.Equal(t, statemachine.PowerStateOn, obs.PowerState)
	assert.NotEmpty(t, obs.Inventory.Disks)

	// From now on the VM is found by its moRef.
	e.m.Status.Source = obs.Inventory
	require.NoError(t, e.step.PowerOff(ctx, e.m))
	// The power-off returns with its task started; the VM is off once it ran.
	waitOff(t, e)
	require.NoError(t, e.step.PowerOff(ctx, e.m), "powering off an off VM is success")
	obs = e.step.Observe(ctx, e.m, statemachine.SourceNeedState)
	require.Nil(t, obs.Error)
	assert.Equal(t, statemachine.PowerStateOff, obs.PowerState)
	require.NoError(t, e.step.PowerOn(ctx, e.m))
	obs = e.step.Observe(ctx, e.m, statemachine.SourceNeedState)
	assert.Equal(t, statemachine.PowerStateOn, obs.PowerState)
}

// waitOff waits until e's VM (inventoried) is powered off.
func waitOff(t *testing.T, e *env) {
	t.Helper()
	require.Eventually(t, func() bool {
		obs := e.step.Observe(context.Background(), e.m, statemachine.SourceNeedState)
		return obs.Error == nil && obs.PowerState == statemachine.PowerStateOff
	}, 10*time.Second, 20*time.Millisecond, "the VM is powered off")
}
