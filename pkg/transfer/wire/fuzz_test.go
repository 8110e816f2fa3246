package wire

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// nastySeeds are inputs no transfer pod, vSphere or person should send,
// and any of them may: empty, huge, not UTF-8, control and escape bytes,
// CJK, a bidi override, the C1 CSI.
var nastySeeds = []string{
	"", "{", "}", "{}", "null", "[]", "\x00", "\n\n", "\xff\xfe", "{\"kind\":\"\xff\"}", "\x1b[2J", "漢字",
	"\u202e", "\u009b", "\x9b", "{\"kind\":1}", strings.Repeat("{", 5000), strings.Repeat("a\n", 3000),
}

// checkOneLine: an error message is one line.
func checkOneLine(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil && strings.ContainsAny(err.Error(), "\n\r") {
		t.Fatalf("%s: the error is not one line: %q", what, err)
	}
}

// FuzzParseResult reads what a transfer pod's container says as the
// controller does: a result it reads, written again as a termination
// message, reads back with every disk's key, size, checksum and how it
// was read; it fits MaxTerminationMessage whenever what never gives way
// fits; a cut error is a prefix of the error. A hash result alike, and
// a --version output as checkVersion says.
func FuzzParseResult(f *testing.F) {
	alloc := int64(1 << 20)
	for _, r := range []*Result{
		{Kind: KindResult, Succeeded: true, Scheme: "sha256-tree-1MiB", Disks: []DiskResult{{Key: 2000, Bytes: 1 << 30, SHA256: strings.Repeat("ab", 32), DurationSeconds: 12.5,
			AllocatedOnly: true, AllocatedBytes: &alloc, BytesRead: alloc}}},
		{Kind: KindResult, Error: "disk 2001: reading [ds1] web/web-flat.vmdk: 503 Service Unavailable", Reason: ReasonBadResponse,
			Disks: []DiskResult{{Key: 2001, Bytes: 4096, FullCopyReason: "changed block tracking is off on the VM, so vSphere cannot map the disk's allocated areas"}}},
		{Kind: KindResult, Error: strings.Repeat("Ünïcödé 漢字 \u202e\x1b[2J", 300), Reason: ReasonTransferFailed},
	} {
		f.Add(TerminationMessage(r))
	}
	f.Add(HashTerminationMessage(&HashResult{Kind: KindHash, Scheme: "sha256-tree-1MiB", Images: []ImageHash{{Name: "2000", Bytes: 512, Size: 1024, SHA256: strings.Repeat("0", 64)},
		{Name: "2001", Error: "open /dev/vdb: permission denied"},
		{Name: "2002", Bytes: 3 << 20, Size: 3 << 20, SHA256: strings.Repeat("1", 64), StoredRoot: strings.Repeat("2", 64), FirstDifference: &ByteRange{Offset: 1 << 20, Length: 1 << 20}},
		{Name: "2003", Bytes: 512, Size: 512, SHA256: strings.Repeat("3", 64), TreeError: "tree file: it ends after 0 of its 1 leaves (size 512)"}}}))
	f.Add([]byte(`{"kind":"progress","disks":[{"key":2000,"bytesDone":4096,"totalBytes":8192}]}`))
	own, _ := json.Marshal(BuildVersion())
	f.Add(own)
	f.Add([]byte(`{"command":"vm-transfer","version":"v1.2.3","revision":"abc123","goVersion":"go1.26.8","specVersion":"v1"}`))
	f.Add([]byte("warming up\n{\"command\":\"vm-transfer\",\"version\":\"(devel)\",\"specVersion\":\"v1\"}\n\n"))
	f.Add([]byte(`{"command":"curl","version":"8.5.0"}`))
	f.Add([]byte("Usage: vm-transfer [flags]\n"))
	for _, s := range nastySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkVersion(t, string(data))
		r, err := ParseResult(data)
		checkOneLine(t, "ParseResult", err)
		if err == nil {
			checkResultMessage(t, r)
		}
		h, err := ParseHashResult(data)
		checkOneLine(t, "ParseHashResult", err)
		if err == nil {
			checkHashMessage(t, h)
		}
	})
}

