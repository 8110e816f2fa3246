// Command vmm-network-attachments is the test node's stand-in for Multus,
// the CNI meta-plugin that attaches a pod to the extra networks its
// k8s.v1.cni.cncf.io/networks annotation names. Multus cannot be built
// here (the module proxy refuses github.com/k8snetworkplumbingwg/multus-cni
// and gopkg.in/k8snetworkplumbingwg/multus-cni.v4; Debian has no package),
// and KubeVirt's virt-handler needs the pod interface of each Multus
// network of an instance to exist in its launcher pod before it wires the
// guest's NIC to it.
//
// It runs as the last plugin of the node's pod network chain
// (framework.WithNetworkAttachments). On ADD it reads the pod's networks
// annotation (Multus' JSON list form: name, namespace, interface), reads
// each NetworkAttachmentDefinition, runs the plugin its spec.config names
// (one plugin, not a list) from binDir with CNI_IFNAME the entry's
// interface (net1, net2... when none is given), records what it ran under
// stateDir for DEL, writes the k8s.v1.cni.cncf.io/network-status
// annotation as Multus does (the default network first), and passes the
// chain's prevResult on. On DEL it runs the recorded plugins' DEL, best
// effort. What it does not do of Multus: network lists (conflists) in a
// definition, the default-network annotation, runtime config (ips, mac,
// portMappings) and the resourceName of device plugins.
//
// Its configuration, in the chain:
//
//	{"type": "vmm-network-attachments", "kubeconfig": "...", "binDir": "/usr/lib/cni", "stateDir": "..."}
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// Annotations Multus reads and writes.
const (
	networksAnnotation      = "k8s.v1.cni.cncf.io/networks"
	networkStatusAnnotation = "k8s.v1.cni.cncf.io/network-status"
)

var nadGVR = schema.GroupVersionResource{Group: "k8s.cni.cncf.io", Version: "v1", Resource: "network-attachment-definitions"}

// config is the plugin's configuration in the chain.
type config struct {
	CNIVersion string          `json:"cniVersion"`
	Name       string          `json:"name"`
	Kubeconfig string          `json:"kubeconfig"`
	BinDir     string          `json:"binDir"`
	StateDir   string          `json:"stateDir"`
	PrevResult json.RawMessage `json:"prevResult,omitempty"`
}

// selection is one entry of the networks annotation.
type selection struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	Interface string `json:"interface,omitempty"`
}

// attachment is what ADD ran for one selection, kept for DEL.
type attachment struct {
	Network   string          `json:"network"`
	Interface string          `json:"interface"`
	Plugin    string          `json:"plugin"`
	Config    json.RawMessage `json:"config"`
	Result    json.RawMessage `json:"result,omitempty"`
}

// cniError is the error CNI plugins print on stdout.
type cniError struct {
	CNIVersion string `json:"cniVersion"`
	Code       int    `json:"code"`
	Msg        string `json:"msg"`
	Details    string `json:"details,omitempty"`
}

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil {
		_ = json.NewEncoder(os.Stdout).Encode(cniError{CNIVersion: "1.0.0", Code: 999, Msg: "vmm-network-attachments: " + err.Error()})
		os.Exit(1)
	}
}

func run(stdin io.Reader, stdout io.Writer) error {
	command := os.Getenv("CNI_COMMAND")
	if command == "VERSION" {
		_, err := fmt.Fprintln(stdout, `{"cniVersion":"1.0.0","supportedVersions":["0.3.1","0.4.0","1.0.0","1.1.0"]}`)
		return err
	}
	raw, err := io.ReadAll(stdin)
	if err != nil {
		return fmt.Errorf("reading the configuration: %w", err)
	}
	var c config
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("parsing the configuration: %w", err)
	}
	containerID := os.Getenv("CNI_CONTAINERID")
	state := filepath.Join(c.StateDir, containerID+".json")
	switch command {
	case "ADD":
		if err := add(c, state); err != nil {
			return err
		}
		return passResult(c, stdout)
	case "DEL":
		del(c.BinDir, state)
		return nil
	default: // CHECK, STATUS, GC: nothing of ours to check.
		return nil
	}
}

