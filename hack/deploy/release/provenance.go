package release

import (
	"encoding/json"
	"time"
)

// Statement is an in-toto attestation framework v1 statement
// (github.com/in-toto/attestation spec/v1/statement.md), written with
// encoding/json rather than protojson so that its bytes are stable; the
// test parses it with the framework's Go types and validates it.
type Statement struct {
	Type          string         `json:"_type"`
	Subject       []Subject      `json:"subject"`
	PredicateType string         `json:"predicateType"`
	Predicate     SLSAProvenance `json:"predicate"`
}

// Subject is an artefact the statement is about.
type Subject struct {
	Name   string            `json:"name"`
	Digest map[string]string `json:"digest"`
}

// SLSAProvenance is the SLSA provenance v1 predicate (slsa.dev/provenance/v1).
type SLSAProvenance struct {
	BuildDefinition struct {
		BuildType            string               `json:"buildType"`
		ExternalParameters   map[string]any       `json:"externalParameters"`
		ResolvedDependencies []ResourceDescriptor `json:"resolvedDependencies,omitempty"`
	} `json:"buildDefinition"`
	RunDetails struct {
		Builder struct {
			ID string `json:"id"`
		} `json:"builder"`
		Metadata struct {
			InvocationID string `json:"invocationId,omitempty"`
			StartedOn    string `json:"startedOn,omitempty"`
		} `json:"metadata"`
	} `json:"runDetails"`
}

// ResourceDescriptor names an input of the build.
type ResourceDescriptor struct {
	URI    string            `json:"uri"`
	Digest map[string]string `json:"digest"`
}

const (
	// StatementType and ProvenanceType are the in-toto and SLSA type URIs.
	StatementType  = "https://in-toto.io/Statement/v1"
	ProvenanceType = "https://slsa.dev/provenance/v1"
	// BuildType names how kubeblade builds a release: `make release`,
	// described in docs/releasing.md.
	BuildType = "https://github.com/kubeblade/kubeblade/blob/main/docs/releasing.md#make-release"
	// SourceURI is the repository releases are built from.
	SourceURI = "git+https://github.com/kubeblade/kubeblade"
)

// provenance is the statement that subjects were built by `make release`
// of version from commit by builder.
func provenance(subjects []Subject, version, commit, builder string, created time.Time) ([]byte, error) {
	st := Statement{Type: StatementType, Subject: subjects, PredicateType: ProvenanceType}
	p := &st.Predicate
	p.BuildDefinition.BuildType = BuildType
	p.BuildDefinition.ExternalParameters = map[string]any{"version": version, "source": SourceURI + "@" + commit}
	if commit != "" {
		p.BuildDefinition.ResolvedDependencies = []ResourceDescriptor{{URI: SourceURI, Digest: map[string]string{"gitCommit": commit}}}
	}
	p.RunDetails.Builder.ID = builder
	p.RunDetails.Metadata.StartedOn = created.UTC().Format(time.RFC3339)
	return json.MarshalIndent(st, "", "  ")
}
