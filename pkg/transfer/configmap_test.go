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
	"platform.example/vm-migration/pkg/transfer/wire"
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
	snap := func(at time.Duration, state string, done int64) wire.Progress {
		return wire.Progress{Kind: wire.KindProgress, Time: t0.Add(at), Disks: []wire.DiskProgress{{Key: 2000, State: state, BytesDone: done, TotalBytes: 100}}}
	}
	require.NoError(t, sink.Report(ctx, snap(0, wire.StateCopying, 10)))
	require.NoError(t, sink.Report(ctx, snap(5*time.Second, wire.StateCopying, 20))) // throttled
	require.Equal(t, 1, patches())
	require.NoError(t, sink.Report(ctx, snap(6*time.Second, wire.StateDone, 100))) // a state change goes out at once
	require.Equal(t, 2, patches())
	require.NoError(t, sink.Report(ctx, snap(30*time.Second, wire.StateDone, 100)))
	require.Equal(t, 3, patches())
	require.NoError(t, sink.ReportResult(ctx, &wire.Result{Kind: wire.KindResult, Succeeded: true, Disks: []wire.DiskResult{{Key: 2000, Bytes: 100, SHA256: "ab"}}}))

	cm, err := client.CoreV1().ConfigMaps("team-a").Get(ctx, "web-transfer-1-progress", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "me", cm.Data["keep"], "a merge patch keeps other keys")
	var p wire.Progress
	require.NoError(t, json.Unmarshal([]byte(cm.Data[wire.ConfigMapKeyProgress]), &p))
	require.Equal(t, wire.StateDone, p.Disks[0].State)
	res, err := wire.ParseResult([]byte(cm.Data[wire.ConfigMapKeyResult]))
	require.NoError(t, err)
	require.True(t, res.Succeeded)

	_, err = transfer.NewConfigMapSink(client, "no-namespace")
	require.Error(t, err)
}
