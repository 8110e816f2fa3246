package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// resourceName is how kubectl names the resource in its messages.
const resourceName = "virtualmachinemigration.migration.platform.example"

// scheme knows the migration types, so that printers can set their kind.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(fmt.Sprintf("registering the migration API: %v", err))
	}
	return s
}()

// env is what every command shares: its streams, clients and terminal test.
type env struct {
	streams  genericiooptions.IOStreams
	factory  Factory
	terminal func(io.Writer) bool
}

// NewRootCommand returns the kubectl-vmm command with kubectl's standard
// connection flags (--kubeconfig, --context, --namespace...).
func NewRootCommand(streams genericiooptions.IOStreams) *cobra.Command {
	flags := genericclioptions.NewConfigFlags(true)
	cmd := newCommand(&env{streams: streams, factory: NewFactory(flags), terminal: func(w io.Writer) bool { return printers.IsTerminal(w) }})
	flags.AddFlags(cmd.PersistentFlags())
	return cmd
}

func newCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kubectl-vmm",
		Short: "Follow and drive VirtualMachineMigrations (vSphere to KubeVirt)",
		Long: `kubectl vmm lists, creates and drives VirtualMachineMigrations: live per-disk
progress, the plan a migration would carry out, what the controller waits
for and what you can do about it.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		// kubectl runs the plugin as "kubectl vmm": help says so.
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl vmm"},
	}
	cmd.AddCommand(
		newListCommand(e), newGetCommand(e), newCreateCommand(e), newDescribeCommand(e), newPlanCommand(e),
		newApproveCommand(e), newPauseCommand(e), newResumeCommand(e), newCancelCommand(e),
	)
	return cmd
}

// Execute runs the command line and returns the exit code, writing an
// error as one line on stderr, as kubectl does.
func Execute(ctx context.Context, cmd *cobra.Command, args []string, stderr io.Writer) int {
	cmd.SetArgs(args)
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(stderr, "error: "+clean(err.Error()))
		return 1
	}
	return 0
}

// namespace resolves the namespace a command works in.
func (e *env) namespace() (string, error) {
	ns, _, err := e.factory.Namespace()
	return ns, err
}

// notFound rewrites an API NotFound into a line that names the namespace.
func notFound(err error, name, namespace string) error {
	if apierrors.IsNotFound(err) {
		if unserved(err) {
			return errUnserved
		}
		return missing(name, namespace)
	}
	return err
}

// errUnserved says the API server does not know migrations at all.
var errUnserved = fmt.Errorf("the API server does not serve %ss: install the CRD first (kubectl apply -k manifests/)", resourceName)

// unserved reports a NotFound about the resource itself rather than one
// object: the CRD is not installed.
func unserved(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || !apierrors.IsNotFound(err) {
		return false
	}
	details := status.Status().Details
	return details == nil || details.Name == ""
}

// missing says a migration does not exist.
func missing(name, namespace string) error {
	return fmt.Errorf("%s %q not found in namespace %q", resourceName, name, namespace)
}

// exactlyOneName is a cobra argument check with a clear message.
func exactlyOneName(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("%s needs exactly one migration name, got %d (see kubectl vmm %s --help)", cmd.Name(), len(args), cmd.Name())
	}
	return nil
}
