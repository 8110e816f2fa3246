package pipeline

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/transfer/wire"
	"platform.example/vm-migration/pkg/untrusted"
)

// nastySeeds are what no guest, image or peer should send, and any may:
// empty, huge, not UTF-8, control and escape bytes, CJK, a bidi
// override, the C1 CSI.
var nastySeeds = []string{
	"", "\n", "\r\n", "\x00", "\xff\xfe", "\x1b[2J\x1b]0;owned\x07", "漢字サーバー", "\u202eevil", "\u009b2J", "\x9b2J", "\u2028",
	"{", "{}", "<", "<v2v-inspection", strings.Repeat("x", 5000), strings.Repeat("\xff", 300), strings.Repeat("é", 200),
}

// checkText: s is at most max bytes of text status can keep as it is (no
// control or format characters, valid UTF-8).
func checkText(t *testing.T, what, s string, max int) {
	t.Helper()
	if err := untrusted.Text(s, max); err != nil {
		t.Fatalf("%s %q: %v", what, s, err)
	}
}

// FuzzNICLines reads the guest network script's "nic" lines and the
// checksum lines of a conversion's termination message (whatever their
// form): each pin has a canonical MAC, a name an interface can have, a
// source and addresses (canonical, bounded) the script prints, and a
// message of text within its bound; a line that is not what the script
// prints reads as a guest that could not be read, saying so; each
// checksum is a lower-case SHA-256 of a size at least 0; no more pins
// than the status keeps; the rest is lines of the message, no nic line.
func FuzzNICLines(f *testing.F) {
	sum := strings.Repeat("ab", 32)
	for _, s := range []string{
		"nic 00:50:56:AA:BB:01 ens192 address pinned 192.168.10.21,fd00::21",
		"nic 00:50:56:aa:bb:02 - - - - no network configuration in the guest names this NIC",
		"nic 00:50:56:aa:bb:01 ens192 slot found -",
		"nic not-a-mac ens1 address pinned -",
		"nic 00:50:56:aa:bb:01 - - unreadable - guestfish could not look into the guest: libguestfs: error: /dev/sda: No such file",
		"nic 00:50:56:aa:bb:01 eth0\x1b]0;owned\x07 address pinned 192.168.10.21",
		"nic 00:50:56:aa:bb:01 ../../etc/x address pinned 192.168.10.21",
		"nic 00:50:56:aa:bb:01 averyveryverylongname address pinned -",
		"nic 00:50:56:aa:bb:01 ens192 address pinned 2001:db8::21%ens192",
		"nic 00:50:56:aa:bb:01 ens192 address pinned 192.168.10.21;reboot",
		"nic 00:50:56:aa:bb:01 ens192 address pinned 2001:DB8::21",
		"nic 00:50:56:aa:bb:01 ens192 registry owned -",
		"nic 00:50:56:aa:bb:01 - - - - no network configuration\x1b[2J names this NIC",
		"nic 00:50:56:aa:bb:01 ens192 address pinned " + strings.Repeat("10.0.0.1,", 40),
		"nic 00-50-56-aa-bb-01 ens192 address pinned -",
		"nic 02:00:5e:10:00:00:00:01 ib0 address pinned -",
		"sha256 disk-0 1610612736 " + sum,
		"tree disk-0 1610612736 " + sum + " 1048576",
		"tree disk-0 1610612736 " + sum + " 1610612737",
		"sha256 disk-1 42 " + strings.ToUpper(sum),
		"sha256 disk-2 -1 " + sum,
		"sha256 disk-2 1610612736 " + sum[:40],
		strings.Repeat("nic 00:50:56:aa:bb:01 ens192 address pinned -\n", 70),
	} {
		f.Add(s)
	}
	for _, s := range nastySeeds {
		f.Add("nic 00:50:56:aa:bb:01 " + s + " address pinned " + s + " " + s)
	}
	sources := []string{"", v1alpha1.PinSourceAddress, v1alpha1.PinSourcePCISlot}
	f.Fuzz(func(t *testing.T, msg string) {
		rest, sums, pins := cutConversionChain(msg)
		lines := strings.Split(msg, "\n")
		for line := range strings.SplitSeq(rest, "\n") {
			if strings.HasPrefix(line, "nic ") || (rest != "" && !slices.Contains(lines, line)) {
				t.Fatalf("line %q was left in the rest", line)
			}
		}
		for _, c := range sums {
			if !isSHA256(c.SHA256) || c.Bytes < 0 || c.Size != c.Bytes || c.Disk == "" || strings.ContainsFunc(c.Disk, func(r rune) bool { return r == ' ' || r == '\n' }) {
				t.Fatalf("checksum %+v read from %q", c, msg)
			}
		}
		if len(pins) > maxPinnedInterfaces {
			t.Fatalf("%d pins, more than %d", len(pins), maxPinnedInterfaces)
		}
		for _, p := range pins {
			if mac, ok := canonicalMAC(p.MAC); !ok || mac != p.MAC {
				t.Fatalf("pin %+v: the MAC is not canonical", p)
			}
			checkText(t, "a pin's message", p.Message, maxPinMessage)
			if p.Name != "" {
				if err := untrusted.InterfaceName(p.Name); err != nil {
					t.Fatalf("pin %+v: interface name: %v", p, err)
				}
			}
			if !slices.Contains(sources, p.Source) || len(p.StaticAddresses) > maxPinAddresses {
				t.Fatalf("pin %+v from %q", p, msg)
			}
			for _, a := range p.StaticAddresses {
				if ip, err := untrusted.Addr(a); err != nil || ip.String() != a {
					t.Fatalf("pin %+v: address %q is not canonical (%v)", p, a, err)
				}
			}
		}
	})
}

