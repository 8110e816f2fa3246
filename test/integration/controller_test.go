//go:build integration

package integration

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/manager"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/test/framework"
)

// Bounds of the controller's API traffic while a migration waits for its
// credentials Secret, over quietWindow.
const (
	quietWindow = 10 * time.Second
	// maxQuietWrites allows an event aggregation patch or one status
	// refresh; a hot loop makes hundreds.
	maxQuietWrites = 3
)

// TestControllerWaitsForMissingCredentialsSecret runs the controller
// in-process (manager.Run, as cmd/migration-controller does) against the
// real API server, as its ServiceAccount with the RBAC from manifests/.
// A migration whose credentials Secret is missing must get a condition
// naming the Secret and the opt-in label, the controller must neither
// crash nor hot-loop while it waits (its requests are counted: it reads
// nothing, its caches do), a Secret without the opt-in label is refused
// the same way, and labelling it lets the migration move on at once (the
// Secret's event wakes it).
func TestControllerWaitsForMissingCredentialsSecret(t *testing.T) {
	env := framework.Env(t)
	saConfig, _ := controllerIdentity(t, env)
	ns := env.Namespace(t)

	counter := &requestCounter{}
	cfg := rest.CopyConfig(saConfig)
	cfg.Wrap(counter.wrap)
	cfg.UserAgent = "vm-migration-controller-under-test"

	done := runController(t, cfg, manager.Options{
		Namespace:          ns,
		Workers:            2,
		VSphereCallTimeout: 5 * time.Second,
		Decisions:          statemachine.Config{WaitInterval: 2 * time.Second},
	})

	client := migrationClient(t, env).MigrationV1alpha1().VirtualMachineMigrations(ns)
	tctx := testContext(t)
	createAndGet(t, env, ns, newMigration("web-01",
		set("spec.source.url", "https://127.0.0.1:1/sdk"),
		set("spec.source.credentialsSecretRef.name", "vcenter-credentials"),
	))

	// The condition names the Secret and says what to do. The polls run
	// one at a time; cond and last are read once one of them succeeded.
	var cond *metav1.Condition
	var last *v1alpha1.VirtualMachineMigration
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		m, err := client.Get(tctx, "web-01", metav1.GetOptions{})
		require.NoError(c, err, "reading the migration")
		last = m
		cond = conditionWithReason(m.Status.Conditions, "CredentialsSecretNotFound")
		assert.NotNil(c, cond, "no condition with reason CredentialsSecretNotFound; status: %s", describeStatus(m))
	}, 30*time.Second, 200*time.Millisecond, "no condition with reason CredentialsSecretNotFound within 30s")
	t.Logf("condition %s=%s reason %s: %s (phase %s)", cond.Type, cond.Status, cond.Reason, cond.Message, last.Status.Phase)
	for _, want := range []string{`"vcenter-credentials"`, ns, v1alpha1.LabelVSphereCredentials + "=true"} {
		assert.Contains(t, cond.Message, want, "the condition's message does not name the Secret, its namespace and the opt-in label")
	}
	assert.NotEqual(t, v1alpha1.PhaseFailed, last.Status.Phase, "a missing Secret failed the migration; it should wait for the user")
	assert.Contains(t, last.Finalizers, v1alpha1.FinalizerName, "finalizer %s not set", v1alpha1.FinalizerName)
	events, err := env.Kubernetes(t).CoreV1().Events(ns).List(tctx, metav1.ListOptions{FieldSelector: "involvedObject.name=web-01"})
	require.NoError(t, err, "listing the migration's events")
	for _, e := range events.Items {
		t.Logf("event %s %s x%d: %s", e.Type, e.Reason, e.Count, e.Message)
	}

	// While it waits, the controller reads nothing from the API server and
	// writes (almost) nothing.
	before := counter.snapshot()
	time.Sleep(quietWindow)
	select {
	case err := <-done:
		require.FailNow(t, fmt.Sprintf("the controller stopped while waiting: %v", err))
	default:
	}
	delta := counter.snapshot().since(before)
	t.Logf("API requests over %s while waiting:\n%s", quietWindow, delta)
	assert.LessOrEqual(t, delta.writes(), maxQuietWrites, "writes in %s while waiting for a Secret: a hot loop", quietWindow)
	assert.Zero(t, delta.matching(http.MethodGet, "/secrets/vcenter-credentials"),
		"reads of the Secret in %s: the controller reads it from its cache only", quietWindow)

	// A Secret without the opt-in label is not used: the migration still
	// waits, with the same condition.
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "vcenter-credentials", Namespace: ns},
		StringData: map[string]string{"username": "migration@vsphere.local", "password": "secret", "endpoints": "https://127.0.0.1:1/sdk"},
	}
	kube := env.Kubernetes(t)
	secret, err = kube.CoreV1().Secrets(ns).Create(tctx, secret, metav1.CreateOptions{})
	require.NoError(t, err, "creating the Secret without the opt-in label")
	time.Sleep(2 * time.Second)
	m, err := client.Get(tctx, "web-01", metav1.GetOptions{})
	require.NoError(t, err, "reading the migration")
	require.NotNil(t, conditionWithReason(m.Status.Conditions, "CredentialsSecretNotFound"),
		"a Secret without the label %s=true was used; status: %s", v1alpha1.LabelVSphereCredentials, describeStatus(m))

	// Labelled, it is used and the migration moves on (here to an
	// unreachable endpoint).
	secret.Labels = map[string]string{v1alpha1.LabelVSphereCredentials: "true"}
	_, err = kube.CoreV1().Secrets(ns).Update(tctx, secret, metav1.UpdateOptions{})
	require.NoError(t, err, "labelling the Secret")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		m, err := client.Get(tctx, "web-01", metav1.GetOptions{})
		require.NoError(c, err, "reading the migration")
		last = m
		assert.Nil(c, conditionWithReason(m.Status.Conditions, "CredentialsSecretNotFound"),
			"the controller still reports the Secret missing; status: %s", describeStatus(m))
	}, 30*time.Second, 200*time.Millisecond, "the controller still reports the Secret missing 30s after it was labelled")
	t.Logf("after the Secret was created: %s", describeStatus(last))
}