// passResult prints the chain's result, which this plugin leaves as it is.
func passResult(c config, stdout io.Writer) error {
	if len(c.PrevResult) == 0 {
		_, err := fmt.Fprintf(stdout, `{"cniVersion":%q}`+"\n", c.CNIVersion)
		return err
	}
	var r map[string]any
	if err := json.Unmarshal(c.PrevResult, &r); err != nil {
		return fmt.Errorf("parsing prevResult: %w", err)
	}
	r["cniVersion"] = c.CNIVersion
	return json.NewEncoder(stdout).Encode(r)
}

// podArgs returns the pod's namespace and name from CNI_ARGS.
func podArgs() (string, string, error) {
	args := map[string]string{}
	for _, kv := range strings.Split(os.Getenv("CNI_ARGS"), ";") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			args[k] = v
		}
	}
	ns, name := args["K8S_POD_NAMESPACE"], args["K8S_POD_NAME"]
	if ns == "" || name == "" {
		return "", "", errors.New("CNI_ARGS names no pod (K8S_POD_NAMESPACE, K8S_POD_NAME)")
	}
	return ns, name, nil
}

func add(c config, state string) error {
	ns, name, err := podArgs()
	if err != nil {
		return err
	}
	rc, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return fmt.Errorf("reading kubeconfig %s: %w", c.Kubeconfig, err)
	}
	rc.Timeout = 20 * time.Second
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	ctx := context.Background()
	pod, err := kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading pod %s/%s: %w", ns, name, err)
	}
	value := pod.Annotations[networksAnnotation]
	if value == "" {
		return nil
	}
	sels, err := parseSelections(value, ns)
	if err != nil {
		return fmt.Errorf("pod %s/%s: %w", ns, name, err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return err
	}
	var done []attachment
	for i, s := range sels {
		a, err := attach(ctx, dyn, c, s, i+1)
		if err != nil {
			rollback(c.BinDir, done)
			return fmt.Errorf("pod %s/%s, network %s/%s: %w", ns, name, s.Namespace, s.Name, err)
		}
		done = append(done, a)
	}
	data, err := json.Marshal(done)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.StateDir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(state, data, 0o600); err != nil {
		rollback(c.BinDir, done)
		return fmt.Errorf("recording the attachments: %w", err)
	}
	return writeNetworkStatus(ctx, kube, ns, name, c, done)
}

// parseSelections reads the networks annotation: Multus' JSON list, or its
// short form (comma-separated [namespace/]name[@interface]).
func parseSelections(value, podNamespace string) ([]selection, error) {
	var sels []selection
	if strings.HasPrefix(strings.TrimSpace(value), "[") {
		if err := json.Unmarshal([]byte(value), &sels); err != nil {
			return nil, fmt.Errorf("parsing the %s annotation: %w", networksAnnotation, err)
		}
	} else {
		for _, item := range strings.Split(value, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			var s selection
			item, s.Interface, _ = strings.Cut(item, "@")
			if ns, n, ok := strings.Cut(item, "/"); ok {
				s.Namespace, s.Name = ns, n
			} else {
				s.Name = item
			}
			sels = append(sels, s)
		}
	}
	for i := range sels {
		if sels[i].Namespace == "" {
			sels[i].Namespace = podNamespace
		}
		if sels[i].Name == "" {
			return nil, fmt.Errorf("entry %d of the %s annotation names no network", i, networksAnnotation)
		}
	}
	return sels, nil
}

// attach runs the plugin of s's NetworkAttachmentDefinition for interface
// s.Interface (net<ordinal> when it names none).
func attach(ctx context.Context, dyn dynamic.Interface, c config, s selection, ordinal int) (attachment, error) {
	nad, err := dyn.Resource(nadGVR).Namespace(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
	if err != nil {
		return attachment{}, fmt.Errorf("reading its NetworkAttachmentDefinition: %w", err)
	}
	raw, _, _ := unstructuredString(nad.Object, "spec", "config")
	var conf map[string]any
	if err := json.Unmarshal([]byte(raw), &conf); err != nil {
		return attachment{}, fmt.Errorf("parsing spec.config: %w", err)
	}
	if _, list := conf["plugins"]; list {
		return attachment{}, errors.New("spec.config is a plugin list, which this stand-in for Multus does not run")
	}
	plugin, _ := conf["type"].(string)
	if plugin == "" || strings.ContainsAny(plugin, "/.") {
		return attachment{}, fmt.Errorf("spec.config names no plugin type (%q)", plugin)
	}
	if _, ok := conf["name"]; !ok {
		conf["name"] = s.Name
	}
	if _, ok := conf["cniVersion"]; !ok {
		conf["cniVersion"] = "0.3.1"
	}
	confJSON, err := json.Marshal(conf)
	if err != nil {
		return attachment{}, err
	}
	a := attachment{Network: s.Namespace + "/" + s.Name, Interface: s.Interface, Plugin: plugin, Config: confJSON}
	if a.Interface == "" {
		a.Interface = fmt.Sprintf("net%d", ordinal)
	}
	out, err := delegate(c.BinDir, "ADD", a)
	if err != nil {
		return attachment{}, err
	}
	a.Result = out
	return a, nil
}

// unstructuredString reads a string field of an unstructured object.
func unstructuredString(obj map[string]any, fields ...string) (string, bool, error) {
	var cur any = obj
	for _, f := range fields {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false, nil
		}
		cur = m[f]
	}
	s, ok := cur.(string)
	return s, ok, nil
}