// conversionJob is a conversion Job, succeeded or failed as asked, and a
// pod of it whose container ended with msg.
func conversionJob(component string, msg string, exitCode int32, failed bool) (*batchv1.Job, []corev1.Pod) {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "web-01-" + component + "-1", Namespace: "vms",
		Labels: map[string]string{v1alpha1.LabelComponent: component}, CreationTimestamp: metav1.NewTime(t0)}}
	cond := batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}
	if failed {
		cond = batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}
	}
	job.Status.Conditions = []batchv1.JobCondition{cond}
	container := TransferContainer
	if component == v1alpha1.ComponentConversion {
		container = ConversionContainer
	}
	job.Spec.Template.Spec.Containers = []corev1.Container{{Name: container, Image: "registry.example/" + component + ":v1"}}
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-x7k2p", CreationTimestamp: metav1.NewTime(t0)},
		Status: corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{Name: container,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exitCode, Reason: "Completed", Message: msg}}}}}}
	if exitCode != 0 {
		p.Status.Phase = corev1.PodFailed
	}
	return job, []corev1.Pod{p}
}

// FuzzConversionReport reads a conversion's termination message (the
// virt-v2v report: its inspection document or lines, its errors and
// warnings, the chain's lines) as ObserveJob does: the inspected OS and
// the warnings are text within their bounds, at most maxWarnings of
// them; a failure's message is one line of text within maxMessage and
// its reason one of the conversion's classes.
func FuzzConversionReport(f *testing.F) {
	grub := `{ "message": "could not determine a way to update the configuration of Grub2", "timestamp": "2026-11-30T09:32:48.055663251+00:00", "type": "warning" }`
	for _, s := range []string{
		inspectionRHEL,
		inspectionRHEL[:strings.Index(inspectionRHEL, "<product_name>")+20],
		`<v2v-inspection><operatingsystem><name>windows</name><distro>windows</distro><major_version>10</major_version><minor_version>0</minor_version><product_name>Windows Server 2019 Standard</product_name>`,
		"<v2v-inspection><operatingsystem><name>linux</name><distro>unknown</distro><product_name>unknown</product_name>",
		"<v2v-inspection><operatingsystem><product_name>\x1b]0;owned\x07\u202e</product_name></operatingsystem>",
		"i_distro = debian\ni_major_version = 12\ni_minor_version = 15\n" + warningsHeading + "\n" + grub + "\n",
		"i_distro = debian\n" + warningsHeading + "\n" + grub + "\n" + `{ "message": "the guest has no dis`,
		"i_distro = debian\n" + warningsHeading,
		"i_distro = debian\ni_product_name = Debian\x1b]0;owned\x07 GNU/Linux 12\n" + warningsHeading + "\n" +
			`{ "message": "could not update \u001b[2Jgrub\u202e", "timestamp": "2024-05-01T10:00:00Z", "type": "warning" }`,
		`{ "message": "inspection could not detect the source guest\u001b[2J", "type": "error" }`,
		"[   1.0] Setting up the source\nvirt-v2v-in-place: error: inspection could not detect the source guest (or \nphysical machine).\n\nNo root device found in this operating system image.\n",
		"virt-v2v-in-place: error: virt-v2v is unable to convert this guest type \n(linux/debian)\n",
		"libguestfs: error: appliance closed the connection unexpectedly\n",
		"sha256 disk-0 1610612736 " + strings.Repeat("ab", 32) + "\nnic 00:50:56:aa:bb:01 ens192 address pinned 192.168.10.21\n" + inspectionRHEL,
		warningsHeading + "\n" + strings.Repeat(grub+"\n", 12),
	} {
		f.Add(s, true)
		f.Add(s, false)
	}
	for _, s := range nastySeeds {
		f.Add(s, false)
		f.Add("i_product_name = "+s+"\n"+warningsHeading+"\n"+`{ "message": "`+s, true)
	}
	classes := []string{"", statemachine.ConversionInspectionFailed, statemachine.ConversionUnsupportedGuest}
	f.Fuzz(func(t *testing.T, msg string, failed bool) {
		var exit int32
		if failed {
			exit = 1
		}
		job, pods := conversionJob(v1alpha1.ComponentConversion, msg, exit, failed)
		o := ObserveJob(job, pods, nil)
		checkText(t, "the inspected OS", o.OperatingSystem, maxOSLength)
		if len(o.Warnings) > maxWarnings {
			t.Fatalf("%d warnings, more than %d", len(o.Warnings), maxWarnings)
		}
		for _, w := range o.Warnings {
			checkText(t, "a warning", w, maxWarningLength)
			if w == "" {
				t.Fatalf("an empty warning from %q", msg)
			}
		}
		checkText(t, "the message", o.Message, maxMessage)
		if !slices.Contains(classes, o.Reason) || (o.Reason != "" && !failed) {
			t.Fatalf("reason %q from %q", o.Reason, msg)
		}
		if os := InspectedOS([]byte(msg)); len(os) > 256 {
			t.Fatalf("InspectedOS(%q) = %q: %d bytes", msg, os, len(os))
		}
	})
}

