//go:build e2e

package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// platformUID is a uid as OpenShift's restricted-v2 SCC assigns one: the
// first of a namespace's range, also its fsGroup.
const platformUID = "1000680000"

// TestPodsRunAsThePlatformsUID: the transfer, conversion and proof pods
// run as an arbitrary uid with that id as fsGroup, the way OpenShift's
// restricted-v2 assigns one to every pod of a namespace (there, with
// --pod-run-as-user=none and the others, the SCC sets them; here the flags
// set the same ids, as no admission of this cluster assigns any): nothing
// depends on uid 107, the conversion rewrites the images the transfer
// wrote, and the migration succeeds with the disks' bytes intact.
func TestPodsRunAsThePlatformsUID(t *testing.T) {
	s := newStack(t, stackOptions{extraControllerArgs: []string{
		"--pod-run-as-user=" + platformUID, "--pod-run-as-group=" + platformUID, "--pod-fs-group=" + platformUID}})
	const vm = "uid-01"
	src := s.addVM(vm, 171)
	pods := s.recordPods()
	m := s.create(s.newMigration(vm, vm))
	m = s.waitPhase(m.Name, v1alpha1.PhaseSucceeded, 3*time.Minute)
	s.verifyTargetDisks(m, src)
	// Both proofs, the transfer and the conversion: no verification pod,
	// the disks were written in place and hashed by the conversion.
	seen := pods.waitEnded(s, string(m.UID), 4)
	require.Len(t, seen, 4, "both proofs, the transfer and the conversion")
	for _, p := range seen {
		assert.Equal(t, platformUID, p.uid, "pod %s (%s) ran as", p.name, p.kind)
		assert.Equal(t, platformUID, p.fsGroup, "pod %s (%s) fsGroup", p.name, p.kind)
	}
}
