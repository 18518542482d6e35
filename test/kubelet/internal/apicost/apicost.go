// Package apicost reads kube-apiserver's audit log (JSON lines of
// audit.k8s.io/v1 Events) and says what each client costs the API server:
// requests per minute by verb and resource, bytes of request and response
// objects, and the watches it holds open. The real-kubelet suite's
// TestAPICost uses it to put one kubeblade agent beside the kubelet of the
// same Node (make bench-apicost).
package apicost

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// Request is one API request, put together from its audit events.
type Request struct {
	ID        string
	User      string
	UserAgent string
	Verb      string
	Resource  string // resource[/subresource], or the path for non-resource URLs
	// Start is when the API server received it; End when its response
	// completed (zero for a watch still open at the end of the log).
	Start, End time.Time
	// BytesIn and BytesOut are the sizes of the request and response
	// objects as the audit log records them (JSON); a watch's stream of
	// events is not in the log and not counted.
	BytesIn, BytesOut int
}

// Watch reports whether the request is a long-lived watch.
func (r Request) Watch() bool { return r.Verb == "watch" }

// Read reads an audit log. Events of one request (ResponseStarted and
// ResponseComplete of a watch) become one Request.
func Read(path string) ([]Request, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(f)
}

// Parse reads audit events, one JSON object per line.
func Parse(in io.Reader) ([]Request, error) {
	byID := map[string]int{}
	var reqs []Request
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	line := 0
	for sc.Scan() {
		line++
		if len(strings.TrimSpace(sc.Text())) == 0 {
			continue
		}
		var ev auditv1.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("audit log line %d: %w", line, err)
		}
		id := string(ev.AuditID)
		i, seen := byID[id]
		if !seen {
			i = len(reqs)
			byID[id] = i
			reqs = append(reqs, Request{ID: id, User: ev.User.Username, UserAgent: ev.UserAgent, Verb: ev.Verb, Resource: resource(&ev),
				Start: ev.RequestReceivedTimestamp.Time})
		}
		r := &reqs[i]
		if ev.RequestObject != nil && r.BytesIn == 0 {
			r.BytesIn = len(ev.RequestObject.Raw)
		}
		if ev.ResponseObject != nil {
			r.BytesOut = len(ev.ResponseObject.Raw)
		}
		if ev.Stage == auditv1.StageResponseComplete || ev.Stage == auditv1.StagePanic {
			r.End = ev.StageTimestamp.Time
		}
	}
	return reqs, sc.Err()
}

func resource(ev *auditv1.Event) string {
	if ev.ObjectRef == nil || ev.ObjectRef.Resource == "" {
		return ev.RequestURI
	}
	if ev.ObjectRef.Subresource != "" {
		return ev.ObjectRef.Resource + "/" + ev.ObjectRef.Subresource
	}
	return ev.ObjectRef.Resource
}

// Who names the client that made a request, by the identities the
// real-kubelet suite's node and kubeblade's Helm chart give them: "kubelet"
// (the Node's kubelet), "agent" (kubeblade-agent's service account, from the
// agent binary: its user agent starts with kubeblade-agent, which keeps out
// a test's own requests with the pod's token), "operator" (the operator's
// service account); "" for anyone else.
func (r Request) Who(namespace string) string {
	user := r.User
	switch {
	case strings.HasPrefix(user, "system:node:"):
		return "kubelet"
	case user == "system:serviceaccount:"+namespace+":kubeblade-agent":
		if strings.HasPrefix(r.UserAgent, "kubeblade-agent") {
			return "agent"
		}
		return ""
	case strings.HasPrefix(user, "system:serviceaccount:"+namespace+":") && strings.Contains(user, "operator"):
		return "operator"
	}
	return ""
}

// IsCertificate reports whether the request is part of a certificate's
// issuance (the agent's mTLS serving certificate), which the start-up
// count keeps apart.
func (r Request) IsCertificate() bool {
	return strings.HasPrefix(r.Resource, "certificatesigningrequests")
}

// Cost is what one client asked of the API server in a window.
type Cost struct {
	Window time.Duration
	// Requests counts requests received in the window, by "verb resource".
	Requests map[string]int
	// Certificate counts the certificate issuance's requests among them.
	Certificate int
	// BytesIn and BytesOut add up the requests' object sizes.
	BytesIn, BytesOut int
	// OpenWatches is how many watches were open at the window's end.
	OpenWatches int
}

// Total is the number of requests in the window.
func (c Cost) Total() int {
	n := 0
	for _, v := range c.Requests {
		n += v
	}
	return n
}

// PerMinute is Total over the window's length.
func (c Cost) PerMinute() float64 {
	if c.Window <= 0 {
		return 0
	}
	return float64(c.Total()) / c.Window.Minutes()
}

// Measure adds up the requests of the client who received in [from, to).
func Measure(reqs []Request, namespace, who string, from, to time.Time) Cost {
	c := Cost{Window: to.Sub(from), Requests: map[string]int{}}
	for _, r := range reqs {
		if r.Who(namespace) != who {
			continue
		}
		if r.Watch() && !r.Start.After(to) && (r.End.IsZero() || r.End.After(to)) {
			c.OpenWatches++
		}
		if r.Start.Before(from) || !r.Start.Before(to) {
			continue
		}
		c.Requests[r.Verb+" "+r.Resource]++
		if r.IsCertificate() {
			c.Certificate++
		}
		c.BytesIn += r.BytesIn
		c.BytesOut += r.BytesOut
	}
	return c
}

// First is when the client's first request was received (zero if none).
func First(reqs []Request, namespace, who string) time.Time {
	var t time.Time
	for _, r := range reqs {
		if r.Who(namespace) == who && (t.IsZero() || r.Start.Before(t)) {
			t = r.Start
		}
	}
	return t
}

// Breakdown formats the requests by verb and resource, most first:
// "12 update leases, 1 patch nodes/status".
func (c Cost) Breakdown() string {
	keys := make([]string, 0, len(c.Requests))
	for k := range c.Requests {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if d := c.Requests[b] - c.Requests[a]; d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", c.Requests[k], k)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
