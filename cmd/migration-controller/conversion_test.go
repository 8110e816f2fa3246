package main

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"platform.example/vm-migration/pkg/controller"
	"platform.example/vm-migration/pkg/steps/pipeline"
)

// TestConversionFlags: the conversion pods' resources, appliance memory,
// RuntimeClass and seccomp profile come from the flags, with defaults that
// hold the 2.5 GiB helper VM, and contradictions are refused in one line.
func TestConversionFlags(t *testing.T) {
	cases := map[string]struct {
		args      []string
		wantErr   string
		want      corev1.ResourceRequirements
		wantMiB   int64
		wantClass string
	}{
		"defaults": {want: pipeline.DefaultConversionResources(), wantMiB: pipeline.DefaultConversionApplianceMiB},
		"set": {
			args: []string{"--conversion-cpu-request=2", "--conversion-cpu-limit=0", "--conversion-memory-request=5Gi",
				"--conversion-memory-limit=6Gi", "--conversion-appliance-memory=2Gi", "--conversion-runtime-class=kvm"},
			want: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("5Gi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("6Gi")},
			},
			wantMiB: 2048, wantClass: "kvm",
		},
		"limit below the helper VM": {
			args:    []string{"--conversion-appliance-memory=2Gi"},
			wantErr: "--conversion-memory-limit 4Gi cannot hold the helper VM",
		},
		"request above the limit": {args: []string{"--conversion-memory-request=5Gi"}, wantErr: "--conversion-memory-request 5Gi is above --conversion-memory-limit 4Gi"},
		"cpu request above limit": {args: []string{"--conversion-cpu-request=8"}, wantErr: "--conversion-cpu-request 8 is above --conversion-cpu-limit 4"},
		"appliance not in MiB":    {args: []string{"--conversion-appliance-memory=1.5G"}, wantErr: "whole MiB"},
		"appliance too small":     {args: []string{"--conversion-appliance-memory=128Mi"}, wantErr: "at least 256Mi"},
		"not a quantity":          {args: []string{"--conversion-memory-limit=lots"}, wantErr: `"lots" is not a quantity`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f, err := parseFlags(tc.args)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr, "parsing %v", tc.args)
				return
			}
			require.NoError(t, err, "parsing %v", tc.args)
			p := f.opts.Pipeline
			require.NotNil(t, p.ConversionResources, "the conversion resources")
			assert.True(t, equalResources(tc.want, *p.ConversionResources), "conversion resources %v, want %v", *p.ConversionResources, tc.want)
			assert.Equal(t, tc.wantMiB, p.ConversionApplianceMiB, "appliance memory in MiB")
			assert.Equal(t, tc.wantClass, p.ConversionRuntimeClass, "conversion runtime class")
		})
	}
}

func equalResources(a, b corev1.ResourceRequirements) bool {
	same := func(x, y corev1.ResourceList) bool {
		if len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if w, ok := y[k]; !ok || v.Cmp(w) != 0 {
				return false
			}
		}
		return true
	}
	return same(a.Requests, b.Requests) && same(a.Limits, b.Limits)
}

// TestConversionSeccompFlag: a Localhost profile replaces RuntimeDefault
// only when named.
func TestConversionSeccompFlag(t *testing.T) {
	f, err := parseFlags(nil)
	require.NoError(t, err, "parsing no flags")
	assert.Nil(t, f.opts.Pipeline.ConversionSeccompProfile, "seccomp profile without the flag")
	f, err = parseFlags([]string{"--conversion-seccomp-profile=profiles/virt-v2v.json"})
	require.NoError(t, err, "parsing --conversion-seccomp-profile")
	require.NotNil(t, f.opts.Pipeline.ConversionSeccompProfile, "seccomp profile with the flag")
	assert.Equal(t, corev1.SeccompProfileTypeLocalhost, f.opts.Pipeline.ConversionSeccompProfile.Type, "seccomp profile type")
	assert.Equal(t, "profiles/virt-v2v.json", *f.opts.Pipeline.ConversionSeccompProfile.LocalhostProfile, "seccomp profile")
}

// TestShippedDeploymentConverts: the Deployment in manifests/base parses
// as the controller's flags and names the conversion image the project
// builds (make conversion-image), so that a default install converts.
func TestShippedDeploymentConverts(t *testing.T) {
	data, err := os.ReadFile("../../manifests/base/deployment.yaml")
	require.NoError(t, err, "reading the shipped Deployment")
	var d appsv1.Deployment
	require.NoError(t, yaml.UnmarshalStrict(data, &d), "decoding the shipped Deployment")
	var args []string
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "controller" {
			args = c.Args
		}
	}
	require.NotEmpty(t, args, "the controller container's args")
	f, err := parseFlags(args)
	require.NoError(t, err, "the shipped args %v", args)
	assert.Equal(t, "platform.example/vm-migration-conversion:dev", f.opts.Pipeline.ConversionImage,
		"--conversion-image, want the image make conversion-image builds")
}

// TestMaxConversionsFlag: conversion slots sized from the nodes by
// default, a number, or none (0); anything else is refused in one line.
func TestMaxConversionsFlag(t *testing.T) {
	for args, want := range map[string]controller.ConversionLimit{
		"":                       {Auto: true},
		"--max-conversions=auto": {Auto: true},
		"--max-conversions=3":    {Max: 3},
		"--max-conversions=0":    {},
	} {
		f, err := parseFlags(strings.Fields(args))
		require.NoError(t, err, args)
		assert.Equal(t, want, f.opts.Conversions, args)
	}
	for _, bad := range []string{"--max-conversions=-1", "--max-conversions=many"} {
		_, err := parseFlags([]string{bad})
		assert.ErrorContains(t, err, "is neither auto nor a number of conversions", bad)
	}
}
