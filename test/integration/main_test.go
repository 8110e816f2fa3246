//go:build integration

package integration

import (
	"testing"

	"platform.example/vm-migration/test/framework"
)

func TestMain(m *testing.M) {
	framework.Run(m, framework.WithCRDs(
		framework.RepoPath("manifests/crd"),
		framework.RepoPath("test/crds"),
	))
}
