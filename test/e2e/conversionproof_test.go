//go:build e2e && conversion

package e2e

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/steps/pipeline"
	"platform.example/vm-migration/test/framework"
)

// projectConversionImage is the reference make conversion-image gives
// the project's conversion image by default.
const projectConversionImage = "platform.example/vm-migration-conversion:dev"

// TestConversionImageProof runs the image proof of the project's real
// conversion image (make conversion-image) on the node: a plan-only
// migration's proof pod, shaped as the conversion pods (uid 107, fsGroup,
// read-only root, no capabilities, RuntimeDefault seccomp, the conversion
// resources), runs the image's v2v-self-check; its JSON line is recorded
// in status and says what the image can do.
func TestConversionImageProof(t *testing.T) {
	tarball := framework.RepoPath("_output/conversion-image/vm-migration-conversion.tar")
	if _, err := os.Stat(tarball); err != nil {
		t.Skipf("no conversion image (make conversion-image builds %s): %v", tarball, err)
	}
	s := newStack(t, stackOptions{extraControllerArgs: []string{"--conversion-image=" + projectConversionImage}})
	start := time.Now()
	require.NoError(t, s.env.ImportImage(s.ctx, tarball), "importing %s", tarball)
	t.Logf("imported %s in %s", projectConversionImage, time.Since(start).Round(time.Second))
	const vm = "proof-real-01"
	s.addVM(vm, 161)
	mig := s.newMigration(vm, vm)
	mig.Spec.PlanOnly = true
	m := s.create(mig)
	m = s.waitPhase(m.Name, v1alpha1.PhasePlanned, 3*time.Minute)
	p := proofOf(m, v1alpha1.ComponentConversion)
	require.NotNil(t, p, describe(m))
	t.Logf("the conversion image's proof pod (%s, %s): %s", p.Image, p.Result, p.Output)
	assert.Equal(t, v1alpha1.ProofPassed, p.Result, "%s: %s", p.Reason, p.Message)
	r, err := pipeline.ParseConversionSelfCheck(p.Output)
	require.NoError(t, err)
	assert.True(t, r.OK)
	assert.Equal(t, "2.2.0", r.VirtV2V)
	require.NotNil(t, r.VirtioWin)
	assert.False(t, r.VirtioWin.Present, "Debian has no virtio-win")
	assert.Equal(t, "poweredOn", s.powerState(vm))
}
