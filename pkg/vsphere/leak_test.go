package vsphere

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/object"
	"k8s.io/klog/v2"

	"platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// captureKlog sends klog output at verbosity 10 to a buffer for the test.
func captureKlog(t *testing.T) *syncBuffer {
	t.Helper()
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	require.NoError(t, fs.Set("v", "10"))
	require.NoError(t, fs.Set("logtostderr", "false"))
	require.NoError(t, fs.Set("alsologtostderr", "false"))
	require.NoError(t, fs.Set("stderrthreshold", "FATAL"))
	buf := &syncBuffer{}
	klog.SetOutput(buf)
	t.Cleanup(func() {
		klog.Flush()
		_ = fs.Set("v", "0")
		_ = fs.Set("logtostderr", "true")
		klog.SetOutput(os.Stderr)
	})
	return buf
}

func TestPasswordNeverLogged(t *testing.T) {
	buf := captureKlog(t)
	var errs []error
	keep := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}

	for _, kind := range bothModels {
		env := newSim(t, kind, nil)
		ctx := testCtx(t)

		// Wrong password, wrong thumbprint, credentials in the URL.
		_, err := Connect(ctx, env.ep, Credentials{Username: testUser, Password: testPassword + "-wrong", Thumbprint: env.creds.Thumbprint})
		keep(err)
		_, err = Connect(ctx, env.ep, Credentials{Username: testUser, Password: testPassword, Thumbprint: strings.Repeat("11", 20)})
		keep(err)
		_, err = Connect(ctx, Endpoint{URL: "https://" + testUser + ":" + testPassword + "@" + strings.TrimPrefix(env.ep.URL, "https://")}, env.creds)
		keep(err)

		// Everything else, through a session cache, with a rotation and an expiry.
		cache := NewSessionCache()
		s, err := cache.Get(ctx, env.ep, env.secret("ns", "vc", "1"))
		require.NoError(t, err)
		vmRef := firstVM(t, s).ref
		vm, err := FindVM(ctx, s, v1alpha1.VMSelector{MoRef: vmRef.Value})
		require.NoError(t, err)
		_, err = FindVM(ctx, s, v1alpha1.VMSelector{Name: "missing"})
		keep(err)
		_, err = Inventory(ctx, s, vm)
		keep(err)
		keep(ShutdownGuest(ctx, vm))
		keep(PowerOff(ctx, vm))
		keep(PowerOff(ctx, vm))
		_, err = CreateSnapshot(ctx, vm, "leak-test")
		keep(err)
		keep(RemoveSnapshot(ctx, vm, "leak-test"))
		keep(PowerOn(ctx, vm))
		terminate(t, env, s)
		_, err = Inventory(ctx, s, vm)
		keep(err)
		s2, err := cache.Get(ctx, env.ep, env.secret("ns", "vc", "2"))
		require.NoError(t, err)
		_, err = PowerState(ctx, object.NewVirtualMachine(s.Client(), vmRef))
		keep(err)
		_, err = PowerState(ctx, object.NewVirtualMachine(s2.Client(), vmRef))
		keep(err)
		keep(cache.Close(ctx))

		// Secrets with problems.
		bad := env.secret("ns", "vc", "3")
		bad.Data["thumbprint"] = []byte(testPassword)
		_, err = CredentialsFromSecret(bad)
		keep(err)
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "password"), []byte(testPassword), 0o600))
		_, err = LoadCredentialsDir(dir)
		keep(err)

		// Someone logs or dumps the credentials themselves.
		klog.V(4).InfoS("Credentials in use", "creds", env.creds)
		klog.V(4).Infof("credentials %v %+v %#v %s", env.creds, env.creds, env.creds, env.creds)
		b, err := json.Marshal(env.creds)
		require.NoError(t, err)
		klog.V(4).Info(string(b))
	}
	klog.Flush()

	logs := buf.String()
	require.Contains(t, logs, "Logged in to vSphere", "the capture works and the code logs at high verbosity")
	require.Contains(t, logs, "Logged in to vSphere again after the session expired")
	require.NotEmpty(t, errs)
	for _, line := range strings.Split(logs, "\n") {
		assert.NotContains(t, line, testPassword, "a log line holds the password")
	}
	for _, err := range errs {
		msg := fmt.Sprintf("%v %+v", err, err)
		assert.NotContains(t, msg, testPassword, "an error holds the password")
	}
	t.Logf("checked %d log lines and %d errors", strings.Count(logs, "\n"), len(errs))
}
