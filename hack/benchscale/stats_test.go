package main

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAbove(t *testing.T) {
	bs := []bucket{{le: 0.01, count: 90}, {le: 0.02, count: 97}, {le: 0.1, count: 99}, {le: math.Inf(1), count: 100}}
	assert.Equal(t, 3.0, above(0.02, bs))
	assert.Equal(t, 1.0, above(0.1, bs))
	assert.True(t, math.IsNaN(above(0.05, bs)), "not a bound")
}

func TestPercentile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	assert.Equal(t, 5.0, percentile(0.5, xs), "p50: the 5th of 10")
	assert.Equal(t, 10.0, percentile(0.99, xs), "p99: the highest of 10")
	assert.Equal(t, 1.0, percentile(0, xs), "p0: the lowest")
	assert.Equal(t, []float64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}, xs, "the samples are left in their order")
	assert.True(t, math.IsNaN(percentile(0.5, nil)), "no samples")
}

func TestSummedBuckets(t *testing.T) {
	m, err := parseMetrics(strings.NewReader(`# TYPE vm_migration_validation_wait_seconds histogram
vm_migration_validation_wait_seconds_bucket{outcome="Queued",le="1"} 1
vm_migration_validation_wait_seconds_bucket{outcome="Queued",le="10"} 3
vm_migration_validation_wait_seconds_bucket{outcome="Queued",le="+Inf"} 4
vm_migration_validation_wait_seconds_bucket{outcome="Failed",le="1"} 0
vm_migration_validation_wait_seconds_bucket{outcome="Failed",le="10"} 2
vm_migration_validation_wait_seconds_bucket{outcome="Failed",le="+Inf"} 2
vm_migration_validation_wait_seconds_sum 40
vm_migration_validation_wait_seconds_bucket_other{le="1"} 100
`))
	require.NoError(t, err, "parsing")
	assert.Equal(t, []bucket{{le: 1, count: 1}, {le: 10, count: 5}, {le: math.Inf(1), count: 6}}, m.summedBuckets(validationWaitHistogram),
		"the buckets summed over the outcomes")
}
