// Command runlocal prints what hack/run-local.sh says of the example
// migration: its line each time it changes (line), how it went, from its
// own status (summary), and, while the stack stays up, how to use it
// (hints).
//
//	kubectl get vmm NAME -n NS -o json | runlocal line
//	kubectl get vmm NAME -n NS -o json | runlocal summary --since-start 2156s
//	runlocal hints --state _output/run-local --namespace migrations --example web-01 \
//	  --vm web-01 --vm db-01 --vcsim-url URL --server-version v1.37.2 --machine-kubectl v1.32.4 [--guest bios]
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "runlocal:", err)
		os.Exit(1)
	}
}

type names []string

func (n *names) String() string     { return strings.Join(*n, ",") }
func (n *names) Set(v string) error { *n = append(*n, v); return nil }

func run(args []string, in io.Reader, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: runlocal line|summary|hints [flags]")
	}
	fs := flag.NewFlagSet("runlocal "+args[0], flag.ContinueOnError)
	switch args[0] {
	case "line":
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		var m v1alpha1.VirtualMachineMigration
		if err := json.NewDecoder(in).Decode(&m); err != nil {
			return fmt.Errorf("reading the migration (kubectl get vmm -o json) from stdin: %w", err)
		}
		_, err := fmt.Fprintln(out, Line(&m))
		return err
	case "summary":
		since := fs.Duration("since-start", 0, "how long ago run-local started")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		var m v1alpha1.VirtualMachineMigration
		if err := json.NewDecoder(in).Decode(&m); err != nil {
			return fmt.Errorf("reading the migration (kubectl get vmm -o json) from stdin: %w", err)
		}
		for _, l := range Summary(&m, *since) {
			fmt.Fprintln(out, l)
		}
		return nil
	case "hints":
		var s Stack
		var vms names
		fs.StringVar(&s.State, "state", "", "run-local's state folder, as the reader types it")
		fs.StringVar(&s.Namespace, "namespace", "", "the example's namespace")
		fs.StringVar(&s.Example, "example", "", "the example migration's name (its VM's)")
		fs.Var(&vms, "vm", "a source VM vcsim serves (repeatable)")
		fs.StringVar(&s.VcsimURL, "vcsim-url", "", "vcsim's URL")
		fs.StringVar(&s.ServerVersion, "server-version", "", "the API server's version, the kubectl's of the env file")
		fs.StringVar(&s.MachineKubectl, "machine-kubectl", "", "the version of the machine's own kubectl, empty when it has none")
		fs.StringVar(&s.Guest, "guest", "", "the real guest's firmware (GUEST), empty for the sample VMs")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		s.VMs = vms
		_, err := io.WriteString(out, Hints(s))
		return err
	}
	return fmt.Errorf("unknown command %q: want line, summary or hints", args[0])
}

// clock is a time of day as the summary prints it.
func clock(t time.Time) string { return t.UTC().Format("15:04:05") }

// seconds is a duration in whole seconds, as "35s".
func seconds(d time.Duration) string {
	return fmt.Sprintf("%ds", int64(d.Round(time.Second)/time.Second))
}
