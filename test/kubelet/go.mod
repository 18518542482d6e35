// Module kubelettest is the real-kubelet end-to-end suite (`make
// e2e-kubelet`): a control plane and one real node (kubelet, containerd,
// runc, CNI) on this machine, kubeblade installed with its Helm chart through
// the Helm SDK. It is a module of its own so that the Helm SDK stays out of
// kubeblade's dependency graph; it shares hack/deploy's chart renderer.
module github.com/kubeblade/kubeblade/test/kubelet

go 1.26.0

replace github.com/kubeblade/kubeblade => ../..

replace github.com/kubeblade/kubeblade/hack/deploy => ../../hack/deploy

require github.com/google/go-containerregistry v0.22.1

require (
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
)
