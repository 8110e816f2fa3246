// Command vcsim-local serves the sample vSphere inventory of package
// vcsimlocal (govmomi's simulator) on 127.0.0.1 or the test node's link,
// for hack/run-local.sh.
//
//	vcsim-local --address 127.0.0.1:8989 --state-dir DIR [--vm web-01 --vm db-01] [--disk-size 4GiB]
//	vcsim-local --address ... --state-dir DIR --vm bios-guest [--vm app-01] --guest-image bios.img --guest-firmware bios
//
// Each --vm (repeatable; default web-01) is one source VM, in datacenter
// DC0. Without --guest-image it is a sample VM: EFI, 2 sockets of 2
// cores, 2 GiB, 3 small disks of pseudo-random bytes (their own per VM:
// 8, 6 and 4 MiB), NICs on the VM Network and DC0_DVPG0; its disks are no
// guest, so only a simulated conversion takes them. --disk-size (a whole
// number of MiB or GiB: 512MiB, 4GiB) makes each sample VM's first disk
// that size instead of 8 MiB, of the same kind of bytes, written as it
// starts into DIR/disks/<vm>.img (a MiB at a time: about 10 s a GiB on
// the 2-core machine, most of it the disk's writes, and its block tree's
// root computed after) and served from there as its flat extent; make
// run-local's DISK_GIB passes it. With --guest-image each is a real
// guest: one vCPU, 1 GiB, the given firmware, one disk served from the
// raw image (laid out as an ESXi host keeps it, a descriptor and the
// image as its flat extent, linked, never copied: the simulator only
// reads it, so several VMs share it), one NIC on the VM Network with a
// MAC of its own. make run-local passes its VMS and GUEST as these flags.
//
// Into DIR it writes url, thumbprint, username and password (mode 0600),
// the files a credentials Secret is made from, vms.json (each VM's
// moRef, disks with their SHA-256, MACs) and known_hosts, govc's
// GOVC_TLS_KNOWN_HOSTS file (docs/contributors/testing.md: The local
// vCenter). The password is never printed.
// It prints one line "ready <url>" once it serves, and runs until SIGINT or
// SIGTERM.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
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
		address, stateDir         string
		guestImage, guestFirmware string
		diskSize                  string
		vms                       vmList
	)
	fs := flag.NewFlagSet("vcsim-local", flag.ContinueOnError)
	fs.StringVar(&address, "address", "127.0.0.1:0", "address to listen on: loopback, or the test node's link")
	fs.StringVar(&guestImage, "guest-image", "", "raw disk image of a real guest: the VM (one --vm) gets it as its only disk")
	fs.StringVar(&guestFirmware, "guest-firmware", "bios", "firmware of the --guest-image VM: bios or efi")
	fs.StringVar(&diskSize, "disk-size", "", "size of each sample VM's first disk (default 8MiB), a whole number of MiB or GiB: 512MiB, 4GiB; written into DIR/disks/ as vcsim-local starts")
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
	size, err := parseDiskSize(diskSize)
	if err != nil {
		return err
	}
	if size > 0 && guestImage != "" {
		return errors.New("--disk-size: a --guest-image VM's disk is its image, of the image's size")
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return fmt.Errorf("creating the state directory: %w", err)
	}
	specs, err := vmSpecs(vms, guestImage, guestFirmware)
	if err != nil {
		return err
	}
	if size > 0 {
		if err := sizeFirstDisks(specs, size, filepath.Join(stateDir, "disks")); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	s, err := vcsimlocal.Start(ctx, vcsimlocal.Options{Address: address})
	if err != nil {
		return err
	}
	defer s.Close()
	var created []*vcsimlocal.VM
	for _, spec := range specs {
		vm, err := s.AddVM(ctx, spec)
		if err != nil {
			return err
		}
		created = append(created, vm)
	}
	inventory, err := json.MarshalIndent(created, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the inventory: %w", err)
	}
	hosts, err := knownHosts(s.URL, s.Thumbprint)
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"url": []byte(s.URL), "thumbprint": []byte(s.Thumbprint), "username": []byte(s.Username),
		"password": []byte(s.Password), "vms.json": inventory, "known_hosts": []byte(hosts),
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

// vmSpecs are the VMs of the given names: sample VMs, or, with
// guestImage, real guests of that image and firmware.
func vmSpecs(names []string, guestImage, guestFirmware string) ([]vcsimlocal.VMSpec, error) {
	var specs []vcsimlocal.VMSpec
	for i, name := range names {
		spec := vcsimlocal.SampleVM(name, uint64(1000+100*i))
		if guestImage != "" {
			var err error
			if spec, err = guestVM(name, guestImage, guestFirmware, i); err != nil {
				return nil, err
			}
		}
		specs = append(specs, spec)
	}
	return specs, nil
}

// knownHosts is govc's known hosts file (GOVC_TLS_KNOWN_HOSTS) for the
// server at url: its host and port, then its certificate's thumbprint.
func knownHosts(sdkURL, thumbprint string) (string, error) {
	u, err := url.Parse(sdkURL)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("the simulator's URL %q has no host", sdkURL)
	}
	return u.Host + " " + thumbprint + "\n", nil
}

