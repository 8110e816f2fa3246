package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/vsphere"
	"platform.example/vm-migration/test/vcsimlocal"
)

// govcDoc is where the govc commands below are documented, each line as
// it is here.
const govcDoc = "docs/contributors/testing.md"

// TestGovcCommands runs the govc commands the testing guide gives for
// changing a simulated VM, as the guide gives them (through sh, with the
// environment make run-local's env file sets), against vcsim-local's
// sample VM, with govc built from the project's govmomi
// (hack/build-govc.sh), and reads the VM back as the controller does
// (vsphere.Inventory): each command does what the guide says (issue 50).
func TestGovcCommands(t *testing.T) {
	root, err := filepath.Abs("../../../..")
	require.NoError(t, err)
	build := exec.Command(filepath.Join(root, "hack/build-govc.sh"))
	out, err := build.Output()
	require.NoError(t, err, "hack/build-govc.sh: %s", errText(err))
	govcDir := strings.TrimSpace(string(out[strings.LastIndexByte(strings.TrimSpace(string(out)), '\n')+1:]))
	doc, err := os.ReadFile(filepath.Join(root, govcDoc))
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := vcsimlocal.Start(ctx, vcsimlocal.Options{})
	require.NoError(t, err)
	defer s.Close()
	specs, err := vmSpecs([]string{"web-01"}, "", "bios")
	require.NoError(t, err)
	_, err = s.AddVM(ctx, specs[0])
	require.NoError(t, err)
	hosts, err := knownHosts(s.URL, s.Thumbprint)
	require.NoError(t, err)
	state := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(state, "known_hosts"), []byte(hosts), 0o600))
	env := append(os.Environ(), "PATH="+govcDir+":"+os.Getenv("PATH"), "GOVC_URL="+s.URL, "GOVC_USERNAME="+s.Username,
		"GOVC_PASSWORD="+s.Password, "GOVC_TLS_KNOWN_HOSTS="+filepath.Join(state, "known_hosts"))

	sess, err := vsphere.Connect(ctx, vsphere.Endpoint{URL: s.URL, Datacenter: vcsimlocal.Datacenter},
		vsphere.Credentials{Username: s.Username, Password: s.Password, Thumbprint: s.Thumbprint})
	require.NoError(t, err)
	defer func() { _ = sess.Logout(context.Background()) }()
	inventory := func() *v1alpha1.SourceInventory {
		obj, err := vsphere.FindVM(ctx, sess, v1alpha1.VMSelector{Name: "web-01"})
		require.NoError(t, err)
		inv, err := vsphere.Inventory(ctx, sess, obj)
		require.NoError(t, err)
		return inv
	}

	steps := []struct {
		command string
		output  string // what it prints, in part
		check   func(t *testing.T, inv *v1alpha1.SourceInventory)
	}{
		{command: `govc ls /DC0/vm`, output: "/DC0/vm/web-01"},
		{command: `govc device.info -vm web-01 ethernet-0`, output: "MAC Address:      " + specs[0].NICs[0].MAC},
		{command: `govc vm.network.change -vm web-01 -net "VM Network" -net.address 00:50:56:3f:00:01 ethernet-0`,
			check: func(t *testing.T, inv *v1alpha1.SourceInventory) {
				assert.Equal(t, "00:50:56:3f:00:01", inv.NICs[0].MAC, "the first NIC's MAC")
				assert.Equal(t, "VM Network", inv.NICs[0].Network)
			}},
		{command: `govc object.collect -s /DC0/vm/web-01 guest.toolsRunningStatus`, output: "guestToolsNotRunning"},
		{command: `govc vm.change -vm web-01 -e SET.guest.toolsRunningStatus=guestToolsRunning`,
			check: func(t *testing.T, inv *v1alpha1.SourceInventory) {
				assert.Equal(t, "guestToolsRunning", inv.ToolsRunningStatus)
			}},
		{command: `govc vm.change -vm web-01 -e SET.guest.guestId=debian12_64Guest -e SET.guest.guestFullName="Debian GNU/Linux 12 (64-bit)"`,
			check: func(t *testing.T, inv *v1alpha1.SourceInventory) {
				assert.Equal(t, "debian12_64Guest", inv.DetectedGuestID)
				assert.Equal(t, "Debian GNU/Linux 12 (64-bit)", inv.DetectedGuestFullName)
			}},
		{command: `govc vm.change -vm web-01 -e SET.guest.ipAddress=192.0.2.10`,
			check: func(t *testing.T, inv *v1alpha1.SourceInventory) {
				assert.True(t, slices.ContainsFunc(inv.NICs, func(n v1alpha1.SourceNIC) bool {
					return n.Guest != nil && slices.ContainsFunc(n.Guest.IPAddresses, func(a v1alpha1.GuestIPAddress) bool { return a.IP == "192.0.2.10" })
				}), "a NIC with the address: %+v", inv.NICs)
			}},
		{command: `govc object.collect -json /DC0/vm/web-01 guest.net`, output: `"192.0.2.10"`},
		{command: `govc vm.power -off -force web-01`, check: func(t *testing.T, _ *v1alpha1.SourceInventory) {
			st, err := s.PowerState(ctx, "web-01")
			require.NoError(t, err)
			assert.Equal(t, "poweredOff", st)
		}},
		{command: `govc vm.power -on web-01`, check: func(t *testing.T, _ *v1alpha1.SourceInventory) {
			st, err := s.PowerState(ctx, "web-01")
			require.NoError(t, err)
			assert.Equal(t, "poweredOn", st)
		}},
	}
	for _, step := range steps {
		assert.True(t, strings.Contains(string(doc), "\n"+step.command+"\n"), "%s gives %q as it is run here", govcDoc, step.command)
		cmd := exec.CommandContext(ctx, "sh", "-c", step.command)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s: %s", step.command, out)
		assert.Contains(t, string(out), step.output, step.command)
		if step.check != nil {
			step.check(t, inventory())
		}
	}
}

// errText is the standard error an exec error carries.
func errText(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
