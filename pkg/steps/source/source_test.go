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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	kvfake "platform.example/vm-migration/pkg/generated/kubevirt/clientset/versioned/fake"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/vsphere"
)

const (
	user     = "migrator@vsphere.local"
	password = "S3cret-Source-Step!"
)

type env struct {
	step *Step
	m    *v1alpha1.VirtualMachineMigration
	kube *k8sfake.Clientset
}

// newEnv starts an in-process vCenter simulator and a migration of its
// first VM, with its credentials Secret when withSecret is true.
func newEnv(t *testing.T, withSecret bool, secretPassword string) *env {
	t.Helper()
	model := simulator.VPX()
	require.NoError(t, model.Create())
	model.Service.TLS = new(tls.Config)
	model.Service.Listen = &url.URL{User: url.UserPassword(user, password)}
	server := model.Service.NewServer()
	t.Cleanup(func() { server.Close(); model.Remove() })

	var objs []runtime.Object
	if withSecret {
		objs = append(objs, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "ns", ResourceVersion: "1"},
			Data: map[string][]byte{
				"username":   []byte(user),
				"password":   []byte(secretPassword),
				"thumbprint": []byte(soap.ThumbprintSHA256(server.Certificate())),
			},
		})
	}
	kube := k8sfake.NewSimpleClientset(objs...)
	sessions := vsphere.NewSessionCache()
	t.Cleanup(func() { _ = sessions.Close(context.Background()) })
	m := &v1alpha1.VirtualMachineMigration{
		ObjectMeta: metav1.ObjectMeta{Name: "mig", Namespace: "ns", UID: "uid-1"},
		Spec: v1alpha1.VirtualMachineMigrationSpec{Source: v1alpha1.SourceSpec{
			URL:                  "https://" + server.URL.Host + "/sdk",
			CredentialsSecretRef: v1alpha1.SecretReference{Name: "creds"},
			VM:                   v1alpha1.VMSelector{Name: "DC0_H0_VM0"},
		}},
	}
	return &env{
		step: &Step{Kube: kube, KubeVirt: kvfake.NewSimpleClientset(), Sessions: sessions, CallTimeout: 20 * time.Second},
		m:    m,
		kube: kube,
	}
}

func TestObserveMissingSecretNeedsUser(t *testing.T) {
	e := newEnv(t, false, "")
	obs := e.step.Observe(context.Background(), e.m, statemachine.SourceNeedInventory)
	require.NotNil(t, obs.Error)
	assert.Equal(t, statemachine.ErrorNeedsUser, obs.Error.Class)
	assert.Equal(t, ReasonCredentialsSecretNotFound, obs.Error.Reason)
	assert.Contains(t, obs.Error.Message, `"creds"`)
	assert.False(t, obs.Observed)
}

func TestObserveWrongPasswordNeedsUserWithoutLeaking(t *testing.T) {
	e := newEnv(t, true, "wrong-Password-42")
	obs := e.step.Observe(context.Background(), e.m, statemachine.SourceNeedState)
	require.NotNil(t, obs.Error)
	assert.Equal(t, statemachine.ErrorNeedsUser, obs.Error.Class, obs.Error.Message)
	assert.Equal(t, ReasonSourceAuthFailed, obs.Error.Reason)
	assert.NotContains(t, obs.Error.Message, "wrong-Password-42")
}

func TestObserveUnknownVMIsPermanent(t *testing.T) {
	e := newEnv(t, true, password)
	e.m.Spec.Source.VM = v1alpha1.VMSelector{Name: "no-such-vm"}
	obs := e.step.Observe(context.Background(), e.m, statemachine.SourceNeedInventory)
	require.NotNil(t, obs.Error)
	assert.Equal(t, statemachine.ErrorPermanent, obs.Error.Class)
	assert.Equal(t, ReasonSourceVMNotFound, obs.Error.Reason)
}

func TestObserveInventoryPreflightAndPowerCycle(t *testing.T) {
	e := newEnv(t, true, password)
	ctx := context.Background()
	obs := e.step.Observe(ctx, e.m, statemachine.SourceNeedInventory)
	require.Nil(t, obs.Error)
	require.NotNil(t, obs.Inventory)
	assert.Equal(t, "DC0_H0_VM0", obs.Inventory.Name)
	assert.Equal(t, statemachine.PowerStateOn, obs.PowerState)
	assert.NotEmpty(t, obs.Inventory.Disks)

	findings, err := e.step.Preflight(ctx, e.m, obs.Inventory)
	require.NoError(t, err)
	assert.NotEmpty(t, findings, "the simulator's VM has unmapped networks and no storage mapping")

	// From now on the VM is found by its moRef.
	e.m.Status.Source = obs.Inventory
	require.NoError(t, e.step.PowerOff(ctx, e.m))
	require.NoError(t, e.step.PowerOff(ctx, e.m), "powering off an off VM is success")
	obs = e.step.Observe(ctx, e.m, statemachine.SourceNeedState)
	require.Nil(t, obs.Error)
	assert.Equal(t, statemachine.PowerStateOff, obs.PowerState)
	require.NoError(t, e.step.PowerOn(ctx, e.m))
	obs = e.step.Observe(ctx, e.m, statemachine.SourceNeedState)
	assert.Equal(t, statemachine.PowerStateOn, obs.PowerState)
}
