package preflight

import (
	"fmt"

	"platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// Reasons of the findings of what the cluster said before the source was
// touched: the dry run of the migration's objects, the image proofs and
// the namespace's admission of KubeVirt's launcher pods.
const (
	// ReasonDryRunRefused: the API server refused the dry run of an object
	// the migration creates (validation, quota, LimitRange, PodSecurity,
	// a webhook); the finding quotes it.
	ReasonDryRunRefused = "DryRunRefused"
	// ReasonDryRunWarning: the API server accepted the dry run of an
	// object with warnings (for a Job: PodSecurity would refuse its pods).
	ReasonDryRunWarning = "DryRunWarning"
	// ReasonTransferImageNotRunnable: the transfer image's proof pod was
	// refused, did not start or failed its self-check.
	ReasonTransferImageNotRunnable = "TransferImageNotRunnable"
	// ReasonConversionImageNotRunnable: likewise for the conversion image.
	ReasonConversionImageNotRunnable = "ConversionImageNotRunnable"
	// ReasonLauncherSeccompMissing: the namespace enforces PodSecurity
	// restricted and KubeVirt gives its launcher pods no seccomp profile,
	// so the VM's launcher pod would be refused.
	ReasonLauncherSeccompMissing = "LauncherSeccompMissing"
)

// PodSecurityRestricted is the PodSecurity level whose enforcement needs
// a seccomp profile on every pod.
const PodSecurityRestricted = "restricted"

// LauncherFacts is what the cluster says of the pods KubeVirt will start
// for the migrated VM (virt-launcher) in the target namespace.
type LauncherFacts struct {
	// NamespaceEnforce is the PodSecurity level the namespace enforces
	// (its pod-security.kubernetes.io/enforce label), "" when none.
	NamespaceEnforce string
	// KubeVirt names the KubeVirt resource read (namespace/name); "" when
	// none could be read, and then nothing is said of the launcher.
	KubeVirt string
	// LauncherSeccomp says that resource gives virt-launcher a seccomp
	// profile (spec.configuration.seccompConfiguration).
	LauncherSeccomp bool
}

// dryRun turns the dry run's refusals into blocking findings and its
// warnings into warnings, each naming the object and quoting the API server.
func (c *checker) dryRun() {
	dr := c.cluster.DryRun
	if dr == nil {
		return
	}
	for _, o := range dr.Objects {
		switch o.Outcome {
		case v1alpha1.DryRunRefused:
			c.add(blocking(ReasonDryRunRefused, fmt.Sprintf("the API server refused the dry run of %s %s, which the migration creates: %s",
				o.Kind, o.Name, o.Message)))
		case v1alpha1.DryRunWarned:
			c.add(warning(ReasonDryRunWarning, fmt.Sprintf("the API server accepted the dry run of %s %s with warnings: %s", o.Kind, o.Name, o.Message)))
		}
	}
}

// DryRunFindings are the findings of a dry run alone (the one made again
// right before the stop).
func DryRunFindings(dr *v1alpha1.DryRunStatus) []v1alpha1.PreflightFinding {
	c := &checker{cluster: ClusterFacts{DryRun: dr}}
	c.dryRun()
	return c.findings
}

// imageProofs blocks on every failed proof of an image the migration runs.
func (c *checker) imageProofs() {
	for _, p := range c.cluster.Proofs {
		if p.Result != v1alpha1.ProofFailed {
			continue
		}
		reason := ReasonTransferImageNotRunnable
		if p.Component == v1alpha1.ComponentConversion {
			if c.spec.Conversion.Skip {
				continue
			}
			reason = ReasonConversionImageNotRunnable
		}
		c.add(blocking(reason, fmt.Sprintf("the %s image %s did not run in this namespace (proof job %s, with the %s pods' pull secrets, security context and placement): %s: %s",
			p.Component, p.Image, p.JobName, p.Component, p.Reason, p.Message)))
	}
}

// launcherSeccomp blocks where KubeVirt's launcher pod would be refused
// by the namespace's PodSecurity enforcement.
func (c *checker) launcherSeccomp() {
	l := c.cluster.Launcher
	if l.KubeVirt == "" || l.NamespaceEnforce != PodSecurityRestricted || l.LauncherSeccomp {
		return
	}
	c.add(blocking(ReasonLauncherSeccompMissing, fmt.Sprintf(
		"this namespace enforces PodSecurity %q, which refuses pods without a seccomp profile, and KubeVirt (%s) gives its virt-launcher pods none: "+
			"the migrated VM could not start here. Set spec.configuration.seccompConfiguration.virtualMachineInstanceProfile.customProfile "+
			"(runtimeDefaultProfile: true, or a localhostProfile) in KubeVirt %s, or migrate into a namespace that enforces baseline",
		l.NamespaceEnforce, l.KubeVirt, l.KubeVirt)))
}

// proofOf is the proof of a component's image, nil when none is known.
func (c *checker) proofOf(component string) *v1alpha1.ImageProof {
	for i := range c.cluster.Proofs {
		if c.cluster.Proofs[i].Component == component {
			return &c.cluster.Proofs[i]
		}
	}
	return nil
}

// ImageRefused says why the blocking findings forbid running component's
// image at all ("" when none does): an image that is not allowed, or
// none known. Its proof is then not made: a validation that goes on to
// report every finding runs only the images the migration may run.
func ImageRefused(findings []v1alpha1.PreflightFinding, component string) string {
	if component != v1alpha1.ComponentConversion {
		return ""
	}
	for _, f := range findings {
		if f.Severity == v1alpha1.SeverityBlocking && (f.Reason == ReasonConversionImageNotAllowed || f.Reason == ReasonNoConversionImage) {
			return f.Reason + ": " + f.Message
		}
	}
	return ""
}
