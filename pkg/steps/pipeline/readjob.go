package pipeline

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/blocktree"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/transfer/wire"
	"platform.example/vm-migration/pkg/untrusted"
)

// Pod labels the Job controller sets: the current one and the legacy one.
const (
	labelJobName       = "batch.kubernetes.io/job-name"
	labelLegacyJobName = "job-name"
)

// maxMessage bounds the messages an observation carries into status;
// maxReason a disk's full-copy reason (the schema's).
const (
	maxMessage = 1024
	maxReason  = v1alpha1.MaxShortMessage
)

// ObserveJob turns a Job, its pods and (for a transfer) the data of its
// ConfigMap into what the state machine needs. It is pure: ReadJob does
// the reading. Succeeded and Failed come from the Job's conditions only;
// the pod's termination message adds the transfer's per-disk results, the
// conversion's inspected OS, and the failure's message and class.
func ObserveJob(job *batchv1.Job, pods []corev1.Pod, configMapData map[string]string) statemachine.JobObservation {
	o, condMessage := jobConditions(job)
	component := job.Labels[v1alpha1.LabelComponent]
	container := TransferContainer
	if component == v1alpha1.ComponentConversion {
		container = ConversionContainer
	}
	pod := latestPod(pods)
	term, waiting := containerState(pod, container)
	msg := ""
	if term != nil {
		msg = term.Message
	}
	switch component {
	case v1alpha1.ComponentConversion:
		observeConversion(&o, msg, term != nil && term.ExitCode == 0)
	default:
		observeTransfer(&o, msg, configMapData)
	}
	// The pod's last status comes over its own watch: a Job can be seen
	// complete before the pod's termination message is.
	o.ResultMissing = o.Succeeded && term == nil &&
		(component == v1alpha1.ComponentConversion || configMapData[wire.ConfigMapKeyResult] == "")
	o.CreatedAt = job.CreationTimestamp.Time
	if !o.Succeeded && !o.Failed {
		o.StartProblem = StartProblem(pod)
	}
	switch {
	case o.Failed && o.Message == "":
		o.Message = joinNonEmpty("; ", condMessage, podProblem(pod, term))
	case o.Failed:
		o.Message = joinNonEmpty("; ", o.Message, condMessage)
	case !o.Succeeded && waiting != nil && waiting.Reason != "" && waiting.Reason != "ContainerCreating":
		o.Message = "waiting: " + joinNonEmpty(": ", waiting.Reason, waiting.Message)
	}
	o.Message = truncate(o.Message, maxMessage)
	return o
}

// jobConditions is a Job's observation as its conditions and completion
// time say, and the message of its Failed condition.
func jobConditions(job *batchv1.Job) (statemachine.JobObservation, string) {
	o := statemachine.JobObservation{Name: job.Name}
	var condMessage string
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			o.Succeeded = true
		case batchv1.JobFailed:
			o.Failed = true
			condMessage = joinNonEmpty(": ", c.Reason, c.Message)
		}
	}
	if job.Status.CompletionTime != nil {
		o.CompletedAt = job.Status.CompletionTime.Time
	}
	return o, condMessage
}

