package main

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestAbove(t *testing.T) {
	bs := []bucket{{le: 0.01, count: 90}, {le: 0.02, count: 97}, {le: 0.1, count: 99}, {le: math.Inf(1), count: 100}}
	assert.Equal(t, 3.0, above(0.02, bs))
	assert.Equal(t, 1.0, above(0.1, bs))
	assert.True(t, math.IsNaN(above(0.05, bs)), "not a bound")
}
