package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
)

// failures counts the agents' failed requests by cause: a transport error
// (connection reset, HTTP/2 connection lost, timeouts, no file descriptor
// or port left), an HTTP status the API server answers when it sheds load
// (429, 5xx), or a watch stream cut off mid-body. The progress lines print
// them, so a run that does not finish says why its agents lost their
// connections.
type failures struct {
	mu     sync.Mutex
	byKind map[string]int
}

func newFailures() *failures { return &failures{byKind: map[string]int{}} }

func (f *failures) add(kind string) {
	f.mu.Lock()
	f.byKind[kind]++
	f.mu.Unlock()
}

// total is the number of failures counted.
func (f *failures) total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := 0
	for _, n := range f.byKind {
		t += n
	}
	return t
}

// String lists the causes, most frequent first.
func (f *failures) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.byKind) == 0 {
		return "none"
	}
	kinds := make([]string, 0, len(f.byKind))
	for k := range f.byKind {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool { return f.byKind[kinds[i]] > f.byKind[kinds[j]] })
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%d %s", f.byKind[k], k)
	}
	return strings.Join(parts, ", ")
}

// wrap is a rest.Config WrapTransport that counts rt's failures.
func (f *failures) wrap(rt http.RoundTripper) http.RoundTripper {
	return countFailures{rt: rt, f: f}
}

type countFailures struct {
	rt http.RoundTripper
	f  *failures
}

func (c countFailures) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.rt.RoundTrip(req)
	if err != nil {
		if req.Context().Err() == nil {
			c.f.add(failureKind(err))
		}
		return resp, err
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
		c.f.add(fmt.Sprintf("HTTP %d", resp.StatusCode))
	}
	resp.Body = &countBody{ReadCloser: resp.Body, f: c.f, req: req}
	return resp, nil
}

// countBody counts a response body (a watch's stream) that ends in an
// error other than its end or the client's own cancellation.
type countBody struct {
	io.ReadCloser
	f   *failures
	req *http.Request
}

func (b *countBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF && b.req.Context().Err() == nil {
		b.f.add("body: " + failureKind(err))
	}
	return n, err
}

// addrs matches host:port pairs, which would make each connection's
// error a cause of its own.
var addrs = regexp.MustCompile(`\[?[0-9a-fA-F.:]+\]?:[0-9]+`)

// failureKind names an error's cause without its addresses.
func failureKind(err error) string {
	switch {
	case errors.Is(err, syscall.EMFILE):
		return "too many open files"
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return "no local port left"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.EPIPE):
		return "broken pipe"
	case errors.Is(err, syscall.ETIMEDOUT):
		return "connection timed out"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "unexpected EOF"
	}
	s := err.Error()
	for _, k := range []string{"http2: client connection lost", "TLS handshake timeout", "i/o timeout",
		"http2: server sent GOAWAY", "context deadline exceeded", "stream error", "EOF"} {
		if strings.Contains(s, k) {
			return k
		}
	}
	s = addrs.ReplaceAllString(s, "ADDR")
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}
