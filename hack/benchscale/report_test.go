package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestValidationLine(t *testing.T) {
	var buf bytes.Buffer
	validationFigures{p50: 12.25, p99: 98, seen: 990, still: 10, ctrlP50: 12.5, ctrlP99: 110, ctrlCount: 990}.print(&buf)
	assert.Equal(t, "time from apply to leaving Validating: p50 12.2 s, p99 98.0 s over 990 migrations (the benchmark's watch; 10 never left it); the controller's vm_migration_validation_wait_seconds: p50 12.5 s, p99 110.0 s over 990\n", buf.String())
}
