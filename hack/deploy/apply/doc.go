// Package apply holds the test that installs the rendered chart into a real
// kube-apiserver (envtest) with server-side apply, so the API server itself
// validates every object the chart and the plain manifests produce.
package apply
