package release

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	cdx "github.com/CycloneDX/cyclonedx-go"
	prov "github.com/in-toto/attestation/go/predicates/provenance/v1"
	attestation "github.com/in-toto/attestation/go/v1"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"google.golang.org/protobuf/encoding/protojson"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"sigs.k8s.io/yaml"

	"github.com/kubeblade/kubeblade/hack/deploy/render"
)

func yamlUnmarshal(b []byte, v any) error { return yaml.Unmarshal(b, v) }

// renderedImage renders a packaged chart with values and returns the
// operator Deployment's image.
func renderedImage(chart []byte, values map[string]any) (string, error) {
	ch, err := loader.LoadArchive(bytes.NewReader(chart))
	if err != nil {
		return "", err
	}
	res, err := render.Render(context.Background(), ch, render.Options{Values: values})
	if err != nil {
		return "", err
	}
	for _, u := range res.Objects {
		if u.GetKind() == "Deployment" {
			cs, _, _ := unstructuredContainers(u.Object)
			if len(cs) > 0 {
				return cs[0], nil
			}
		}
	}
	return "", os.ErrNotExist
}

func unstructuredContainers(obj map[string]any) ([]string, bool, error) {
	spec, _ := obj["spec"].(map[string]any)
	tmpl, _ := spec["template"].(map[string]any)
	pspec, _ := tmpl["spec"].(map[string]any)
	cs, _ := pspec["containers"].([]any)
	var out []string
	for _, c := range cs {
		if m, ok := c.(map[string]any); ok {
			out = append(out, m["image"].(string))
		}
	}
	return out, len(out) > 0, nil
}

