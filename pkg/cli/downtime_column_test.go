package cli

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sigsyaml "sigs.k8s.io/yaml"
)

// TestDowntimeMatchesKubectl: kubectl get vmm -o wide's Downtime column
// shows an outage as kubectl vmm list -o wide's DOWNTIME does ("35m20s"),
// not as a bare number of seconds (issue 50 item 7); status.downtime.seconds
// stays for machines.
func TestDowntimeMatchesKubectl(t *testing.T) {
	data, err := os.ReadFile(crdPath)
	require.NoError(t, err, "reading the CRD")
	var crd struct {
		Spec struct {
			Versions []struct {
				AdditionalPrinterColumns []struct {
					Name, Type, JSONPath string
				} `json:"additionalPrinterColumns"`
			} `json:"versions"`
		} `json:"spec"`
	}
	require.NoError(t, sigsyaml.Unmarshal(data, &crd), "decoding the CRD")
	var path, typ string
	for _, c := range crd.Spec.Versions[0].AdditionalPrinterColumns {
		if c.Name == "Downtime" {
			path, typ = c.JSONPath, c.Type
		}
	}
	require.NotEmpty(t, path, "no Downtime printer column")
	assert.Equal(t, "string", typ, "the Downtime column's type: a number prints as a bare count of seconds")

	ended := 0
	for name, m := range fixtures() {
		if m.Status.Downtime == nil || m.Status.Downtime.Seconds == nil {
			continue
		}
		ended++
		t.Run(name, func(t *testing.T) {
			want := cell(t, tableRow(m, tableOptions{wide: true}, testNow), "DOWNTIME")
			assert.Equal(t, want, kubectlCell(t, m, path), "kubectl get's Downtime, want kubectl vmm's DOWNTIME")
		})
	}
	require.NotZero(t, ended, "no fixture whose outage ended")
}
