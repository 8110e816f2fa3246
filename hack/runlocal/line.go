package main

import (
	"fmt"
	"strings"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// Line is what hack/run-local.sh prints of the example migration each
// time it changes, as four tab-separated fields: the phase, the overall
// progress, each disk's bytes transferred of its capacity (0 before the
// transfer reported on it), with its import's phase and progress once
// known, and the last error on one line. A field with nothing in it
// reads "-", as kubectl vmm's empty cells do (and a shell's read, which
// folds consecutive tabs, keeps the fields apart).
func Line(m *v1alpha1.VirtualMachineMigration) string {
	st := &m.Status
	var disks []string
	for _, d := range st.Disks {
		disk := fmt.Sprintf("%s=%d/%d", d.Name, d.BytesTransferred, d.CapacityBytes)
		for _, s := range []string{d.ImportPhase, d.ImportProgress} {
			if s = oneLine(s); s != "" {
				disk += " " + s
			}
		}
		disks = append(disks, disk)
	}
	last := ""
	if st.LastError != nil {
		last = st.LastError.Message
	}
	fields := []string{string(st.Phase), st.Progress, strings.Join(disks, ", "), last}
	for i, f := range fields {
		if fields[i] = oneLine(f); fields[i] == "" {
			fields[i] = "-"
		}
	}
	return strings.Join(fields, "\t")
}

// oneLine folds a status string's whitespace (tabs and line breaks too)
// into single spaces: one field of one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
