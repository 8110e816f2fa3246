package pipeline

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name.golden, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644), "rewriting %s", path)
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "reading %s (run go test -update to create it)", path)
	assert.Equal(t, string(want), string(got), "%s differs from the rendering (run go test -update and review the diff)", path)
}

// toYAML renders objects as a multi-document YAML stream.
func toYAML(t *testing.T, objs ...any) []byte {
	t.Helper()
	var buf bytes.Buffer
	for i, o := range objs {
		data, err := yaml.Marshal(o)
		require.NoError(t, err, "marshalling %T to YAML", o)
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(data)
	}
	return buf.Bytes()
}

func TestGolden(t *testing.T) {
	cases := map[string]func() *v1alpha1.VirtualMachineMigration{
		"linux-bios":  linuxBIOS,
		"windows-efi": windowsEFI,
		"ignored-nic": ignoredNIC,
	}
	for name, build := range cases {
		t.Run(name, func(t *testing.T) {
			m := build()
			claims, err := RenderStagingClaims(m, ClaimDefaults{})
			require.NoError(t, err, "rendering the staging claims")
			var objs []any
			for _, c := range claims {
				objs = append(objs, c)
			}
			golden(t, name+"-staging", toYAML(t, objs...))

			tcm, err := RenderTransferConfigMap(m, 1, nil)
			require.NoError(t, err, "rendering the transfer ConfigMap")
			tjob, err := RenderTransferJob(m, 1, testConfig, nil)
			require.NoError(t, err, "rendering the transfer Job")
			golden(t, name+"-transfer", toYAML(t, tcm, tjob))

			dom, err := RenderDomainXML(m, nil)
			require.NoError(t, err, "rendering the domain XML")
			golden(t, name+"-domain.xml", dom)
			ccm, err := RenderConversionConfigMap(m, 2, nil)
			require.NoError(t, err, "rendering the conversion ConfigMap")
			cjob, err := RenderConversionJob(m, 2, testConfig, nil)
			require.NoError(t, err, "rendering the conversion Job")
			golden(t, name+"-conversion", toYAML(t, ccm, cjob))

			dvs, err := RenderDataVolumes(m, nil)
			require.NoError(t, err, "rendering the DataVolumes")
			objs = nil
			for _, dv := range dvs {
				objs = append(objs, dv)
			}
			golden(t, name+"-datavolumes", toYAML(t, objs...))

			vm, err := RenderVirtualMachine(m)
			require.NoError(t, err, "rendering the VirtualMachine")
			golden(t, name+"-vm", toYAML(t, vm))
		})
	}
}