func checkResultMessage(t *testing.T, r *Result) {
	msg := TerminationMessage(r)
	floor, _ := json.Marshal(shortened(r, shortenings[len(shortenings)-1]))
	if len(msg) > max(MaxTerminationMessage, len(floor)) {
		t.Fatalf("termination message of %d bytes, what never gives way takes %d", len(msg), len(floor))
	}
	back, err := ParseResult(msg)
	if err != nil {
		t.Fatalf("the termination message %q does not read back: %v", msg, err)
	}
	if back.Succeeded != r.Succeeded || back.Reason != r.Reason || back.Scheme != r.Scheme || len(back.Disks) != len(r.Disks) {
		t.Fatalf("the termination message %q lost the outcome of %+v", msg, r)
	}
	checkCut(t, "the error", r.Error, back.Error)
	for i, d := range r.Disks {
		b := back.Disks[i]
		if b.Key != d.Key || b.Bytes != d.Bytes || b.SHA256 != d.SHA256 || b.AllocatedOnly != d.AllocatedOnly ||
			b.BytesRead != d.BytesRead || !reflect.DeepEqual(b.AllocatedBytes, d.AllocatedBytes) {
			t.Fatalf("disk %d: the termination message keeps %+v of %+v", i, b, d)
		}
		checkCut(t, "a full-copy reason", d.FullCopyReason, b.FullCopyReason)
	}
}

func checkHashMessage(t *testing.T, h *HashResult) {
	msg := HashTerminationMessage(h)
	short := *h
	short.Images = make([]ImageHash, len(h.Images))
	for i, img := range h.Images {
		img.Error, img.TreeError = "", ""
		short.Images[i] = img
	}
	floor, _ := json.Marshal(&short)
	if len(msg) > max(MaxTerminationMessage, len(floor)) {
		t.Fatalf("hash termination message of %d bytes, what never gives way takes %d", len(msg), len(floor))
	}
	back, err := ParseHashResult(msg)
	if err != nil || len(back.Images) != len(h.Images) {
		t.Fatalf("the hash termination message %q does not read back: %v", msg, err)
	}
	for i, img := range h.Images {
		b := back.Images[i]
		if b.Name != img.Name || b.Bytes != img.Bytes || b.Size != img.Size || b.SHA256 != img.SHA256 ||
			b.StoredRoot != img.StoredRoot || !reflect.DeepEqual(b.FirstDifference, img.FirstDifference) {
			t.Fatalf("image %d: the termination message keeps %+v of %+v", i, b, img)
		}
		checkCut(t, "an image's error", img.Error, b.Error)
		checkCut(t, "an image's tree error", img.TreeError, b.TreeError)
	}
}

// checkCut: got is s, nothing, or a part of s cut on a rune boundary and
// marked "...".
func checkCut(t *testing.T, what, s, got string) {
	t.Helper()
	if got == s || got == "" {
		return
	}
	head, ok := strings.CutSuffix(got, "...")
	if !ok || !strings.HasPrefix(s, head) || !utf8.ValidString(head) {
		t.Fatalf("%s %q was cut to %q", what, s, got)
	}
}

// FuzzParseJobSpec reads a job spec as vm-transfer does: a spec it
// takes validates, names files on a datastore, and reads back as itself
// from its JSON.
func FuzzParseJobSpec(f *testing.F) {
	good := `version: v2
endpoint: {url: "https://vc.example.com/sdk", datacenter: DC0}
vmMoRef: vm-42
disks:
- {key: 2000, fileName: "[ds1] web/web.vmdk", capacityBytes: 1048576, destination: /staging/2000/disk.img}
`
	f.Add([]byte(good))
	f.Add([]byte(strings.Replace(good, "vmMoRef:", "vmName: web\nvmMoRef:", 1)))
	f.Add([]byte(strings.Replace(good, "[ds1] web/web.vmdk", "[ds1] web/../../etc/passwd", 1)))
	f.Add([]byte(`{"version":"v2","endpoint":{"url":"http://10.0.0.1/sdk","insecureSkipVerify":true},"vmMoRef":"vm-7","fullCopy":true,` +
		`"disks":[{"key":2000,"fileName":"[SAN LUN 1] my vm/my vm.vmdk","capacityBytes":512,"destination":"/dev/vdb"},` +
		`{"key":2001,"fileName":"[ds] 漢字/\u202e.vmdk","capacityBytes":1024,"destination":"/s/b/disk.img","checkpoint":"/s/b/.cp","treeFile":"/s/b/disk.tree"}]}`))
	f.Add([]byte("a: &a [*a, *a]\nb: *a\n"))
	for _, s := range nastySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		spec, err := ParseJobSpec(data)
		if err != nil {
			return
		}
		if err := spec.Validate(); err != nil {
			t.Fatalf("ParseJobSpec took a spec that does not validate: %v", err)
		}
		for _, d := range spec.Disks {
			if _, err := ParseDatastorePath(d.FileName); err != nil {
				t.Fatalf("ParseJobSpec took disk file %q: %v", d.FileName, err)
			}
		}
		js, err := json.Marshal(spec)
		if err != nil {
			t.Fatalf("marshalling %+v: %v", spec, err)
		}
		back, err := ParseJobSpec(js)
		if err != nil || !reflect.DeepEqual(back, spec) {
			t.Fatalf("the spec %s reads back as %+v, %v", js, back, err)
		}
	})
}

