package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseSelections(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		want        []selection
		err         string
	}{
		{name: "KubeVirt's JSON list", value: `[{"name":"backend","namespace":"default","interface":"pod7e0055a6880"}]`,
			want: []selection{{Name: "backend", Namespace: "default", Interface: "pod7e0055a6880"}}},
		{name: "JSON without a namespace takes the pod's", value: `[{"name":"backend"}]`,
			want: []selection{{Name: "backend", Namespace: "apps"}}},
		{name: "short form", value: "default/backend@net7, front",
			want: []selection{{Name: "backend", Namespace: "default", Interface: "net7"}, {Name: "front", Namespace: "apps"}}},
		{name: "an entry without a name", value: `[{"namespace":"default"}]`, err: "names no network"},
		{name: "broken JSON", value: `[{"name":}]`, err: "parsing the k8s.v1.cni.cncf.io/networks annotation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseSelections(tc.value, "apps")
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestStatusReadsTheDelegatesResult(t *testing.T) {
	result := json.RawMessage(`{"cniVersion":"0.3.1","interfaces":[{"name":"br-backend","mac":"aa:aa:aa:aa:aa:aa"},` +
		`{"name":"veth1","mac":"bb:bb:bb:bb:bb:bb"},{"name":"pod7e0","mac":"02:00:00:00:00:01","sandbox":"/var/run/netns/x"}],` +
		`"ips":[{"address":"10.1.2.3/24"}]}`)
	st := status("default/backend", "pod7e0", result, false)
	assert.Equal(t, networkStatus{Name: "default/backend", Interface: "pod7e0", MAC: "02:00:00:00:00:01", IPs: []string{"10.1.2.3"}}, st)
	// A plugin without a result (L2 only) still gets its entry.
	assert.Equal(t, networkStatus{Name: "vmm-pods", Interface: "eth0", Default: true}, status("vmm-pods", "eth0", nil, true))
}
