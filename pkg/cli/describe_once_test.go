package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"platform.example/vm-migration/pkg/statemachine"
)

// TestDescribeSaysTheFailureOnce: describe of a refusal says its message
// once, on the Last Error line; the conditions and the events refer to
// it, also the events an older controller recorded (the message in the
// failure's event and again in the phase change).
func TestDescribeSaysTheFailureOnce(t *testing.T) {
	m := fixtures()["refused"]
	msg := m.Status.LastError.Message
	event := func(name, typ, reason, message string, offset time.Duration) corev1.Event {
		return corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: m.Namespace}, Type: typ, Reason: reason, Count: 1,
			Message: message, LastTimestamp: at(offset)}
	}
	events := append(fixtureEvents(m),
		event("refusal", corev1.EventTypeWarning, statemachine.ReasonPreflightFailed, msg, 41*time.Minute),
		event("rolling-back", corev1.EventTypeWarning, "RollingBack", "Validating -> RollingBack: PreflightFailed: "+msg, 41*time.Minute),
		event("failed", corev1.EventTypeWarning, "Failed", "RollingBack -> Failed: the source VM was not touched", 41*time.Minute))
	var buf bytes.Buffer
	require.NoError(t, printDescribe(&buf, m, events, testNow))
	out := buf.String()
	assert.Equal(t, 1, strings.Count(out, msg), "times describe says the refusal's message:\n%s", out)
	assert.Contains(t, out, "Last Error:   PreflightFailed in Validating: "+msg)
	assert.Contains(t, out, "Validating -> RollingBack: PreflightFailed: (the Last Error above)")
}
