// Package imagepolicy decides which images may run as the agent: an image
// is allowed when its repository is on an administrator's list. It is the
// operator's copy of the rule the ValidatingAdmissionPolicy
// kubeblade-agent-images (config/admission/agent-images.yaml) applies in
// the API server; test/security runs both on the same images. It imports
// nothing from Kubernetes.
package imagepolicy

import (
	"fmt"
	"slices"
	"strings"
)

// DefaultRepository is the project's own image repository, allowed when an
// administrator names no other.
const DefaultRepository = "ghcr.io/kubeblade/kubeblade"

// Repository is image without its digest ("@sha256:…") and tag (":v1", a
// colon after the last slash; one before it is a registry's port). Nothing
// is normalised: "kubeblade/kubeblade" and "docker.io/kubeblade/kubeblade"
// are different repositories, as they are to the admission policy.
func Repository(image string) string {
	named, _, _ := strings.Cut(image, "@")
	if i := strings.LastIndex(named, ":"); i > strings.LastIndex(named, "/") {
		return named[:i]
	}
	return named
}

// AllowList is the set of repositories agent images may come from.
type AllowList []string

// Parse reads a comma-separated list of repositories; empty entries are
// dropped, and an entry with a tag or digest is refused (the list names
// repositories, and a tag there would silently allow nothing).
func Parse(s string) (AllowList, error) {
	var out AllowList
	for _, r := range strings.Split(s, ",") {
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		if Repository(r) != r {
			return nil, fmt.Errorf("allowed image repository %q has a tag or digest; list repositories only, such as %s", r, DefaultRepository)
		}
		out = append(out, r)
	}
	return out, nil
}

// Check returns nil when image comes from an allowed repository, and an
// error that says which repositories are allowed otherwise.
func (l AllowList) Check(image string) error {
	if slices.Contains(l, Repository(image)) {
		return nil
	}
	return fmt.Errorf("image %s (repository %s) is not from an allowed repository (%s); an administrator allows more with the chart value agentImages.allowedRepositories and the operator's --agent-image-repositories",
		image, Repository(image), strings.Join(l, ", "))
}

// String is the comma-separated list Parse reads.
func (l AllowList) String() string { return strings.Join(l, ",") }

// Set implements flag.Value: the flag's value replaces the list.
func (l *AllowList) Set(s string) error {
	p, err := Parse(s)
	if err != nil {
		return err
	}
	if len(p) == 0 {
		return fmt.Errorf("no repository in %q: list at least one, such as %s", s, DefaultRepository)
	}
	*l = p
	return nil
}

// Allowed returns image if it may run, and otherwise fallback (the
// operator's own agent image) with the reason image was refused. An empty
// image means fallback and is never refused.
func (l AllowList) Allowed(image, fallback string) (string, error) {
	if image == "" {
		return fallback, nil
	}
	if err := l.Check(image); err != nil {
		return fallback, err
	}
	return image, nil
}