// FuzzObserveTransfer reads the transfer's result wire (its termination
// message, else the result the ConfigMap keeps) and its progress wire
// (the ConfigMap's progress) as ObserveJob does: what a result names is
// what the observation keeps, each full-copy reason one line within
// maxReason; progress is read only while the Job runs; the message is
// within maxMessage.
func FuzzObserveTransfer(f *testing.F) {
	sum := strings.Repeat("ab", 32)
	alloc := int64(5 << 30)
	ok := wire.TerminationMessage(&wire.Result{Kind: wire.KindResult, Succeeded: true, Disks: []wire.DiskResult{
		{Key: 2000, Bytes: 20 << 30, SHA256: sum, AllocatedOnly: true, AllocatedBytes: &alloc, BytesRead: alloc},
		{Key: 2001, Bytes: 1 << 30, SHA256: sum, BytesRead: 1 << 30, FullCopyReason: "changed block tracking is off\non the VM" + strings.Repeat(" and more", 40)}}})
	fail := wire.TerminationMessage(&wire.Result{Kind: wire.KindResult, Reason: wire.ReasonNotAuthorized,
		Error: "vSphere refused the credentials:\n ServerFaultCode: Cannot complete login", Disks: []wire.DiskResult{{Key: 2000}}})
	progress, _ := json.Marshal(wire.Progress{Kind: wire.KindProgress, Time: t0, Disks: []wire.DiskProgress{
		{Key: 2000, State: wire.StateCopying, BytesDone: 5 << 30, TotalBytes: 20 << 30, RateBytesPerSecond: 100 << 20}}})
	f.Add(string(ok), "", "", uint8(0))
	f.Add(string(fail), "", "", uint8(1))
	f.Add("", string(ok), "", uint8(0))
	f.Add("", "", string(progress), uint8(2))
	f.Add("not json", string(fail), string(progress), uint8(1))
	f.Add(`{"kind":"result","reason":"Bad\nReason\u001b[2J","error":"`+strings.Repeat("é", 700)+`"}`, "", "", uint8(1))
	f.Add(`{"kind":"progress","disks":[{"key":2000,"bytesDone":-1,"totalBytes":-5}]}`, "", `{"kind":"result"}`, uint8(2))
	for _, s := range nastySeeds {
		f.Add(s, s, s, uint8(1))
	}
	f.Fuzz(func(t *testing.T, term, cmResult, cmProgress string, state uint8) {
		failed, running := state%3 == 1, state%3 == 2
		job, pods := conversionJob(v1alpha1.ComponentTransfer, term, int32(state%3), failed)
		if running {
			job.Status.Conditions = nil
			pods[0].Status.Phase = corev1.PodRunning
			pods[0].Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
		}
		o := ObserveJob(job, pods, map[string]string{wire.ConfigMapKeyResult: cmResult, wire.ConfigMapKeyProgress: cmProgress})
		if len(o.Message) > maxMessage {
			t.Fatalf("a message of %d bytes: %q", len(o.Message), o.Message)
		}
		if len(o.Progress) > 0 && (o.Succeeded || o.Failed) {
			t.Fatalf("progress %+v of a Job that ended", o.Progress)
		}
		res, err := wire.ParseResult([]byte(strings.TrimSpace(term)))
		if running {
			res, err = nil, errNoResult
		}
		if err != nil && cmResult != "" {
			res, err = wire.ParseResult([]byte(cmResult))
		}
		if err != nil {
			if len(o.Results) > 0 {
				t.Fatalf("results %+v from no result", o.Results)
			}
			return
		}
		if len(o.Results) != len(res.Disks) {
			t.Fatalf("%d results of %d disks", len(o.Results), len(res.Disks))
		}
		for i, d := range res.Disks {
			r := o.Results[i]
			if r.Key != d.Key || r.Bytes != d.Bytes || r.SHA256 != d.SHA256 || r.AllocatedOnly != d.AllocatedOnly || r.BytesRead != d.BytesRead {
				t.Fatalf("disk %d: result %+v of %+v", i, r, d)
			}
			if len(r.FullCopyReason) > maxReason || strings.ContainsAny(r.FullCopyReason, "\n\r") {
				t.Fatalf("disk %d: full-copy reason %q", i, r.FullCopyReason)
			}
		}
	})
}