// parseDiskSize reads --disk-size: a whole number of MiB or GiB, at
// least 2 MiB (a disk image's least); 0 for "".
func parseDiskSize(v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	unit := map[string]int64{"MiB": vcsimlocal.MiB, "GiB": 1 << 30}[strings.TrimLeft(v, "0123456789")]
	n, err := strconv.ParseInt(strings.TrimRight(v, "MGiB"), 10, 64)
	if unit == 0 || err != nil || n <= 0 || n > (1<<50)/unit || n*unit < 2*vcsimlocal.MiB {
		return 0, fmt.Errorf("--disk-size %q: want a whole number of MiB or GiB, at least 2MiB (512MiB, 4GiB)", v)
	}
	return n * unit, nil
}

// sizeFirstDisks makes the first disk of each sample VM of specs size
// bytes of its seed's content, written into dir as <vm>.img and served
// from there.
func sizeFirstDisks(specs []vcsimlocal.VMSpec, size int64, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	for i := range specs {
		image := filepath.Join(dir, specs[i].Name+".img")
		fmt.Printf("writing %s: disk 0 of %s, %d MiB of pseudo-random bytes\n", image, specs[i].Name, size/vcsimlocal.MiB)
		if err := vcsimlocal.WriteDiskImage(image, size, specs[i].Disks[0].Seed); err != nil {
			return err
		}
		disk, err := vcsimlocal.ImageDisk(image)
		if err != nil {
			return err
		}
		specs[i].Disks[0] = disk
	}
	return nil
}

// guestVM is the i-th VM of one vCPU and 1 GiB whose only disk is a real
// guest's raw image.
func guestVM(name, image, firmware string, i int) (vcsimlocal.VMSpec, error) {
	if firmware != "bios" && firmware != "efi" {
		return vcsimlocal.VMSpec{}, fmt.Errorf("--guest-firmware %q: want bios or efi", firmware)
	}
	if i > 0xff-0x0c {
		return vcsimlocal.VMSpec{}, fmt.Errorf("--guest-image: at most %d VMs", 0xff-0x0c+1)
	}
	disk, err := vcsimlocal.ImageDisk(image)
	if err != nil {
		return vcsimlocal.VMSpec{}, err
	}
	return vcsimlocal.VMSpec{
		Name: name, Sockets: 1, CoresPerSocket: 1, MemoryMiB: 1024,
		Firmware: firmware, SecureBoot: firmware == "efi",
		Disks: []vcsimlocal.DiskSpec{disk}, NICs: []vcsimlocal.NICSpec{{Network: vcsimlocal.NetworkVM, MAC: fmt.Sprintf("00:50:56:2a:0b:%02x", 0x0c+i)}},
		PoweredOn: true,
	}, nil
}
