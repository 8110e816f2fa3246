package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// virt-controller v1.8.2's command line of virt-launcher-monitor
// (pkg/virt-controller/services/template.go), as a launcher pod has it.
var kubevirtArgs = []string{
	"--qemu-timeout", "271s", "--name", "web-01", "--uid", "6ade07e9-c4d1-5122-a76d-7e0a6ad56523", "--namespace", "migrations",
	"--kubevirt-share-dir", "/var/run/kubevirt", "--ephemeral-disk-dir", "/var/run/kubevirt-ephemeral-disks",
	"--container-disk-dir", "/var/run/kubevirt/container-disks", "--grace-period-seconds", "45", "--hook-sidecars", "0",
	"--ovmf-path", "/usr/share/OVMF", "--disk-memory-limit", "2097152000", "--hypervisor", "kvm", "--run-as-nonroot",
}

func TestMonitorOptionsTakeKubeVirtsCommandLine(t *testing.T) {
	o, uid, err := monitorOptions(kubevirtArgs)
	require.NoError(t, err)
	assert.Equal(t, "6ade07e9-c4d1-5122-a76d-7e0a6ad56523", uid)
	assert.Equal(t, 45*time.Second, o.ShutdownTimeout, "the instance's grace period")

	o, uid, err = monitorOptions([]string{"--run-as-nonroot", "--uid=u-1", "--grace-period-seconds=0"})
	require.NoError(t, err)
	assert.Equal(t, "u-1", uid)
	assert.Zero(t, o.ShutdownTimeout)

	_, _, err = monitorOptions([]string{"--name", "web-01"})
	assert.ErrorContains(t, err, "no --uid")
	_, _, err = monitorOptions([]string{"--uid", "u", "--grace-period-seconds", "soon"})
	assert.ErrorContains(t, err, `--grace-period-seconds "soon"`)
}