// errNoResult stands for the termination message of a pod still running.
var errNoResult = errors.New("the pod still runs")

// FuzzProofOutput reads what an image proof's self-check printed (the
// transfer image's --version line, the conversion image's self-check
// report) as ProofOutcome does: a result is passed or failed, a pass
// only for a transfer image that reads this controller's job spec
// version or a conversion image whose self-check says ok; the output
// kept is within MaxProofOutput; every refusal of the self-check's line
// is one line.
func FuzzProofOutput(f *testing.F) {
	own, _ := json.Marshal(wire.BuildVersion())
	for _, s := range []string{
		string(own),
		`{"command":"vm-transfer","version":"v1.2.3","goVersion":"go1.26.8","specVersion":"v0"}`,
		`{"command":"curl","version":"8.5.0"}`,
		"Usage: vm-transfer [flags]\n",
		`{"virtV2V":"virt-v2v 2.6.0","outputXMLOption":true,"virtioWin":{"path":"/usr/share/virtio-win","present":true},"ok":true,"problems":[]}`,
		`{"virtV2V":"virt-v2v 2.2.0","outputXMLOption":false,"ok":false,"problems":["virt-v2v-in-place has no -O option","no virtio-win"]}`,
		"checking...\n" + `{"ok":true}`,
		`{"ok":"yes"}`,
		`{"ok":false,"problems":["` + strings.Repeat("\\u001b[2J", 200) + `"]}`,
	} {
		f.Add(s, true, int32(0))
		f.Add(s, false, int32(0))
		f.Add(s, false, int32(1))
	}
	for _, s := range nastySeeds {
		f.Add(s, true, int32(0))
		f.Add(s, false, int32(2))
	}
	now := t0.Add(time.Hour)
	f.Fuzz(func(t *testing.T, out string, transfer bool, exit int32) {
		component := v1alpha1.ComponentConversion
		if transfer {
			component = v1alpha1.ComponentTransfer
		}
		job, pods := conversionJob(component, out, exit, exit != 0)
		res, waiting := ProofOutcome(component, job, pods, now, time.Minute)
		if res == nil {
			t.Fatalf("no result from a pod that ended (waiting: %q)", waiting)
		}
		if res.Result != v1alpha1.ProofPassed && res.Result != v1alpha1.ProofFailed {
			t.Fatalf("result %q", res.Result)
		}
		if len(res.Output) > v1alpha1.MaxProofOutput {
			t.Fatalf("output of %d bytes kept", len(res.Output))
		}
		passed := res.Result == v1alpha1.ProofPassed
		if transfer {
			v, err := wire.ParseVersion(out)
			if want := exit == 0 && err == nil && v.SpecVersion == wire.SpecVersion; passed != want {
				t.Fatalf("the transfer image printing %q (exit %d) passed: %v", out, exit, passed)
			}
			return
		}
		sc, err := ParseConversionSelfCheck(out)
		if err != nil && strings.ContainsAny(err.Error(), "\n") {
			t.Fatalf("the refusal of %q is not one line: %q", out, err)
		}
		if want := exit == 0 && err == nil && sc.OK; passed != want {
			t.Fatalf("the conversion image printing %q (exit %d) passed: %v", out, exit, passed)
		}
	})
}

