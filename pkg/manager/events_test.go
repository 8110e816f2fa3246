package manager

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// TestPhaseChangesAreNotCombined records a migration's phase changes, all
// of one reason, as the controller does: every message reaches the API
// server as its own event, none "(combined from similar events)"; an
// identical message repeated is counted on one event.
func TestPhaseChangesAreNotCombined(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kube := fake.NewSimpleClientset()
	b := NewEventBroadcaster(ctx)
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	defer b.Shutdown()
	rec := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "vm-migration-controller"})
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web-01", Namespace: "apps", UID: "uid-1"}}
	const phases = 14
	for i := range phases {
		rec.Event(obj, corev1.EventTypeNormal, "PhaseChanged", fmt.Sprintf("phase %d -> phase %d: evidence", i, i+1))
	}
	for range 3 {
		rec.Event(obj, corev1.EventTypeWarning, "Retrying", "transfer failed; retry 1 of 3")
	}
	// Events reach the sink asynchronously. A combined event never goes
	// away, so it fails every later poll too and is reported at the end.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		events, err := kube.CoreV1().Events("apps").List(ctx, metav1.ListOptions{})
		require.NoError(c, err, "listing events")
		var phaseEvents, retries int
		var retryCount int32
		for _, e := range events.Items {
			assert.False(c, strings.HasPrefix(e.Message, "(combined"), "event combined: %q", e.Message)
			switch e.Reason {
			case "PhaseChanged":
				phaseEvents++
			case "Retrying":
				retries, retryCount = retries+1, e.Count
			}
		}
		assert.Equal(c, phases, phaseEvents, "phase events, want one per phase change")
		assert.Equal(c, 1, retries, "retry events, want the three identical ones on one event")
		assert.Equal(c, int32(3), retryCount, "the count of the retry event")
	}, 10*time.Second, 20*time.Millisecond, "the events recorded")
}
