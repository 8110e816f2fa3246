// Command rulespec prints the spec of a PrometheusRule manifest as a
// Prometheus rule file (groups: ...), so that promtool can check and test
// the rules the manifests ship: go run ./hack/rulespec FILE > rules.yaml
package main

import (
	"errors"
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

// prometheusRule is the part of a PrometheusRule that promtool reads.
type prometheusRule struct {
	Kind string         `json:"kind"`
	Spec map[string]any `json:"spec"`
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "rulespec:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) != 1 {
		return errors.New("usage: rulespec PROMETHEUSRULE.yaml")
	}
	data, err := os.ReadFile(args[0])
	if err != nil {
		return fmt.Errorf("reading the rule manifest: %w", err)
	}
	var rule prometheusRule
	if err := yaml.Unmarshal(data, &rule); err != nil {
		return fmt.Errorf("parsing %s: %w", args[0], err)
	}
	if rule.Kind != "PrometheusRule" {
		return fmt.Errorf("%s holds a %q, not a PrometheusRule", args[0], rule.Kind)
	}
	if _, ok := rule.Spec["groups"]; !ok {
		return fmt.Errorf("%s has no spec.groups", args[0])
	}
	out, err := yaml.Marshal(rule.Spec)
	if err != nil {
		return fmt.Errorf("writing the rule groups: %w", err)
	}
	_, err = os.Stdout.Write(out)
	return err
}
