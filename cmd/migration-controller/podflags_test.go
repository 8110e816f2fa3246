package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/steps/pipeline"
)

// TestPodFlags: the dry run and the proofs are on by default; pull
// secrets, the pod start timeout and the pods' ids come from the flags,
// and "none" leaves an id to the platform (OpenShift).
func TestPodFlags(t *testing.T) {
	f, err := parseFlags(nil)
	require.NoError(t, err)
	p := f.opts.Pipeline
	assert.True(t, p.DryRun, "the dry run is on by default")
	assert.True(t, p.ImageProofs, "the image proofs are on by default")
	assert.True(t, p.ClusterFacts)
	assert.Nil(t, p.PodIdentity, "the default identity (107)")
	assert.Equal(t, statemachine.DefaultPodStartTimeout, f.opts.Decisions.PodStartTimeout)

	f, err = parseFlags([]string{"--image-pull-secret=a,b", "--image-pull-secret=c", "--pod-start-timeout=30s",
		"--pod-run-as-user=none", "--pod-run-as-group=none", "--pod-fs-group=none", "--dry-run-before-stop=false",
		"--conversion-seccomp-profile=Unconfined"})
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b", "c"}, f.opts.Pipeline.ImagePullSecrets)
	assert.Equal(t, 30*time.Second, f.opts.Decisions.PodStartTimeout)
	assert.Equal(t, &pipeline.PodIdentity{}, f.opts.Pipeline.PodIdentity, "every id left to the platform")
	assert.False(t, f.opts.Pipeline.DryRun)
	assert.Equal(t, &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}, f.opts.Pipeline.ConversionSeccompProfile)

	f, err = parseFlags([]string{"--pod-run-as-user=1000680000"})
	require.NoError(t, err)
	assert.Equal(t, &pipeline.PodIdentity{RunAsUser: ptr.To[int64](1000680000), RunAsGroup: ptr.To[int64](107), FSGroup: ptr.To[int64](107)}, f.opts.Pipeline.PodIdentity)

	for args, want := range map[string]string{
		"--pod-run-as-user=root":       `"root" is not a numeric id or none`,
		"--image-pull-secret=Bad_Name": `"Bad_Name" is not a Secret name`,
		"--pod-start-timeout=1s":       "--pod-start-timeout must be at least 10s",
	} {
		_, err := parseFlags([]string{args})
		assert.ErrorContains(t, err, want, args)
	}
	assert.Equal(t, &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("profiles/v2v.json")}, seccompProfile("localhost/profiles/v2v.json"))
}
