package apicost

import (
	"strings"
	"testing"
	"time"
)

// Lines in the format kube-apiserver's JSON audit backend writes
// (k8s.io/apiserver/pkg/apis/audit/v1 Event, v0.37.2), trimmed to the
// fields the package reads.
const log = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"RequestResponse","auditID":"w1","stage":"ResponseStarted","requestURI":"/api/v1/nodes?fieldSelector=metadata.name%3Dn&watch=true","verb":"watch","user":{"username":"system:serviceaccount:kubeblade-system:kubeblade-agent"},"userAgent":"kubeblade-agent/n","objectRef":{"resource":"nodes","apiVersion":"v1"},"requestReceivedTimestamp":"2026-12-02T12:00:00.000000Z","stageTimestamp":"2026-12-02T12:00:00.010000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"RequestResponse","auditID":"c1","stage":"ResponseComplete","requestURI":"/apis/certificates.k8s.io/v1/certificatesigningrequests","verb":"create","user":{"username":"system:serviceaccount:kubeblade-system:kubeblade-agent"},"userAgent":"kubeblade-agent/n","objectRef":{"resource":"certificatesigningrequests","apiVersion":"v1"},"requestObject":{"kind":"CertificateSigningRequest"},"responseObject":{"kind":"CertificateSigningRequest","x":1},"requestReceivedTimestamp":"2026-12-02T12:00:01.000000Z","stageTimestamp":"2026-12-02T12:00:01.020000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"RequestResponse","auditID":"p1","stage":"ResponseComplete","requestURI":"/apis/kubeblade.io/v1alpha1/blades/n/status","verb":"patch","user":{"username":"system:serviceaccount:kubeblade-system:kubeblade-agent"},"userAgent":"kubeblade-agent/n","objectRef":{"resource":"blades","subresource":"status","apiVersion":"v1alpha1"},"requestObject":{"status":{}},"responseObject":{"kind":"Blade"},"requestReceivedTimestamp":"2026-12-02T12:02:00.000000Z","stageTimestamp":"2026-12-02T12:02:00.020000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"RequestResponse","auditID":"l1","stage":"ResponseComplete","requestURI":"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n","verb":"update","user":{"username":"system:node:n"},"objectRef":{"resource":"leases","apiVersion":"v1"},"requestReceivedTimestamp":"2026-12-02T12:02:10.000000Z","stageTimestamp":"2026-12-02T12:02:10.020000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"RequestResponse","auditID":"w2","stage":"ResponseStarted","requestURI":"/apis/kubeblade.io/v1alpha1/bladeconfigs?watch=true","verb":"watch","user":{"username":"system:serviceaccount:kubeblade-system:kubeblade-agent"},"userAgent":"kubeblade-agent/n","objectRef":{"resource":"bladeconfigs","apiVersion":"v1alpha1"},"requestReceivedTimestamp":"2026-12-02T12:00:00.500000Z","stageTimestamp":"2026-12-02T12:00:00.510000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"RequestResponse","auditID":"w2","stage":"ResponseComplete","requestURI":"/apis/kubeblade.io/v1alpha1/bladeconfigs?watch=true","verb":"watch","user":{"username":"system:serviceaccount:kubeblade-system:kubeblade-agent"},"userAgent":"kubeblade-agent/n","objectRef":{"resource":"bladeconfigs","apiVersion":"v1alpha1"},"requestReceivedTimestamp":"2026-12-02T12:00:00.500000Z","stageTimestamp":"2026-12-02T12:03:00.000000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"RequestResponse","auditID":"t1","stage":"ResponseComplete","requestURI":"/apis/authentication.k8s.io/v1/selfsubjectreviews","verb":"create","user":{"username":"system:serviceaccount:kubeblade-system:kubeblade-agent"},"userAgent":"kubelettest.test/v0.0.0 (linux/amd64) kubernetes/$Format","objectRef":{"resource":"selfsubjectreviews","apiVersion":"v1"},"requestReceivedTimestamp":"2026-12-02T12:00:20.000000Z","stageTimestamp":"2026-12-02T12:00:20.020000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"RequestResponse","auditID":"o1","stage":"ResponseComplete","requestURI":"/api/v1/nodes","verb":"list","user":{"username":"system:serviceaccount:kubeblade-system:kubeblade-operator"},"objectRef":{"resource":"nodes","apiVersion":"v1"},"requestReceivedTimestamp":"2026-12-02T12:02:30.000000Z","stageTimestamp":"2026-12-02T12:02:30.020000Z"}
`

func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339, "2026-12-02T"+s+"Z")
	if err != nil {
		panic(err)
	}
	return t
}

func TestMeasureSplitsByClientAndWindow(t *testing.T) {
	reqs, err := Parse(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 7 {
		t.Fatalf("got %d requests, want 7 (the watch w2's two stages are one request)", len(reqs))
	}
	const ns = "kubeblade-system"
	if got := First(reqs, ns, "agent"); !got.Equal(ts("12:00:00")) {
		t.Errorf("agent's first request at %v", got)
	}
	start := Measure(reqs, ns, "agent", ts("12:00:00"), ts("12:01:00"))
	// The test's own request with the agent's token (t1) is not the agent's.
	if start.Total() != 3 || start.Certificate != 1 {
		t.Errorf("start-up: %d requests (%s), %d certificate; want 3, 1", start.Total(), start.Breakdown(), start.Certificate)
	}
	if start.BytesIn != len(`{"kind":"CertificateSigningRequest"}`) {
		t.Errorf("bytes in = %d", start.BytesIn)
	}
	if start.OpenWatches != 2 {
		t.Errorf("open watches at 12:01 = %d, want 2", start.OpenWatches)
	}
	steady := Measure(reqs, ns, "agent", ts("12:01:00"), ts("12:04:00"))
	if steady.Total() != 1 || steady.Breakdown() != "1 patch blades/status" || steady.PerMinute() != 1.0/3 {
		t.Errorf("steady: %s, %.3f/min; want one status patch in 3 min", steady.Breakdown(), steady.PerMinute())
	}
	if steady.OpenWatches != 1 {
		t.Errorf("open watches at 12:04 = %d, want 1 (w2 ended at 12:03)", steady.OpenWatches)
	}
	if k := Measure(reqs, ns, "kubelet", ts("12:01:00"), ts("12:04:00")); k.Breakdown() != "1 update leases" {
		t.Errorf("kubelet: %s", k.Breakdown())
	}
	if o := Measure(reqs, ns, "operator", ts("12:01:00"), ts("12:04:00")); o.Breakdown() != "1 list nodes" {
		t.Errorf("operator: %s", o.Breakdown())
	}
}

func TestParseRejectsGarbage(t *testing.T) {
	if _, err := Parse(strings.NewReader("{\"auditID\":\"a\"}\nnot json\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("err = %v, want one naming line 2", err)
	}
}
