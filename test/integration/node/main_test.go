//go:build integration

package node

import (
	"testing"

	"platform.example/vm-migration/test/framework"
)

func TestMain(m *testing.M) {
	framework.Run(m, framework.WithNode())
}
