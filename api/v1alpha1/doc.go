// Package v1alpha1 holds kubeblade's API types for the kubeblade.io/v1alpha1
// group: the BladeConfig resource (whose spec.agent is the agent
// configuration of api/agentconfig/v1alpha1) and the Blade resource agents
// report through.
//
// +kubebuilder:object:generate=true
// +groupName=kubeblade.io
package v1alpha1
