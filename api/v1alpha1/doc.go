// Package v1alpha1 holds kubeblade's API types for the kubeblade.io/v1alpha1
// group: the agent configuration shared by the standalone config file and
// the BladeConfig resource, and the Blade resource agents report through.
//
// +kubebuilder:object:generate=true
// +groupName=kubeblade.io
package v1alpha1
