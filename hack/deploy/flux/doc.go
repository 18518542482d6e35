// Package flux holds the test of the Flux example in deploy/flux: every
// object decodes strictly into Flux's own API types, and the example
// follows the GitOps rules (CRDs in their own Kustomization, dependsOn,
// health checks, substitution only through postBuild.substituteFrom).
package flux
