package vcsimlocal

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/vsphere"
)

// TestEmptyVMsOnSeveralHosts places content-less VMs on two standalone
// hosts of one datacenter, reads them back through the controller's
// inventory code, and counts the SOAP calls that did it by method.
func TestEmptyVMsOnSeveralHosts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Start(ctx, Options{Hosts: 2})
	require.NoError(t, err)
	defer s.Close()
	_, err = s.AddVM(ctx, EmptyVM("a", "", 1))
	require.NoError(t, err)
	vm, err := s.AddVM(ctx, EmptyVM("b", Datacenter+"_H1", 2))
	require.NoError(t, err)
	assert.Empty(t, vm.Disks[0].SHA256, "an empty disk has no content to hash")

	before := s.SOAPCalls()
	sess, err := vsphere.Connect(ctx, vsphere.Endpoint{URL: s.URL, Datacenter: Datacenter},
		vsphere.Credentials{Username: s.Username, Password: s.Password, Thumbprint: s.Thumbprint})
	require.NoError(t, err)
	defer func() { _ = sess.Logout(context.Background()) }()
	hosts := map[string]bool{}
	for _, name := range []string{"a", "b"} {
		obj, err := vsphere.FindVM(ctx, sess, v1alpha1.VMSelector{Name: name})
		require.NoError(t, err)
		inv, err := vsphere.Inventory(ctx, sess, obj)
		require.NoError(t, err)
		require.Len(t, inv.Disks, 1)
		assert.Equal(t, int64(1<<30), inv.Disks[0].CapacityBytes)
		hosts[inv.Host] = true
	}
	assert.Equal(t, map[string]bool{Datacenter + "_H0": true, Datacenter + "_H1": true}, hosts)

	after := s.SOAPCalls()
	assert.Greater(t, after["Login"], before["Login"], "the login is counted")
	assert.Greater(t, after["RetrievePropertiesEx"]+after["RetrieveProperties"],
		before["RetrievePropertiesEx"]+before["RetrieveProperties"], "property reads are counted")
	assert.Zero(t, after["unknown"], "every call is named")
}

func TestSOAPMethod(t *testing.T) {
	tests := []struct{ name, envelope, want string }{
		{"prefixed", `<?xml version="1.0"?><soapenv:Envelope xmlns:soapenv="x"><soapenv:Body><RetrievePropertiesEx xmlns="urn:vim25"><_this>`, "RetrievePropertiesEx"},
		{"plain", `<Envelope><Body><Login xmlns="urn:vim25">`, "Login"},
		{"namespaced method", `<Envelope><Body><vim:Logout>`, "Logout"},
		{"self-closing", `<Envelope><Body><CurrentTime/></Body>`, "CurrentTime"},
		{"no body", `<Envelope></Envelope>`, "unknown"},
		{"empty body", `<Envelope><Body>`, "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, soapMethod(tt.envelope))
		})
	}
}
