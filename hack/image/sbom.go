package main

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os/exec"
	"regexp"
	"sort"
	"strings"
)

// SPDX 2.3 document, the fields the SBOM fills.
type spdxDocument struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreationInfo   `json:"creationInfo"`
	Packages          []spdxPackage      `json:"packages"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	Name             string            `json:"name"`
	SPDXID           string            `json:"SPDXID"`
	VersionInfo      string            `json:"versionInfo"`
	DownloadLocation string            `json:"downloadLocation"`
	FilesAnalyzed    bool              `json:"filesAnalyzed"`
	SourceInfo       string            `json:"sourceInfo,omitempty"`
	Checksums        []spdxChecksum    `json:"checksums,omitempty"`
	ExternalRefs     []spdxExternalRef `json:"externalRefs,omitempty"`
}

type spdxChecksum struct {
	Algorithm     string `json:"algorithm"`
	ChecksumValue string `json:"checksumValue"`
}

type spdxExternalRef struct {
	ReferenceCategory string `json:"referenceCategory"`
	ReferenceType     string `json:"referenceType"`
	ReferenceLocator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

const noAssertion = "NOASSERTION"

var spdxIDUnsafe = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

func spdxID(kind, name string) string {
	return "SPDXRef-" + kind + "-" + strings.Trim(spdxIDUnsafe.ReplaceAllString(name, "-"), "-")
}

// renderSBOM describes the image: its binaries (with their SHA-256), the
// Go toolchain and every Go module linked into them (from the binaries'
// build information), and the CA certificates.
func renderSBOM(o Options, bins map[string][]byte) ([]byte, error) {
	doc, imageID := newSBOM("vm-migration-controller", o)
	modules := map[string]spdxPackage{}
	for _, bin := range binaries {
		pkg, deps, err := binaryPackages(bin, bins[bin])
		if err != nil {
			return nil, err
		}
		doc.Packages = append(doc.Packages, pkg)
		doc.Relationships = append(doc.Relationships, spdxRelationship{Element: imageID, Type: "CONTAINS", Related: pkg.SPDXID})
		for _, d := range deps {
			modules[d.SPDXID] = d
			doc.Relationships = append(doc.Relationships, spdxRelationship{Element: pkg.SPDXID, Type: "DEPENDS_ON", Related: d.SPDXID})
		}
	}
	ids := make([]string, 0, len(modules))
	for id := range modules {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		doc.Packages = append(doc.Packages, modules[id])
	}
	ca := spdxPackage{Name: "ca-certificates", SPDXID: spdxID("Deb", "ca-certificates"), VersionInfo: debianVersion("ca-certificates"), DownloadLocation: noAssertion}
	doc.Packages = append(doc.Packages, ca)
	doc.Relationships = append(doc.Relationships, spdxRelationship{Element: imageID, Type: "CONTAINS", Related: ca.SPDXID})
	sum := sha256.New()
	for _, bin := range binaries {
		sum.Write(bins[bin])
	}
	return finishSBOM(doc, sum.Sum(nil))
}

// renderDebianSBOM describes the conversion image: every Debian package
// its dpkg status lists as installed, by name, version and purl.
func renderDebianSBOM(o Options, pkgs []debPackage) ([]byte, error) {
	doc, imageID := newSBOM(conversionTitle, o)
	sum := sha256.New()
	for _, p := range pkgs {
		fmt.Fprintf(sum, "%s %s %s\n", p.Name, p.Version, p.Architecture)
		purl := fmt.Sprintf("pkg:deb/debian/%s@%s?arch=%s", p.Name, url.PathEscape(p.Version), p.Architecture)
		pkg := spdxPackage{
			Name: p.Name, SPDXID: spdxID("Deb", p.Name), VersionInfo: orNoAssertion(p.Version), DownloadLocation: noAssertion,
			ExternalRefs: []spdxExternalRef{{ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl", ReferenceLocator: purl}},
		}
		if p.Source != "" {
			pkg.SourceInfo = "built from the Debian source package " + p.Source
		}
		doc.Packages = append(doc.Packages, pkg)
		doc.Relationships = append(doc.Relationships, spdxRelationship{Element: imageID, Type: "CONTAINS", Related: pkg.SPDXID})
	}
	return finishSBOM(doc, sum.Sum(nil))
}

// newSBOM is the SPDX document of an image, describing the image alone so
// far; it returns the image's SPDX ID.
func newSBOM(title string, o Options) (spdxDocument, string) {
	imageID := spdxID("Image", title)
	return spdxDocument{
		SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT",
		Name:          title + " " + o.Version,
		CreationInfo:  spdxCreationInfo{Created: o.Created.Format("2006-01-02T15:04:05Z"), Creators: []string{"Tool: vm-migration hack/image"}},
		Packages:      []spdxPackage{{Name: title, SPDXID: imageID, VersionInfo: o.Version, DownloadLocation: noAssertion}},
		Relationships: []spdxRelationship{{Element: "SPDXRef-DOCUMENT", Type: "DESCRIBES", Related: imageID}},
	}, imageID
}

// finishSBOM names the document by its image, version and a digest of
// what it describes, and renders it.
func finishSBOM(doc spdxDocument, digest []byte) ([]byte, error) {
	doc.DocumentNamespace = fmt.Sprintf("https://platform.example/spdx/%s/%s-%s",
		doc.Packages[0].Name, doc.Packages[0].VersionInfo, hex.EncodeToString(digest)[:16])
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("rendering the SBOM: %w", err)
	}
	return append(out, '\n'), nil
}

// binaryPackages describes one binary and what its build information says
// it links: the Go standard library and the modules.
func binaryPackages(bin string, data []byte) (spdxPackage, []spdxPackage, error) {
	info, err := buildinfo.Read(bytes.NewReader(data))
	if err != nil {
		return spdxPackage{}, nil, fmt.Errorf("reading the Go build information of %s: %w", bin, err)
	}
	sum := sha256.Sum256(data)
	pkg := spdxPackage{
		Name: bin, SPDXID: spdxID("Binary", bin), VersionInfo: orNoAssertion(info.Main.Version), DownloadLocation: noAssertion,
		Checksums: []spdxChecksum{{Algorithm: "SHA256", ChecksumValue: hex.EncodeToString(sum[:])}},
	}
	deps := []spdxPackage{goPackage("stdlib", strings.TrimPrefix(info.GoVersion, "go"))}
	for _, m := range info.Deps {
		if m.Replace != nil {
			m = m.Replace
		}
		deps = append(deps, goPackage(m.Path, m.Version))
	}
	return pkg, deps, nil
}

// goPackage describes a Go module (or the standard library) by purl.
func goPackage(path, version string) spdxPackage {
	return spdxPackage{
		Name: path, SPDXID: spdxID("Go", path+"-"+version), VersionInfo: orNoAssertion(version), DownloadLocation: noAssertion,
		ExternalRefs: []spdxExternalRef{{ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl", ReferenceLocator: fmt.Sprintf("pkg:golang/%s@%s", path, version)}},
	}
}

func orNoAssertion(s string) string {
	if s == "" || s == "(devel)" {
		return noAssertion
	}
	return s
}

// debianVersion is the installed version of a Debian package, or
// NOASSERTION where dpkg cannot say.
func debianVersion(pkg string) string {
	out, err := exec.Command("dpkg-query", "-W", "-f=${Version}", pkg).Output()
	if err != nil || len(bytes.TrimSpace(out)) == 0 {
		return noAssertion
	}
	return string(bytes.TrimSpace(out))
}
