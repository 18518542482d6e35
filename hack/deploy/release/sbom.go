package release

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"fmt"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

// SBOMSpec is the CycloneDX version the SBOMs are written in; the test
// validates them against that version's JSON schema from cyclonedx-go's
// module (schema/bom-1.6.schema.json).
const SBOMSpec = cdx.SpecVersion1_6

// binaryComponent describes one Go binary as a CycloneDX application
// component: its SHA-256, its main module and, nested, every module the
// linker put into it, read from the build information the Go toolchain
// embeds (debug/buildinfo, what `go version -m` prints) — the same source
// cyclonedx-gomod's "bin" mode uses.
func binaryComponent(name, platform string, data []byte) (cdx.Component, error) {
	bi, err := buildinfo.Read(bytes.NewReader(data))
	if err != nil {
		return cdx.Component{}, fmt.Errorf("%s (%s): %w", name, platform, err)
	}
	sum := sha256.Sum256(data)
	ref := name + "@" + platform
	var deps []cdx.Component
	for _, m := range bi.Deps {
		if m.Replace != nil {
			m = m.Replace
		}
		deps = append(deps, cdx.Component{
			BOMRef:     ref + "/" + m.Path + "@" + m.Version,
			Type:       cdx.ComponentTypeLibrary,
			Name:       m.Path,
			Version:    m.Version,
			PackageURL: goPURL(m.Path, m.Version),
		})
	}
	sort.Slice(deps, func(i, j int) bool { return deps[i].BOMRef < deps[j].BOMRef })
	var props []cdx.Property
	props = append(props, cdx.Property{Name: "kubeblade:platform", Value: platform}, cdx.Property{Name: "kubeblade:go", Value: bi.GoVersion})
	for _, s := range bi.Settings {
		props = append(props, cdx.Property{Name: "kubeblade:build:" + s.Key, Value: s.Value})
	}
	c := cdx.Component{
		BOMRef:     ref,
		Type:       cdx.ComponentTypeApplication,
		Name:       name,
		Version:    bi.Main.Version,
		PackageURL: goPURL(bi.Main.Path, bi.Main.Version),
		Hashes:     &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: hex.EncodeToString(sum[:])}},
		Properties: &props,
	}
	if len(deps) > 0 {
		c.Components = &deps
	}
	return c, nil
}

// goPURL is the package URL of a Go module (purl-spec's golang type).
func goPURL(path, version string) string {
	if version == "" || version == "(devel)" {
		return "pkg:golang/" + path
	}
	return "pkg:golang/" + path + "@" + version
}

// sbom encodes a BOM whose subject is main and which lists components.
// The timestamp is the release's time, so that two releases of one commit
// write the same bytes.
func sbom(main cdx.Component, components []cdx.Component, created time.Time) ([]byte, error) {
	bom := cdx.NewBOM()
	bom.Metadata = &cdx.Metadata{
		Timestamp: created.UTC().Format(time.RFC3339),
		Component: &main,
		Tools: &cdx.ToolsChoice{Components: &[]cdx.Component{{
			Type: cdx.ComponentTypeLibrary, Name: cyclonedxGo, Version: moduleVersion(cyclonedxGo),
		}}},
	}
	if len(components) > 0 {
		bom.Components = &components
	}
	var buf bytes.Buffer
	enc := cdx.NewBOMEncoder(&buf, cdx.BOMFileFormatJSON)
	enc.SetPretty(true)
	if err := enc.EncodeVersion(bom, SBOMSpec); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

const cyclonedxGo = "github.com/CycloneDX/cyclonedx-go"

// moduleVersion is the version of a module linked into this program.
func moduleVersion(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == path {
				return m.Version
			}
		}
	}
	return ""
}

// binarySBOM is the SBOM of one binary.
func binarySBOM(name, platform string, data []byte, created time.Time) ([]byte, error) {
	c, err := binaryComponent(name, platform, data)
	if err != nil {
		return nil, err
	}
	return sbom(c, nil, created)
}

// sbomName is the file name of the SBOM of an artefact.
func sbomName(artefact string) string {
	return strings.TrimSuffix(artefact, ".tar.gz") + ".cdx.json"
}
