// Package core is the blade's behaviour as a pure state machine: fan mode and
// curve, critical temperature with hysteresis, identify, stealth, LED
// precedence and fan-stall detection. It is fed observations and requests
// with explicit timestamps and answers with desired outputs and events; it
// touches neither hardware nor Kubernetes and keeps no clock of its own, so
// every transition is testable without sleeping.
package core
