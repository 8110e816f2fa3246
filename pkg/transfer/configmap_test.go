package transfer_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"platform.example/vm-migration/pkg/transfer"
)

func TestConfigMapSink(t *testing.T) {
	ctx := context.Background()
	client := fake.NewSimpleClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web-transfer-1-progress"},
		Data: map[string]string{"keep": "me"}})
	sink, err := transfer.NewConfigMapSink(client, "team-a/web-transfer-1-progress")
	require.NoError(t, err)
	patches := func() int {
		n := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == "patch" {
				n++
			}
		}
		return n
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	snap := func(at time.Duration, state string, done int64) transfer.Progress {
		return transfer.Progress{Kind: transfer.KindProgress, Time: t0.Add(at), Disks: []transfer.DiskProgress{{Key: 2000, State: state, BytesDone: done, TotalBytes: 100}}}
	}
	require.NoError(t, sink.Report(ctx, snap(0, transfer.StateCopying, 10)))
	require.NoError(t, sink.Report(ctx, snap(5*time.Second, transfer.StateCopying, 20))) // throttled
	require.Equal(t, 1, patches())
	require.NoError(t, sink.Report(ctx, snap(6*time.Second, transfer.StateDone, 100))) // a state change goes out at once
	require.Equal(t, 2, patches())
	require.NoError(t, sink.Report(ctx, snap(30*time.Second, transfer.StateDone, 100)))
	require.Equal(t, 3, patches())
	require.NoError(t, sink.ReportResult(ctx, &transfer.Result{Kind: transfer.KindResult, Succeeded: true, Disks: []transfer.DiskResult{{Key: 2000, Bytes: 100, SHA256: "ab"}}}))

	cm, err := client.CoreV1().ConfigMaps("team-a").Get(ctx, "web-transfer-1-progress", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "me", cm.Data["keep"], "a merge patch keeps other keys")
	var p transfer.Progress
	require.NoError(t, json.Unmarshal([]byte(cm.Data[transfer.ConfigMapKeyProgress]), &p))
	require.Equal(t, transfer.StateDone, p.Disks[0].State)
	res, err := transfer.ParseResult([]byte(cm.Data[transfer.ConfigMapKeyResult]))
	require.NoError(t, err)
	require.True(t, res.Succeeded)

	_, err = transfer.NewConfigMapSink(client, "no-namespace")
	require.Error(t, err)
}
