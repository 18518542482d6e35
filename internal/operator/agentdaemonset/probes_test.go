package agentdaemonset

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestProbesFollowTheOpsEndpoint(t *testing.T) {
	cases := map[string]struct {
		bind     string
		host     string
		port     int32
		noProbes bool
	}{
		"default":             {bind: "", host: "127.0.0.1", port: 9666},
		"wildcard":            {bind: ":9100", host: "127.0.0.1", port: 9100},
		"IPv4 any":            {bind: "0.0.0.0:9100", host: "127.0.0.1", port: 9100},
		"IPv6 any":            {bind: "[::]:9100", host: "127.0.0.1", port: 9100},
		"loopback":            {bind: "127.0.0.1:9666", host: "127.0.0.1", port: 9666},
		"one address":         {bind: "192.0.2.10:9666", host: "192.0.2.10", port: 9666},
		"disabled":            {bind: "0", noProbes: true},
		"no port":             {bind: "127.0.0.1", noProbes: true},
		"port 0 (any, tests)": {bind: "127.0.0.1:0", noProbes: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			live, ready := Probes(tc.bind)
			if tc.noProbes {
				if live != nil || ready != nil {
					t.Fatalf("Probes(%q) = %v, %v; want none", tc.bind, live, ready)
				}
				return
			}
			for path, p := range map[string]*struct {
				path   string
				period int32
			}{"/healthz": {"/healthz", LivenessPeriodSeconds}, "/readyz": {"/readyz", ReadinessPeriodSeconds}} {
				got := live
				if path == "/readyz" {
					got = ready
				}
				if got == nil || got.HTTPGet == nil {
					t.Fatalf("%s probe missing", path)
				}
				want := struct {
					Host, Path string
					Port       intstr.IntOrString
					Scheme     corev1.URIScheme
					Period     int32
					Threshold  int32
				}{tc.host, p.path, intstr.FromInt32(tc.port), corev1.URISchemeHTTP, p.period, ProbeFailureThreshold}
				have := want
				have.Host, have.Path, have.Port, have.Scheme = *got.HTTPGet.Host, *got.HTTPGet.Path, *got.HTTPGet.Port, *got.HTTPGet.Scheme
				have.Period, have.Threshold = *got.PeriodSeconds, *got.FailureThreshold
				if diff := cmp.Diff(want, have); diff != "" {
					t.Errorf("%s probe (-want +got):\n%s", path, diff)
				}
			}
		})
	}
}
