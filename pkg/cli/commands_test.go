package cli

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	migfake "platform.example/vm-migration/pkg/generated/migration/clientset/versioned/fake"
)

// fakeFactory serves fake clientsets, the namespace "apps" and testNow.
type fakeFactory struct {
	mig  *migfake.Clientset
	kube *kubefake.Clientset
}

func (f *fakeFactory) Clients() (Clients, error)        { return Clients{Migration: f.mig, Kube: f.kube}, nil }
func (f *fakeFactory) Namespace() (string, bool, error) { return "apps", false, nil }
func (f *fakeFactory) Now() time.Time                   { return testNow }

// harness runs commands against fake clientsets holding objects.
type harness struct {
	factory       *fakeFactory
	in            *bytes.Buffer
	out, errOut   *bytes.Buffer
	terminal      bool
	migrationObjs []runtime.Object
}

func newHarness(t *testing.T, migrations []runtime.Object, kube ...runtime.Object) *harness {
	t.Helper()
	return &harness{
		factory: &fakeFactory{mig: migfake.NewSimpleClientset(migrations...), kube: kubefake.NewSimpleClientset(kube...)},
		in:      &bytes.Buffer{}, out: &bytes.Buffer{}, errOut: &bytes.Buffer{},
	}
}

// run executes one command line; it returns the exit code.
func (h *harness) run(ctx context.Context, args ...string) int {
	e := &env{
		streams:  genericiooptions.IOStreams{In: h.in, Out: h.out, ErrOut: h.errOut},
		factory:  h.factory,
		terminal: func(io.Writer) bool { return h.terminal },
	}
	return Execute(ctx, newCommand(e), args, h.errOut)
}

// objects returns fixtures as runtime objects.
func objects(ms ...*v1alpha1.VirtualMachineMigration) []runtime.Object {
	var out []runtime.Object
	for _, m := range ms {
		if m != nil {
			out = append(out, m)
		}
	}
	return out
}

func TestCommandsPrint(t *testing.T) {
	all := fixtures()
	cases := []struct {
		name       string
		args       []string
		wantCode   int
		wantOut    []string
		wantErr    string
		notWantOut []string
	}{
		{name: "list", args: []string{"list"}, wantOut: []string{"NAME", "transferring", "TransferringDisks", "31%", "WaitingForTransferSlot"}},
		{name: "list wide", args: []string{"list", "-o", "wide"}, wantOut: []string{"LAST ERROR", "PreflightFailed", "170.0 MiB/s"}},
		{name: "list all namespaces", args: []string{"list", "-A"}, wantOut: []string{"NAMESPACE", "apps "}},
		{name: "list names", args: []string{"list", "-o", "name"}, wantOut: []string{"virtualmachinemigration.migration.platform.example/queued\n"}},
		{name: "list no headers", args: []string{"list", "--no-headers"}, notWantOut: []string{"NAME"}},
		{name: "get one", args: []string{"get", "transferring"}, wantOut: []string{"apps/transferring: TransferringDisks for 41m, 31%", "disk-0", "85.0 MiB/s", "ETA 49s", "Next:"}},
		{name: "get yaml", args: []string{"get", "queued", "-o", "yaml"}, wantOut: []string{"kind: VirtualMachineMigration", "apiVersion: migration.platform.example/v1alpha1", "name: queued"}},
		{name: "get json", args: []string{"get", "queued", "-o", "json"}, wantOut: []string{`"kind": "VirtualMachineMigration"`}},
		{name: "get jsonpath", args: []string{"get", "queued", "-o", "jsonpath={.status.phase}"}, wantOut: []string{"Queued"}},
		{name: "get without name lists", args: []string{"get"}, wantOut: []string{"NAME", "succeeded"}},
		{name: "get missing", args: []string{"get", "nope"}, wantCode: 1, wantErr: `error: virtualmachinemigration.migration.platform.example "nope" not found in namespace "apps"` + "\n"},
		{name: "get bad output", args: []string{"get", "queued", "-o", "toml"}, wantCode: 1, wantErr: "unable to match a printer"},
		{name: "get name with all namespaces", args: []string{"get", "queued", "-A"}, wantCode: 1, wantErr: "cannot go together"},
		{name: "describe", args: []string{"describe", "succeeded"}, wantOut: []string{"Timeline (each checkpoint when it was passed", "sha256 9f86d0", "virt-v2v warnings:", "Events:"}},
		{name: "describe needs a name", args: []string{"describe"}, wantCode: 1, wantErr: "describe needs exactly one migration name, got 0"},
		{name: "unknown command", args: []string{"frobnicate"}, wantCode: 1, wantErr: `unknown command "frobnicate"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, objects(all["transferring"], all["queued"], all["succeeded"], all["failed"]))
			code := h.run(context.Background(), tc.args...)
			require.Equal(t, tc.wantCode, code, "exit code (stderr %q)", h.errOut)
			for _, want := range tc.wantOut {
				assert.Contains(t, h.out.String(), want, "output lacks %q", want)
			}
			for _, not := range tc.notWantOut {
				assert.NotContains(t, h.out.String(), not, "output has %q", not)
			}
			assert.Contains(t, h.errOut.String(), tc.wantErr, "stderr")
			if tc.wantErr == "" {
				assert.Empty(t, h.errOut.String(), "stderr, want none")
			}
			assert.NotContains(t, strings.TrimSpace(h.errOut.String()), "\n", "stderr is more than one line")
		})
	}
}

func TestListEmpty(t *testing.T) {
	h := newHarness(t, nil)
	require.Equal(t, 0, h.run(context.Background(), "list"), "exit code (stderr %q)", h.errOut)
	assert.Empty(t, h.out.String(), "stdout, want only the note on stderr")
	assert.Contains(t, h.errOut.String(), "No migrations found.", "stderr, want the note")
}

func TestCRDNotInstalled(t *testing.T) {
	for _, args := range [][]string{{"list"}, {"get", "web-01"}, {"describe", "web-01"}, {"approve", "web-01"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			h := newHarness(t, nil)
			h.factory.mig.PrependReactor("*", "virtualmachinemigrations", func(k8stesting.Action) (bool, runtime.Object, error) {
				// What an API server without the CRD answers: a NotFound that names no object.
				return true, nil, apierrors.NewNotFound(schema.GroupResource{}, "")
			})
			require.Equal(t, 1, h.run(context.Background(), args...), "exit code")
			assert.Contains(t, h.errOut.String(), "does not serve virtualmachinemigration.migration.platform.examples: install the CRD first",
				"stderr, want it to say the CRD is missing")
		})
	}
}

// TestGetOneReadsWithGet: showing one migration needs only the get verb,
// as kubectl get NAME does.
func TestGetOneReadsWithGet(t *testing.T) {
	h := newHarness(t, objects(fixtures()["queued"]))
	require.Equal(t, 0, h.run(context.Background(), "get", "queued"), "exit code (stderr %q)", h.errOut)
	var verbs []string
	for _, a := range h.factory.mig.Actions() {
		verbs = append(verbs, a.GetVerb())
	}
	assert.Equal(t, []string{"get"}, verbs, "the verbs of the requests, want one get")

}
