package pipeline

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name.golden, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading %s (run go test -update to create it): %v", path, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the rendering (run go test -update and review the diff):\n--- got\n%s", path, got)
	}
}

// toYAML renders objects as a multi-document YAML stream.
func toYAML(t *testing.T, objs ...any) []byte {
	t.Helper()
	var buf bytes.Buffer
	for i, o := range objs {
		data, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
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
			claims, err := RenderStagingClaims(m)
			if err != nil {
				t.Fatal(err)
			}
			var objs []any
			for _, c := range claims {
				objs = append(objs, c)
			}
			golden(t, name+"-staging", toYAML(t, objs...))

			tcm, err := RenderTransferConfigMap(m, 1)
			if err != nil {
				t.Fatal(err)
			}
			tjob, err := RenderTransferJob(m, 1, testConfig)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, name+"-transfer", toYAML(t, tcm, tjob))

			dom, err := RenderDomainXML(m)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, name+"-domain.xml", dom)
			ccm, err := RenderConversionConfigMap(m, 2)
			if err != nil {
				t.Fatal(err)
			}
			cjob, err := RenderConversionJob(m, 2, testConfig)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, name+"-conversion", toYAML(t, ccm, cjob))

			dvs, err := RenderDataVolumes(m)
			if err != nil {
				t.Fatal(err)
			}
			objs = nil
			for _, dv := range dvs {
				objs = append(objs, dv)
			}
			golden(t, name+"-datavolumes", toYAML(t, objs...))

			vm, err := RenderVirtualMachine(m)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, name+"-vm", toYAML(t, vm))
		})
	}
}
