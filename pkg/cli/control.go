package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// policyChange is one of approve, pause and resume: a merge patch of
// spec.policy, with what makes it pointless or impossible.
type policyChange struct {
	use, short, done string
	// patch is the merge patch of spec.policy.
	patch string
	// unchanged says why the patch would change nothing, or "".
	unchanged func(m *v1alpha1.VirtualMachineMigration) string
}

func newApproveCommand(e *env) *cobra.Command {
	return newPolicyCommand(e, policyChange{
		use: "approve", short: "Approve the cutover of a migration that waits for approval (spec.policy.approved)",
		done: "approved: the controller may now stop the source VM", patch: `{"approved":true}`,
		unchanged: func(m *v1alpha1.VirtualMachineMigration) string {
			switch {
			case m.Spec.Policy.Approved:
				return "already approved"
			case !m.Spec.Policy.RequireApproval:
				return "it does not wait for approval (spec.policy.requireApproval is false)"
			}
			return ""
		},
	})
}

func newPauseCommand(e *env) *cobra.Command {
	return newPolicyCommand(e, policyChange{
		use: "pause", short: "Hold a migration at its current checkpoint (spec.policy.paused); running Jobs are not interrupted",
		done: "paused: no new action until kubectl vmm resume", patch: `{"paused":true}`,
		unchanged: func(m *v1alpha1.VirtualMachineMigration) string {
			if m.Spec.Policy.Paused {
				return "already paused"
			}
			return ""
		},
	})
}

func newResumeCommand(e *env) *cobra.Command {
	return newPolicyCommand(e, policyChange{
		use: "resume", short: "Let a paused migration go on",
		done: "resumed", patch: `{"paused":false}`,
		unchanged: func(m *v1alpha1.VirtualMachineMigration) string {
			if !m.Spec.Policy.Paused {
				return "not paused"
			}
			return ""
		},
	})
}

func newPolicyCommand(e *env, c policyChange) *cobra.Command {
	return &cobra.Command{
		Use:   c.use + " NAME",
		Short: c.short,
		Args:  exactlyOneName,
		RunE:  func(cmd *cobra.Command, args []string) error { return e.changePolicy(cmd.Context(), args[0], c) },
	}
}

func (e *env) changePolicy(ctx context.Context, name string, c policyChange) error {
	clients, ns, err := e.clientsAndNamespace()
	if err != nil {
		return err
	}
	api := clients.Migration.MigrationV1alpha1().VirtualMachineMigrations(ns)
	m, err := api.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return notFound(err, name, ns)
	}
	switch {
	case m.DeletionTimestamp != nil:
		return fmt.Errorf("%s %q is being cancelled: there is nothing to %s", resourceName, name, c.use)
	case isTerminal(m):
		return fmt.Errorf("%s %q already ended %s: there is nothing to %s", resourceName, name, phaseOf(m), c.use)
	}
	if why := c.unchanged(m); why != "" {
		_, err := fmt.Fprintf(e.streams.Out, "%s/%s unchanged: %s\n", resourceName, name, why)
		return err
	}
	patch := fmt.Sprintf(`{"spec":{"policy":%s}}`, c.patch)
	if _, err := api.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "kubectl-vmm"}); err != nil {
		return fmt.Errorf("patching %s %q: %w", resourceName, name, notFound(err, name, ns))
	}
	_, err = fmt.Fprintf(e.streams.Out, "%s/%s %s\n", resourceName, name, c.done)
	return err
}

func (e *env) clientsAndNamespace() (Clients, string, error) {
	clients, err := e.factory.Clients()
	if err != nil {
		return Clients{}, "", err
	}
	ns, err := e.namespace()
	return clients, ns, err
}

// cancelOptions are the flags of cancel.
type cancelOptions struct {
	*env
	yes bool
}

func newCancelCommand(e *env) *cobra.Command {
	o := &cancelOptions{env: e}
	cmd := &cobra.Command{
		Use:   "cancel NAME",
		Short: "Cancel a migration: says what that does in its current phase, asks, then deletes it",
		Long: `Cancel deletes the migration. The controller's finalizer then undoes what the
migration did in its current phase (kubectl vmm cancel explains it before it
asks): it stops running Jobs, deletes staging volumes, Jobs, ConfigMaps and
a target VM that never ran, halts and keeps one that was started (it holds
migrated data), powers the source VM back on if it stopped it, and removes
its snapshots. A migrated VM is never deleted.

Any answer but y or yes leaves the migration as it is and exits with code
1, as no answer does (without input, pass --yes).`,
		Args: exactlyOneName,
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd.Context(), args[0]) },
	}
	cmd.Flags().BoolVarP(&o.yes, "yes", "y", false, "cancel without asking for confirmation")
	return cmd
}

func (o *cancelOptions) run(ctx context.Context, name string) error {
	clients, ns, err := o.clientsAndNamespace()
	if err != nil {
		return err
	}
	api := clients.Migration.MigrationV1alpha1().VirtualMachineMigrations(ns)
	m, err := api.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return notFound(err, name, ns)
	}
	if m.DeletionTimestamp != nil {
		_, err := fmt.Fprintf(o.view(), "%s/%s is already being cancelled (phase %s)\n", resourceName, name, phaseOf(m))
		return err
	}
	out := o.view()
	if o.yes {
		fmt.Fprintf(out, "%s/%s is in phase %s. Cancelling it: %s\n", resourceName, name, clean(string(phaseOf(m))), clean(cancelEffect(m)))
	} else {
		fmt.Fprintf(out, "%s/%s is in phase %s. If you cancel it, %s\n", resourceName, name, clean(string(phaseOf(m))), clean(cancelEffect(m)))
		ok, err := confirm(o.streams.In, out, fmt.Sprintf("Cancel %s/%s now? [y/N]: ", ns, name))
		if err != nil {
			return err
		}
		if !ok {
			// An error, so that a script tells a declined cancel (exit
			// code 1) from one done.
			return fmt.Errorf("%s/%s not cancelled: the answer was not yes", resourceName, name)
		}
	}
	uid := m.UID
	if err := api.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil {
		return fmt.Errorf("deleting %s %q: %w", resourceName, name, notFound(err, name, ns))
	}
	_, err = fmt.Fprintf(o.streams.Out, "%s/%s cancelling; follow it with kubectl vmm get %s -n %s --watch\n", resourceName, name, name, ns)
	return err
}

// confirm asks a yes/no question; only y or yes (any case) is yes. No
// answer at all (end of input) is an error, so scripts must pass --yes;
// the question's line is ended first, so that the error is a line of its
// own.
func confirm(in io.Reader, out io.Writer, question string) (bool, error) {
	if in == nil {
		return false, errors.New("no input to read a confirmation from: pass --yes to cancel without asking")
	}
	fmt.Fprint(out, question)
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && (!errors.Is(err, io.EOF) || line == "") {
		fmt.Fprintln(out)
		return false, errors.New("no confirmation read: pass --yes to cancel without asking")
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true, nil
	}
	return false, nil
}