// FuzzVMIInterfaces reads the interfaces a VMI's status reports (the
// guest agent's network status) as the step does: at most
// maxVMIInterfaces, each string text within maxVMIString, at most
// maxVMIAddresses addresses, each an address's canonical form where
// it is one, else text within maxVMIString.
func FuzzVMIInterfaces(f *testing.F) {
	f.Add("net-0", "00:50:56:aa:bb:01", "eth0\x1b]0;owned\x07"+strings.Repeat("x", 300), "2001:DB8::21", "192.168.10.21\n", "domain, guest-agent", uint8(1))
	f.Add("default", "02:00:00:00:00:01", "enp1s0", "10.244.0.17", "fd10:244::11", "domain, guest-agent, multus-status", uint8(2))
	f.Add("", "", "", "", "", "", uint8(0))
	f.Add("net-1", "00:50:56:aa:bb:02", "ens192", "fe80::1%eth0", "", "guest-agent", uint8(70))
	for _, s := range nastySeeds {
		f.Add(s, s, s, s, s, s, uint8(3))
	}
	f.Fuzz(func(t *testing.T, name, mac, ifName, ip, ip2, source string, n uint8) {
		var in []kubevirtv1.VirtualMachineInstanceNetworkInterface
		for i := range int(n % 80) {
			x := kubevirtv1.VirtualMachineInstanceNetworkInterface{Name: name, MAC: mac, InterfaceName: ifName, InfoSource: source, IP: ip}
			if i%2 == 1 {
				x.IPs = slices.Repeat([]string{ip, ip2}, i%40)
			}
			in = append(in, x)
		}
		out := vmiInterfaces(in)
		if len(out) > maxVMIInterfaces || len(out) != min(len(in), maxVMIInterfaces) {
			t.Fatalf("%d interfaces of %d", len(out), len(in))
		}
		for _, x := range out {
			for _, s := range []string{x.Name, x.MAC, x.InterfaceName, x.InfoSource} {
				checkText(t, "an interface's field", s, maxVMIString)
			}
			if len(x.IPAddresses) > maxVMIAddresses {
				t.Fatalf("%d addresses kept", len(x.IPAddresses))
			}
			for _, a := range x.IPAddresses {
				checkText(t, "an address", a, maxVMIString)
			}
		}
		if a, err := untrusted.Addr(ip); err == nil && len(out) > 0 {
			if got := out[0].IPAddresses; len(got) != 1 || got[0] != a.String() {
				t.Fatalf("address %q kept as %q, not as %s", ip, got, a)
			}
		}
	})
}