// cycloneDXSchema compiles CycloneDX's JSON schema for SBOMSpec from the
// copy in cyclonedx-go's module (schema/), with the schemas it refers to.
func cycloneDXSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/CycloneDX/cyclonedx-go").Output()
	if err != nil {
		t.Fatalf("go list cyclonedx-go: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "schema")
	c := jsonschema.NewCompiler()
	for url, file := range map[string]string{
		"http://cyclonedx.org/schema/bom-" + SBOMSpec.String() + ".schema.json": "bom-" + SBOMSpec.String() + ".schema.json",
		"http://cyclonedx.org/schema/spdx.schema.json":                          "spdx.schema.json",
		"http://cyclonedx.org/schema/jsf-0.82.schema.json":                      "jsf-0.82.schemax.json",
	} {
		f, err := os.Open(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if err := c.AddResource(url, doc); err != nil {
			t.Fatal(err)
		}
	}
	s, err := c.Compile("http://cyclonedx.org/schema/bom-" + SBOMSpec.String() + ".schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSBOMsMatchTheCycloneDXSchema: every SBOM (each archive's binary and
// the image) is valid CycloneDX, names its subject with a SHA-256 and lists
// the Go modules linked into it.
func TestSBOMsMatchTheCycloneDXSchema(t *testing.T) {
	dir := release(t)
	schema := cycloneDXSchema(t)
	n := 0
	for name := range checksums(t, dir) {
		if !strings.HasSuffix(name, ".cdx.json") {
			continue
		}
		n++
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if err := schema.Validate(doc); err != nil {
			t.Errorf("%s: not valid CycloneDX %s: %v", name, SBOMSpec, err)
		}
		var bom cdx.BOM
		if err := json.Unmarshal(b, &bom); err != nil {
			t.Fatal(err)
		}
		mods := 0
		var count func([]cdx.Component)
		count = func(cs []cdx.Component) {
			for _, c := range cs {
				if c.Type == cdx.ComponentTypeLibrary && strings.HasPrefix(c.PackageURL, "pkg:golang/") {
					mods++
				}
				if c.Components != nil {
					count(*c.Components)
				}
			}
		}
		if c := bom.Metadata.Component; c != nil {
			if c.Hashes == nil || len(*c.Hashes) == 0 {
				t.Errorf("%s: the subject has no hash", name)
			}
			if c.Components != nil {
				count(*c.Components)
			}
		}
		if bom.Components != nil {
			count(*bom.Components)
		}
		if mods < 5 {
			t.Errorf("%s lists %d Go modules", name, mods)
		}
	}
	if n != len(Archives)+1 {
		t.Errorf("%d SBOMs, want %d (one per archive and the image's)", n, len(Archives)+1)
	}
	// The schema check itself rejects a broken SBOM.
	bad, _ := jsonschema.UnmarshalJSON(strings.NewReader(`{"bomFormat":"CycloneDX","specVersion":"1.6","components":[{"type":"no-such-type","name":"x"}]}`))
	if err := schema.Validate(bad); err == nil {
		t.Error("the CycloneDX schema accepted a component of type no-such-type")
	}
}

// TestProvenanceIsAnInTotoSLSAStatement parses the provenance with the
// in-toto attestation framework's Go types and validates it, checks that
// it names the image and every checksummed file, and that its DSSE
// envelope verifies with the release's public key.
func TestProvenanceIsAnInTotoSLSAStatement(t *testing.T) {
	dir := release(t)
	b, err := os.ReadFile(filepath.Join(dir, Provenance))
	if err != nil {
		t.Fatal(err)
	}
	var st attestation.Statement
	if err := protojson.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if err := st.Validate(); err != nil {
		t.Fatal(err)
	}
	if st.GetPredicateType() != ProvenanceType {
		t.Errorf("predicate type %s", st.GetPredicateType())
	}
	pb, err := protojson.Marshal(st.GetPredicate())
	if err != nil {
		t.Fatal(err)
	}
	var p prov.Provenance
	if err := protojson.Unmarshal(pb, &p); err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	subjects := map[string]string{}
	for _, s := range st.GetSubject() {
		subjects[s.GetName()] = s.GetDigest()["sha256"]
	}
	if subjects[DefaultImageRepository] != made.res.ImageDigest.Hex {
		t.Errorf("provenance subject %s: %q, want the image's %s", DefaultImageRepository, subjects[DefaultImageRepository], made.res.ImageDigest.Hex)
	}
	for name, sum := range checksums(t, dir) {
		if subjects[name] != sum {
			t.Errorf("provenance subject %s: %q, SHA256SUMS %s", name, subjects[name], sum)
		}
	}
	env, err := os.ReadFile(filepath.Join(dir, ProvenanceDSSE))
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifyDSSE(made.pubPEM, env); err != nil {
		t.Errorf("provenance envelope: %v", err)
	}
}

// TestVerificationFailsOnAnyFlippedByte verifies what a user verifies —
// SHA256SUMS against every file, its signature, the chart's and the image
// payload's signatures, the provenance envelope — and then, one at a
// time, flips one byte of each file and expects that check to fail.
func TestVerificationFailsOnAnyFlippedByte(t *testing.T) {
	dir := release(t)
	read := func(n string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	flip := func(b []byte) []byte {
		c := bytes.Clone(b)
		c[len(c)/2] ^= 0x01
		return c
	}
	sums := checksums(t, dir)
	for name, sum := range sums {
		b := read(name)
		if sha256Hex(b) != sum {
			t.Errorf("%s: sha256 %s, SHA256SUMS says %s", name, sha256Hex(b), sum)
		}
		if sha256Hex(flip(b)) == sum {
			t.Errorf("%s with a flipped byte still matches SHA256SUMS", name)
		}
	}
	cv := ChartVersion(made.opts.Version)
	for _, signed := range []string{Checksums, ChartFile(cv), ImagePayload} {
		data, sig := read(signed), read(signed+SignatureSuffix)
		if err := VerifyBlob(made.pubPEM, data, sig); err != nil {
			t.Errorf("%s: %v", signed, err)
		}
		if err := VerifyBlob(made.pubPEM, flip(data), sig); err == nil {
			t.Errorf("%s with a flipped byte verifies", signed)
		}
		if err := VerifyBlob(made.pubPEM, data, flip(sig)); err == nil {
			t.Errorf("%s's signature with a flipped byte verifies", signed)
		}
	}
	var payload struct {
		Critical struct {
			Identity struct {
				DockerReference string `json:"docker-reference"`
			} `json:"identity"`
			Image struct {
				DockerManifestDigest string `json:"docker-manifest-digest"`
			} `json:"image"`
		} `json:"critical"`
	}
	if err := json.Unmarshal(read(ImagePayload), &payload); err != nil {
		t.Fatal(err)
	}
	if payload.Critical.Identity.DockerReference != DefaultImageRepository || payload.Critical.Image.DockerManifestDigest != made.res.ImageDigest.String() {
		t.Errorf("image signature payload names %+v, want %s@%s", payload.Critical, DefaultImageRepository, made.res.ImageDigest)
	}
	env := read(ProvenanceDSSE)
	var e struct {
		Payload string `json:"payload"`
	}
	if err := json.Unmarshal(env, &e); err != nil {
		t.Fatal(err)
	}
	// A changed byte of the signed statement (inside the base64 payload).
	tampered := bytes.Replace(env, []byte(e.Payload), []byte(flipB64(e.Payload)), 1)
	if err := VerifyDSSE(made.pubPEM, tampered); err == nil {
		t.Error("the provenance envelope verifies with a changed payload")
	}
}

// flipB64 changes one character of base64 text to another base64 character.
func flipB64(s string) string {
	b := []byte(s)
	i := len(b) / 2
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}
