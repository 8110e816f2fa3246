package manager

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
)

// TestSpamKeyByReason: warnings of one reason repeated never share the
// spam filter's budget with the warnings of another reason of the object.
func TestSpamKeyByReason(t *testing.T) {
	obj := corev1.ObjectReference{Kind: "VirtualMachineMigration", Namespace: "apps", Name: "web-01", UID: "u1"}
	retried := &corev1.Event{InvolvedObject: obj, Type: corev1.EventTypeWarning, Reason: "ActionFailed"}
	failed := &corev1.Event{InvolvedObject: obj, Type: corev1.EventTypeWarning, Reason: "Failed"}
	assert.NotEqual(t, spamKeyByReason(retried), spamKeyByReason(failed))
	again := *retried
	assert.Equal(t, spamKeyByReason(retried), spamKeyByReason(&again))
}
