//go:build integration

package cdi

import (
	"os"
	"testing"

	"platform.example/vm-migration/test/framework"
	"platform.example/vm-migration/test/framework/cdi"
)

// TestMain starts a control plane and a real node only when the CDI
// images were built (CDI_IMAGES_DIR): make test-integration runs this
// package too, and its tests then skip without starting anything.
func TestMain(m *testing.M) {
	if os.Getenv(cdi.EnvImagesDir) == "" {
		os.Exit(m.Run())
	}
	framework.Run(m, framework.WithNode())
}