// observeTransfer reads the vm-transfer result (termination message, or
// the ConfigMap's result key when the pod is gone) and its latest progress
// (the ConfigMap's progress key, written when the pod may).
func observeTransfer(o *statemachine.JobObservation, msg string, cm map[string]string) {
	res, err := wire.ParseResult([]byte(strings.TrimSpace(msg)))
	if err != nil && cm[wire.ConfigMapKeyResult] != "" {
		res, err = wire.ParseResult([]byte(cm[wire.ConfigMapKeyResult]))
	}
	if err == nil {
		scheme := ""
		if res.Scheme == blocktree.Scheme {
			scheme = res.Scheme
		}
		for _, d := range res.Disks {
			o.Results = append(o.Results, statemachine.DiskResult{Key: d.Key, Bytes: d.Bytes, SHA256: d.SHA256,
				AllocatedOnly: d.AllocatedOnly, AllocatedBytes: d.AllocatedBytes, BytesRead: d.BytesRead,
				FullCopyReason: truncate(oneLine(d.FullCopyReason), maxReason), Scheme: scheme})
		}
		if !res.Succeeded {
			// The transfer's error may quote what vSphere said (a
			// descriptor's fields): kept without control characters.
			o.Message = untrusted.CleanCut(joinNonEmpty(": ", reasonWord(res.Reason), oneLine(res.Error)), maxMessage)
		}
	} else if o.Succeeded {
		o.Message = "the transfer reported no result"
	}
	if data := cm[wire.ConfigMapKeyProgress]; data != "" && !o.Succeeded && !o.Failed {
		var p wire.Progress
		if json.Unmarshal([]byte(data), &p) == nil && p.Kind == wire.KindProgress {
			for _, d := range p.Disks {
				o.Progress = append(o.Progress, statemachine.DiskProgress{
					Key: d.Key, BytesDone: d.BytesDone, BytesTotal: d.TotalBytes, RateBytesPerSecond: d.RateBytesPerSecond,
				})
			}
		}
	}
}

// reasonWord is a reason a pod reported, when it is one word of letters
// (as the commands' CamelCase reasons are), else "" (left out).
func reasonWord(s string) string {
	if s == "" || len(s) > 64 {
		return ""
	}
	for _, r := range s {
		if (r < 'A' || r > 'Z') && (r < 'a' || r > 'z') {
			return ""
		}
	}
	return s
}

// observeConversion reads the inspected OS of a successful conversion, and
// classifies a failed one from virt-v2v's errors (see convertScriptTemplate
// for what the termination message holds).
func observeConversion(o *statemachine.JobObservation, msg string, exitedZero bool) {
	msg, sums, pins := cutConversionChain(msg)
	r := parseConversionReport(msg)
	// virt-v2v words the guest's product name and its warnings from the
	// guest's own files: status keeps them without control characters,
	// a cut marked.
	r.os = untrusted.CleanCut(r.os, maxOSLength)
	for i, w := range r.warnings {
		r.warnings[i] = untrusted.CleanCut(w, maxWarningLength)
	}
	lines := strings.Split(r.errors, "\n")
	for i, l := range lines {
		lines[i] = untrusted.Clean(l, len(l)*3)
	}
	r.errors = strings.Join(lines, "\n")
	o.Warnings = r.warnings
	if o.Succeeded || exitedZero {
		o.OperatingSystem = r.os
		o.Checksums, o.Interfaces = sums, pins
		return
	}
	if !o.Failed {
		return
	}
	o.Reason = ClassifyConversionFailure(r.errors)
	o.Message = oneLine(r.errors)
	if r.os != "" {
		o.Message = joinNonEmpty(" ", o.Message, "(inspected: "+r.os+")")
	}
}

// conversionReport is what a conversion's termination message says.
type conversionReport struct {
	// os is the inspected guest, "debian 12.15"; "" when not inspected.
	os string
	// errors is virt-v2v's error text, one message per line.
	errors string
	// warnings are virt-v2v's warnings, in order.
	warnings []string
}

// warningsHeading is the line after which the conversion script lists
// virt-v2v's warnings, at the end of the termination message.
const warningsHeading = "# virt-v2v warnings"

// Bounds of the warnings kept from one conversion: how many, and how long
// each (status.conversion.warnings allows 16), and of the inspected OS
// (the schema's).
const (
	maxWarnings      = 8
	maxWarningLength = v1alpha1.MaxConversionWarning
	maxOSLength      = v1alpha1.MaxGuestOSName
)

// v2vMessage is one line of virt-v2v's --machine-readable output.
type v2vMessage struct {
	Message string `json:"message"`
	Type    string `json:"type"`
}