// delegate runs a's plugin with command, in the pod's network namespace.
func delegate(binDir, command string, a attachment) (json.RawMessage, error) {
	cmd := exec.Command(filepath.Join(binDir, a.Plugin))
	cmd.Env = append(os.Environ(), "CNI_COMMAND="+command, "CNI_IFNAME="+a.Interface, "CNI_PATH="+binDir)
	cmd.Stdin = bytes.NewReader(a.Config)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s of %s: %w: %s %s", a.Plugin, command, a.Interface, err, strings.TrimSpace(stdout.String()), strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// rollback deletes what ADD attached before it failed.
func rollback(binDir string, done []attachment) {
	for i := len(done) - 1; i >= 0; i-- {
		_, _ = delegate(binDir, "DEL", done[i])
	}
}

// del runs DEL for each recorded attachment, best effort (the pod and its
// namespace may be gone), then forgets them.
func del(binDir, state string) {
	data, err := os.ReadFile(state)
	if err != nil {
		return
	}
	var done []attachment
	if json.Unmarshal(data, &done) == nil {
		for i := len(done) - 1; i >= 0; i-- {
			if _, err := delegate(binDir, "DEL", done[i]); err != nil {
				fmt.Fprintln(os.Stderr, "vmm-network-attachments:", err)
			}
		}
	}
	_ = os.Remove(state)
}

// networkStatus is one entry of the network-status annotation.
type networkStatus struct {
	Name      string   `json:"name"`
	Interface string   `json:"interface,omitempty"`
	IPs       []string `json:"ips,omitempty"`
	MAC       string   `json:"mac,omitempty"`
	Default   bool     `json:"default,omitempty"`
}

// cniResult is the part of a CNI result the status needs.
type cniResult struct {
	Interfaces []struct {
		Name    string `json:"name"`
		MAC     string `json:"mac"`
		Sandbox string `json:"sandbox"`
	} `json:"interfaces"`
	IPs []struct {
		Address string `json:"address"`
	} `json:"ips"`
}

// status turns a plugin's result for interface ifname into its entry.
func status(network, ifname string, result json.RawMessage, isDefault bool) networkStatus {
	st := networkStatus{Name: network, Interface: ifname, Default: isDefault}
	var r cniResult
	if json.Unmarshal(result, &r) != nil {
		return st
	}
	for _, i := range r.Interfaces {
		if i.Name == ifname && i.Sandbox != "" {
			st.MAC = i.MAC
		}
	}
	for _, ip := range r.IPs {
		addr, _, _ := strings.Cut(ip.Address, "/")
		st.IPs = append(st.IPs, addr)
	}
	return st
}

// writeNetworkStatus writes the network-status annotation, as Multus
// does: the default network (the chain's result, eth0) first.
func writeNetworkStatus(ctx context.Context, kube kubernetes.Interface, ns, name string, c config, done []attachment) error {
	statuses := []networkStatus{status(c.Name, os.Getenv("CNI_IFNAME"), c.PrevResult, true)}
	for _, a := range done {
		statuses = append(statuses, status(a.Network, a.Interface, a.Result, false))
	}
	value, err := json.Marshal(statuses)
	if err != nil {
		return err
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{networkStatusAnnotation: string(value)}}})
	if err != nil {
		return err
	}
	if _, err := kube.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("writing the %s annotation of pod %s/%s: %w", networkStatusAnnotation, ns, name, err)
	}
	return nil
}
