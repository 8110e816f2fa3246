// Command vcsim-local serves the sample vSphere inventory of package
// vcsimlocal (govmomi's simulator; VMs whose disks hold real bytes) on
// 127.0.0.1 for hack/run-local.sh.
//
//	vcsim-local --address 127.0.0.1:8989 --state-dir DIR [--vm web-01 --vm db-01]
//
// Into DIR it writes url, thumbprint, username and password (mode 0600),
// the files a credentials Secret is made from, and vms.json (each VM's
// moRef, disks with their SHA-256, MACs). The password is never printed.
// It prints one line "ready <url>" once it serves, and runs until SIGINT or
// SIGTERM.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"platform.example/vm-migration/test/vcsimlocal"
)

type vmList []string

func (l *vmList) String() string     { return strings.Join(*l, ",") }
func (l *vmList) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "vcsim-local:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		address, stateDir string
		vms               vmList
	)
	fs := flag.NewFlagSet("vcsim-local", flag.ContinueOnError)
	fs.StringVar(&address, "address", "127.0.0.1:0", "loopback address to listen on")
	fs.StringVar(&stateDir, "state-dir", "", "directory for url, thumbprint, username, password and vms.json")
	fs.Var(&vms, "vm", "name of a sample VM to create (repeatable; default web-01)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if stateDir == "" {
		return errors.New("--state-dir is required")
	}
	if len(vms) == 0 {
		vms = vmList{"web-01"}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	s, err := vcsimlocal.Start(ctx, vcsimlocal.Options{Address: address})
	if err != nil {
		return err
	}
	defer s.Close()
	var created []*vcsimlocal.VM
	for i, name := range vms {
		vm, err := s.AddVM(ctx, vcsimlocal.SampleVM(name, uint64(1000+100*i)))
		if err != nil {
			return err
		}
		created = append(created, vm)
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return fmt.Errorf("creating the state directory: %w", err)
	}
	inventory, err := json.MarshalIndent(created, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the inventory: %w", err)
	}
	files := map[string][]byte{
		"url": []byte(s.URL), "thumbprint": []byte(s.Thumbprint), "username": []byte(s.Username),
		"password": []byte(s.Password), "vms.json": inventory,
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(stateDir, name), data, 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}
	fmt.Printf("ready %s\n", s.URL)
	<-ctx.Done()
	return nil
}