// checkVersion reads a transfer image's --version output as the image
// proof does: a version it reads names the command and reads back from
// its own JSON; the build's own version line, printed last, is read
// whatever came before it; every refusal is one line.
func checkVersion(t *testing.T, out string) {
	t.Helper()
	own, _ := json.Marshal(BuildVersion())
	v, err := ParseVersion(out)
	checkOneLine(t, "ParseVersion", err)
	if err == nil {
		line := LastJSONLine(out)
		if v.Command != CommandName || !strings.HasPrefix(line, "{") || strings.Contains(line, "\n") {
			t.Fatalf("ParseVersion(%q) = %+v from line %q", out, v, line)
		}
		js, _ := json.Marshal(v)
		if back, err := ParseVersion(string(js)); err != nil || back != v {
			t.Fatalf("version %+v reads back as %+v, %v", v, back, err)
		}
	}
	if v, err := ParseVersion(out + "\n" + string(own) + "\n"); err != nil || v != BuildVersion() {
		t.Fatalf("the build's version line after %q reads as %+v, %v", out, v, err)
	}
}

// FuzzParseDatastorePath reads a datastore path as a job spec and vSphere
// give it: a path it takes names a datastore and a file in it, with no
// ".." element, reads back as itself (unless it starts with a space, which
// its form cannot keep), and so do its siblings.
func FuzzParseDatastorePath(f *testing.F) {
	for _, s := range []string{"[ds1] web/web.vmdk", "[SAN LUN 1] my vm/my vm.vmdk", "ds1/web.vmdk", "[ds1] ", "[ds1] web/../../etc/passwd",
		"[] x", "[ds1]x", "[ds1] //abs/x.vmdk", "[ds]1] a/b", "[ds1] a/./b", "[ds1] a/..b/c", "[datastore1] 漢字/\u202e.vmdk"} {
		f.Add(s, "web-flat.vmdk")
	}
	for _, s := range nastySeeds {
		f.Add("[ds1] web/web.vmdk", s)
		f.Add(s, "../x-flat.vmdk")
	}
	f.Fuzz(func(t *testing.T, s, name string) {
		p, err := ParseDatastorePath(s)
		if err != nil {
			return
		}
		check := func(p DatastorePath) {
			if p.Datastore == "" || strings.Contains(p.Datastore, "]") || p.Path == "" || strings.HasPrefix(p.Path, "/") {
				t.Fatalf("%q reads as %+v", s, p)
			}
			for _, elem := range strings.Split(p.Path, "/") {
				if elem == ".." {
					t.Fatalf("%q reads as %+v, which leaves its datastore", s, p)
				}
			}
		}
		check(p)
		if strings.TrimLeftFunc(p.Path, unicode.IsSpace) == p.Path {
			if back, err := ParseDatastorePath(p.String()); err != nil || back != p {
				t.Fatalf("%q reads as %+v, whose form %q reads as %+v, %v", s, p, p.String(), back, err)
			}
		}
		sib, err := p.Sibling(name)
		if err != nil {
			return
		}
		check(sib)
		if sib.Datastore != p.Datastore {
			t.Fatalf("the sibling %q of %+v is %+v", name, p, sib)
		}
	})
}