// conditionWithReason returns the first condition with reason.
func conditionWithReason(conds []metav1.Condition, reason string) *metav1.Condition {
	for i := range conds {
		if conds[i].Reason == reason {
			return &conds[i]
		}
	}
	return nil
}

func describeStatus(m *v1alpha1.VirtualMachineMigration) string {
	if m == nil {
		return "<never read>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "phase %q", m.Status.Phase)
	for _, c := range m.Status.Conditions {
		fmt.Fprintf(&b, "; %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
	}
	if e := m.Status.LastError; e != nil {
		fmt.Fprintf(&b, "; lastError %s: %s", e.Reason, e.Message)
	}
	return b.String()
}

// requestCounter counts the requests a client makes, by method and path.
type requestCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		key := r.Method + " " + r.URL.Path
		if r.URL.Query().Get("watch") == "true" {
			key = "WATCH " + r.URL.Path
		}
		c.mu.Lock()
		if c.counts == nil {
			c.counts = map[string]int{}
		}
		c.counts[key]++
		c.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

// requestCounts maps "METHOD /path" to a number of requests.
type requestCounts map[string]int

func (c *requestCounter) snapshot() requestCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := requestCounts{}
	for k, v := range c.counts {
		s[k] = v
	}
	return s
}

func (s requestCounts) since(earlier requestCounts) requestCounts {
	d := requestCounts{}
	for k, v := range s {
		if n := v - earlier[k]; n > 0 {
			d[k] = n
		}
	}
	return d
}

// writes counts the requests that change something (not GET or WATCH).
func (s requestCounts) writes() int {
	n := 0
	for k, v := range s {
		if !strings.HasPrefix(k, "GET ") && !strings.HasPrefix(k, "WATCH ") {
			n += v
		}
	}
	return n
}

func (s requestCounts) matching(method, pathSuffix string) int {
	n := 0
	for k, v := range s {
		if strings.HasPrefix(k, method+" ") && strings.HasSuffix(k, pathSuffix) {
			n += v
		}
	}
	return n
}

func (s requestCounts) String() string {
	if len(s) == 0 {
		return "  (none)"
	}
	var lines []string
	for k, v := range s {
		lines = append(lines, fmt.Sprintf("  %4d %s", v, k))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}
