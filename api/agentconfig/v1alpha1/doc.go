// Package v1alpha1 is the agent's configuration: the standalone agent's
// config file (/etc/kubeblade/agent.yaml) and BladeConfig.spec.agent share
// these types, so a blade behaves the same with or without Kubernetes.
//
// It imports nothing from Kubernetes on purpose: the lean standalone agent
// (`make build-standalone`) links it without any Kubernetes client code.
//
// +kubebuilder:object:generate=true
package v1alpha1
