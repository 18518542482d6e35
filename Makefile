# kubeblade: `make demo` runs it, `make test` tests it. `make help` lists the rest.

SHELL := /usr/bin/env bash -o pipefail
.DEFAULT_GOAL := help

GO      ?= go
BIN     := $(CURDIR)/bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
DATE    ?= $(shell git log -1 --format=%ct 2>/dev/null || date +%s)
LDFLAGS := -X github.com/kubeblade/kubeblade/internal/version.version=$(VERSION) \
           -X github.com/kubeblade/kubeblade/internal/version.commit=$(COMMIT) \
           -X github.com/kubeblade/kubeblade/internal/version.date=$(DATE)
BINARIES := kubeblade-agent bladectl
# Generated from api/**/*.proto by `make generate`.
GENERATED := api/bladeapi api/agent
# Packages whose tests run in `make test` (everything).
PKGS    ?= ./...
# How long CI fuzzes each target.
FUZZTIME ?= 10s

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN{FS=":.*##"} /^[a-zA-Z0-9_-]+:.*##/{printf "  %-18s %s\n",$$1,$$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build the binaries into bin/.
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/ $(addprefix ./cmd/,$(BINARIES))

	@# bladectl is also the kubectl plugin "kubectl blade": it checks its name.
	ln -sf bladectl $(BIN)/kubectl-blade

.PHONY: generate
generate: ## Generate the gRPC code from api/**/*.proto with the pinned tools (built once into bin/tools).
	hack/gen-proto.sh

.PHONY: verify-generated
verify-generated: generate ## Fail if the committed generated code differs from what `make generate` produces.
	@if ! git diff --quiet -- $(GENERATED) || [ -n "$$(git ls-files --others --exclude-standard -- $(GENERATED))" ]; then \
	  git --no-pager diff --stat -- $(GENERATED); git ls-files --others --exclude-standard -- $(GENERATED); \
	  echo "generated code is stale: run 'make generate' and commit the result"; exit 1; fi

.PHONY: envtest-assets
envtest-assets: ## Build kube-apiserver and etcd from source into bin/k8s (cached).
	@hack/k8s-tools.sh kube-apiserver etcd >/dev/null

.PHONY: vet
vet: ## go vet and gofmt.
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

.PHONY: test
test: envtest-assets verify-generated vet ## Everything CI checks: vet, unit and envtest suites under -race.
	KUBEBUILDER_ASSETS=$$(hack/k8s-tools.sh kube-apiserver etcd) KUBEBLADE_REQUIRE_ENVTEST=1 \
	  $(GO) test -race -count=1 $(PKGS)

.PHONY: demo
demo: build ## Run an agent on a simulated blade and show what it does.
	hack/demo.sh

.PHONY: bench-footprint
bench-footprint: build ## Run the standalone agent for 60 s and print its memory and CPU use.
	hack/footprint.sh

.PHONY: clean
clean: ## Remove build outputs (keeps the cached control-plane binaries).
	rm -rf $(addprefix $(BIN)/,$(BINARIES)) $(BIN)/kubectl-blade dist