// parseConversionReport reads a conversion's termination message: an
// inspection document (-O), or virt-v2v's inspection lines
// ("i_distro = debian"), then its machine-readable error lines; anything
// else (the error text virt-v2v printed, or the end of the log the
// kubelet put there) counts as error text.
func parseConversionReport(msg string) conversionReport {
	msg, warnings := cutWarnings(msg)
	if strings.Contains(msg, "<v2v-inspection") {
		return conversionReport{os: InspectedOS([]byte(msg)), warnings: warnings}
	}
	fields := map[string]string{}
	var errs, text []string
	for line := range strings.SplitSeq(msg, "\n") {
		if k, v, ok := inspectionLine(line); ok {
			fields[k] = v
			continue
		}
		var m v2vMessage
		if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &m) == nil && m.Message != "" {
			if m.Type == "error" {
				errs = append(errs, "virt-v2v: "+m.Message)
			}
			continue
		}
		text = append(text, line)
	}
	if len(errs) == 0 {
		errs = []string{lastError(text)}
	}
	return conversionReport{os: describeOS(fields), errors: strings.Join(errs, "\n"), warnings: warnings}
}

// cutWarnings splits the warnings the conversion script lists after
// warningsHeading off a termination message. Each is one of virt-v2v's
// JSON lines; a line the kubelet cut at the message's 4 KiB keeps what
// was read of its message, marked as cut.
func cutWarnings(msg string) (string, []string) {
	before, after, found := strings.Cut(msg, warningsHeading+"\n")
	if !found {
		if rest, ok := strings.CutSuffix(msg, warningsHeading); ok {
			return rest, nil
		}
		return msg, nil
	}
	var warnings []string
	for line := range strings.SplitSeq(after, "\n") {
		w := warningText(line)
		if w == "" || len(warnings) == maxWarnings {
			continue
		}
		warnings = append(warnings, truncate(oneLine(w), maxWarningLength))
	}
	return before, warnings
}

// warningText is the message of one of virt-v2v's JSON lines, or what
// there is of it in a line that was cut short.
func warningText(line string) string {
	line = strings.TrimSpace(line)
	var m v2vMessage
	if json.Unmarshal([]byte(line), &m) == nil {
		return m.Message
	}
	rest, ok := strings.CutPrefix(line, `{ "message": "`)
	if !ok || rest == "" {
		return ""
	}
	if text, _, done := strings.Cut(rest, `", "`); done {
		return text
	}
	return rest + "..."
}

// lastError keeps, of output lines, the last error (from its "error:" line
// to the end) or, without one, the last three lines.
func lastError(lines []string) string {
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], "error:") {
			return strings.Join(lines[i:], "\n")
		}
	}
	return strings.Join(lines[max(0, len(lines)-3):], "\n")
}

// inspectionLine splits one of the "i_<field> = <value>" lines virt-v2v
// prints with -v; "unknown" values count as absent.
func inspectionLine(line string) (string, string, bool) {
	key, value, ok := strings.Cut(line, " = ")
	if !ok || !strings.HasPrefix(key, "i_") || strings.ContainsAny(key, " \t") {
		return "", "", false
	}
	value = strings.TrimSpace(value)
	if value == "unknown" {
		value = ""
	}
	return strings.TrimPrefix(key, "i_"), value, true
}

// ClassifyConversionFailure classifies virt-v2v's errors of a failed run:
// statemachine.ConversionInspectionFailed when it found no guest to
// convert, statemachine.ConversionUnsupportedGuest when it cannot convert
// the guest it found, "" for anything else (worth another attempt). The
// messages are virt-v2v's own (convert/*.ml in virt-v2v).
func ClassifyConversionFailure(output string) string {
	s := strings.ToLower(strings.Join(strings.Fields(output), " "))
	switch {
	case strings.Contains(s, "inspection could not detect the source guest"),
		strings.Contains(s, "no root device found"):
		return statemachine.ConversionInspectionFailed
	case strings.Contains(s, "unable to convert this guest type"),
		strings.Contains(s, "multi-boot operating systems are not supported"),
		strings.Contains(s, "not supported by virt-v2v"),
		strings.Contains(s, "only xen kernels are installed in this guest"),
		strings.Contains(s, "no installed kernel packages were found"),
		strings.Contains(s, "no bootloader detected"):
		return statemachine.ConversionUnsupportedGuest
	}
	return ""
}

