package imagepolicy

// Cases maps images to their repository. Tests of this package and of the
// admission policy (test/security) use them, so both implementations of
// the rule are held to the same answers.
var Cases = map[string]string{
	"ghcr.io/kubeblade/kubeblade":                             "ghcr.io/kubeblade/kubeblade",
	"ghcr.io/kubeblade/kubeblade:v0.4.0":                      "ghcr.io/kubeblade/kubeblade",
	"ghcr.io/kubeblade/kubeblade@sha256:" + sha:               "ghcr.io/kubeblade/kubeblade",
	"ghcr.io/kubeblade/kubeblade:v0.4.0@sha256:" + sha:        "ghcr.io/kubeblade/kubeblade",
	"registry.local:5000/mirror/kubeblade:v1":                 "registry.local:5000/mirror/kubeblade",
	"registry.local:5000/mirror/kubeblade":                    "registry.local:5000/mirror/kubeblade",
	"ghcr.io/kubeblade/kubeblade-evil:v1":                     "ghcr.io/kubeblade/kubeblade-evil",
	"ghcr.io/kubeblade/kubeblade/evil:v1":                     "ghcr.io/kubeblade/kubeblade/evil",
	"ghcr.io/evil/kubeblade:v1":                               "ghcr.io/evil/kubeblade",
	"kubeblade/kubeblade:v1":                                  "kubeblade/kubeblade",
	"evil.example/ghcr.io/kubeblade/kubeblade:v1":             "evil.example/ghcr.io/kubeblade/kubeblade",
	"registry.local:5000/mirror/kubeblade:5000@sha256:" + sha: "registry.local:5000/mirror/kubeblade",
}

const sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
