package main

import (
	"flag"
	"fmt"
	"path"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"platform.example/vm-migration/pkg/controller"
	"platform.example/vm-migration/pkg/steps/pipeline"
)

// conversionFlags are what configures the conversion pods: their image,
// /dev/kvm, seccomp and resources.
type conversionFlags struct {
	seccompProfile                                   string
	cpuRequest, cpuLimit, memoryRequest, memoryLimit resource.Quantity
	applianceMemory                                  resource.Quantity
}

// applianceOverhead is what the conversion container needs besides the
// helper VM's memory (twice the appliance's): qemu's own, virt-v2v and
// nbdkit. The memory limit must leave at least this much.
var applianceOverhead = resource.MustParse("512Mi")

// quantityValue is a flag holding a resource quantity ("4Gi", "1500m").
type quantityValue struct{ q *resource.Quantity }

func (v quantityValue) String() string {
	if v.q == nil {
		return ""
	}
	return v.q.String()
}

func (v quantityValue) Set(s string) error {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return fmt.Errorf("%q is not a quantity (for example 4Gi or 1500m)", s)
	}
	*v.q = q
	return nil
}

// maxConversionsValue is --max-conversions: auto, or a number of
// conversion slots (0: no pacing by conversions).
type maxConversionsValue struct{ lim *controller.ConversionLimit }

func (v maxConversionsValue) String() string {
	if v.lim == nil {
		return ""
	}
	return v.lim.String()
}

func (v maxConversionsValue) Set(s string) error {
	if s == "auto" {
		*v.lim = controller.ConversionLimit{Auto: true}
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return fmt.Errorf("%q is neither auto nor a number of conversions (0: no pacing)", s)
	}
	*v.lim = controller.ConversionLimit{Max: n}
	return nil
}

// addConversionFlags registers the conversion flags, defaulting the
// resources to pipeline.DefaultConversionResources.
func (f *flags) addConversionFlags(fs *flag.FlagSet) {
	c := &f.conversion
	f.opts.Conversions = controller.ConversionLimit{Auto: true}
	fs.Var(maxConversionsValue{&f.opts.Conversions}, "max-conversions", "conversion slots: a source is stopped only with one free (taken with the transfer slot, held to the end of the conversion), and not while a conversion pod waits Unschedulable for lack of resources; "+
		"auto: as many as the allocatable resources of the schedulable nodes hold conversion pods (reads the nodes); a number: that many; 0: conversions do not pace the stops")
	fs.StringVar(&f.opts.Pipeline.ConversionImage, "conversion-image", "", "default virt-v2v image of the conversion Jobs, for migrations without spec.conversion.image (make conversion-image builds the project's)")
	fs.Func("allowed-conversion-images", "comma-separated patterns (path.Match, e.g. registry.example.com/v2v/*) a migration's own spec.conversion.image must match; the default image is always allowed, no other without this flag",
		f.addAllowedConversionImages)
	fs.BoolVar(&f.opts.Pipeline.ConversionKVM, "conversion-kvm", false, "request /dev/kvm from KubeVirt's device plugin (devices.kubevirt.io/kvm) for the conversion pods; the conversion uses KVM only if libguestfs' appliance boots under it, else TCG")
	fs.StringVar(&f.opts.Pipeline.ConversionRuntimeClass, "conversion-runtime-class", "", "RuntimeClass of the conversion pods, one that offers /dev/kvm (empty: the cluster's default, and TCG); the conversion uses KVM only if libguestfs' appliance boots under it")
	fs.StringVar(&c.seccompProfile, "conversion-seccomp-profile", "", "seccomp profile of the conversion pods: a Localhost profile (localhost/<path> or <path>) for images whose libguestfs runs passt, RuntimeDefault, or Unconfined (which PodSecurity restricted refuses) (empty: RuntimeDefault)")
	def := pipeline.DefaultConversionResources()
	c.cpuRequest, c.cpuLimit = def.Requests[corev1.ResourceCPU], def.Limits[corev1.ResourceCPU]
	c.memoryRequest, c.memoryLimit = def.Requests[corev1.ResourceMemory], def.Limits[corev1.ResourceMemory]
	c.applianceMemory = *resource.NewQuantity(pipeline.DefaultConversionApplianceMiB<<20, resource.BinarySI)
	fs.Var(quantityValue{&c.cpuRequest}, "conversion-cpu-request", "CPU request of the conversion pods")
	fs.Var(quantityValue{&c.cpuLimit}, "conversion-cpu-limit", "CPU limit of the conversion pods (0: none); the helper VM runs two vCPUs")
	fs.Var(quantityValue{&c.memoryRequest}, "conversion-memory-request", "memory request of the conversion pods")
	fs.Var(quantityValue{&c.memoryLimit}, "conversion-memory-limit", "memory limit of the conversion pods: at least twice --conversion-appliance-memory plus "+applianceOverhead.String())
	fs.Var(quantityValue{&c.applianceMemory}, "conversion-appliance-memory", "libguestfs' appliance memory (LIBGUESTFS_MEMSIZE, whole MiB); virt-v2v runs its helper VM with twice that")
}

// addAllowedConversionImages adds comma-separated image patterns.
func (f *flags) addAllowedConversionImages(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			if _, err := path.Match(p, ""); err != nil {
				return fmt.Errorf("pattern %q: %w", p, err)
			}
			f.opts.AllowedConversionImages = append(f.opts.AllowedConversionImages, p)
		}
	}
	return nil
}

// completeConversion checks the conversion flags together and sets the
// pipeline's conversion configuration from them.
func (f *flags) completeConversion() error {
	c := &f.conversion
	mib := c.applianceMemory.Value() >> 20
	if mib < 256 || c.applianceMemory.Value() != mib<<20 {
		return fmt.Errorf("--conversion-appliance-memory must be whole MiB and at least 256Mi, got %s", c.applianceMemory.String())
	}
	need := c.applianceMemory.DeepCopy()
	need.Add(c.applianceMemory)
	need.Add(applianceOverhead)
	switch {
	case c.memoryLimit.Cmp(need) < 0:
		return fmt.Errorf("--conversion-memory-limit %s cannot hold the helper VM: virt-v2v gives it twice --conversion-appliance-memory (%s), and qemu, virt-v2v and nbdkit need %s more; set it to at least %s",
			c.memoryLimit.String(), c.applianceMemory.String(), applianceOverhead.String(), need.String())
	case c.memoryRequest.Cmp(c.memoryLimit) > 0:
		return fmt.Errorf("--conversion-memory-request %s is above --conversion-memory-limit %s", c.memoryRequest.String(), c.memoryLimit.String())
	case !c.cpuLimit.IsZero() && c.cpuRequest.Cmp(c.cpuLimit) > 0:
		return fmt.Errorf("--conversion-cpu-request %s is above --conversion-cpu-limit %s", c.cpuRequest.String(), c.cpuLimit.String())
	case c.cpuRequest.Sign() <= 0 || c.memoryRequest.Sign() <= 0 || c.cpuLimit.Sign() < 0:
		return fmt.Errorf("the conversion's CPU and memory requests must be positive (and its CPU limit not negative)")
	}
	res := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: c.cpuRequest, corev1.ResourceMemory: c.memoryRequest},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: c.memoryLimit},
	}
	if !c.cpuLimit.IsZero() {
		res.Limits[corev1.ResourceCPU] = c.cpuLimit
	}
	f.opts.Pipeline.ConversionResources = &res
	f.opts.Pipeline.ConversionApplianceMiB = mib
	f.opts.Pipeline.ConversionSeccompProfile = seccompProfile(c.seccompProfile)
	return nil
}
