package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// TestLineOfADiskNotReportedYet: run-local's progress line shows a disk
// the transfer has not reported on yet as 0 bytes of its capacity (issue
// 50 item 7: its first line read "disk-0=/8388608", the bytes left
// blank), a field with nothing in it as "-", and no separator after the
// last disk.
func TestLineOfADiskNotReportedYet(t *testing.T) {
	m := &v1alpha1.VirtualMachineMigration{}
	m.Status.Phase, m.Status.Progress = v1alpha1.PhaseTransferringDisks, "0%"
	m.Status.Disks = []v1alpha1.DiskStatus{{Key: 2000, Name: "disk-0", CapacityBytes: 8 << 20}, {Key: 2001, Name: "disk-1", CapacityBytes: 4 << 20}}
	cases := map[string]struct {
		mod  func(*v1alpha1.VirtualMachineMigration)
		want []string
	}{
		"no report yet": {
			want: []string{"TransferringDisks", "0%", "disk-0=0/8388608, disk-1=0/4194304", "-"},
		},
		"a report": {
			mod: func(m *v1alpha1.VirtualMachineMigration) {
				m.Status.Progress, m.Status.Disks[0].BytesTransferred = "8%", 2<<20
			},
			want: []string{"TransferringDisks", "8%", "disk-0=2097152/8388608, disk-1=0/4194304", "-"},
		},
		"importing": {
			mod: func(m *v1alpha1.VirtualMachineMigration) {
				m.Status.Phase, m.Status.Progress = v1alpha1.PhaseImporting, "87%"
				for i := range m.Status.Disks {
					d := &m.Status.Disks[i]
					d.BytesTransferred, d.ImportPhase = d.CapacityBytes, "ImportInProgress"
				}
				m.Status.Disks[0].ImportProgress = "45.00%"
			},
			want: []string{"Importing", "87%", "disk-0=8388608/8388608 ImportInProgress 45.00%, disk-1=4194304/4194304 ImportInProgress", "-"},
		},
		"not looked at yet": {
			mod: func(m *v1alpha1.VirtualMachineMigration) {
				m.Status = v1alpha1.VirtualMachineMigrationStatus{}
			},
			want: []string{"-", "-", "-", "-"},
		},
		"failed": {
			mod: func(m *v1alpha1.VirtualMachineMigration) {
				m.Status.Phase, m.Status.Progress = v1alpha1.PhaseFailed, ""
				m.Status.LastError = &v1alpha1.MigrationError{Message: "transfer job web-01-transfer-1 failed:\nBackoffLimitExceeded"}
			},
			want: []string{"Failed", "-", "disk-0=0/8388608, disk-1=0/4194304", "transfer job web-01-transfer-1 failed: BackoffLimitExceeded"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := m.DeepCopy()
			if tc.mod != nil {
				tc.mod(m)
			}
			assert.Equal(t, tc.want, strings.Split(Line(m), "\t"))
		})
	}
}