// InspectedOS reads virt-v2v's inspection document (-O) into a short
// description, "rhel 9.4 (Red Hat Enterprise Linux 9.4 (Plow))". A
// truncated document (a termination message keeps 4 KiB) gives what was
// read before the cut; a document without an operating system gives "".
func InspectedOS(doc []byte) string {
	dec := xml.NewDecoder(strings.NewReader(string(doc)))
	dec.Strict = false
	// A field counts once its element is closed: a cut document gives
	// no half values.
	fields := map[string]string{}
	var stack []string
	var text strings.Builder
	for {
		tok, err := dec.Token()
		if err != nil {
			if !errors.Is(err, io.EOF) && len(fields) == 0 {
				return ""
			}
			break
		}
		switch t := tok.(type) {
		case xml.StartElement:
			stack = append(stack, t.Name.Local)
			text.Reset()
		case xml.EndElement:
			if n := len(stack); n >= 2 && stack[n-2] == "operatingsystem" {
				if v := strings.TrimSpace(text.String()); v != "" && v != "unknown" {
					fields[stack[n-1]] = v
				}
			}
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			text.Reset()
		case xml.CharData:
			text.Write(t)
		}
	}
	return describeOS(fields)
}

// describeOS is "<distro> <major>.<minor> (<product name>)" from inspection
// fields, without a product name that only repeats the version.
func describeOS(fields map[string]string) string {
	os := fields["distro"]
	if os == "" {
		os = fields["name"]
	}
	if os == "" {
		os = fields["type"]
	}
	version := ""
	if v := fields["major_version"]; v != "" {
		version = v + "." + orDefault(fields["minor_version"], "0")
		os = joinNonEmpty(" ", os, version)
	}
	if p := fields["product_name"]; p != "" && p != version {
		if os == "" {
			return truncate(p, 256)
		}
		os += " (" + p + ")"
	}
	return truncate(os, 256)
}

// latestPod picks the pod to read: the newest one that terminated, else the newest.
func latestPod(pods []corev1.Pod) *corev1.Pod {
	if len(pods) == 0 {
		return nil
	}
	sorted := slices.Clone(pods)
	slices.SortStableFunc(sorted, func(a, b corev1.Pod) int {
		at, bt := podTerminated(&a), podTerminated(&b)
		if at != bt {
			if at {
				return -1
			}
			return 1
		}
		return b.CreationTimestamp.Compare(a.CreationTimestamp.Time)
	})
	return &sorted[0]
}

func podTerminated(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// containerState is the named container's terminated state (current or
// last) and its waiting state.
func containerState(pod *corev1.Pod, name string) (*corev1.ContainerStateTerminated, *corev1.ContainerStateWaiting) {
	if pod == nil {
		return nil, nil
	}
	for i := range pod.Status.ContainerStatuses {
		cs := &pod.Status.ContainerStatuses[i]
		if cs.Name != name {
			continue
		}
		if cs.State.Terminated != nil {
			return cs.State.Terminated, nil
		}
		if cs.LastTerminationState.Terminated != nil {
			return cs.LastTerminationState.Terminated, cs.State.Waiting
		}
		return nil, cs.State.Waiting
	}
	return nil, nil
}

// podProblem says why a pod ended without a result: eviction, a deadline,
// a kill, a non-zero exit.
func podProblem(pod *corev1.Pod, term *corev1.ContainerStateTerminated) string {
	if pod == nil {
		return ""
	}
	var parts []string
	if pod.Status.Reason != "" || pod.Status.Message != "" {
		parts = append(parts, "pod "+pod.Name+": "+joinNonEmpty(": ", pod.Status.Reason, pod.Status.Message))
	}
	if term != nil {
		parts = append(parts, fmt.Sprintf("container %s: %s (exit code %d)", pod.Name, orDefault(term.Reason, "terminated"), term.ExitCode))
	}
	return strings.Join(parts, "; ")
}

func joinNonEmpty(sep string, parts ...string) string {
	var keep []string
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			keep = append(keep, p)
		}
	}
	return strings.Join(keep, sep)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// truncate cuts s to at most n bytes, on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - 3
	for cut > 0 && !utf8RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
