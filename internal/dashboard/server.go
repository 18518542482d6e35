package dashboard

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"strings"
	"time"

	"k8s.io/utils/clock"
)

//go:embed web
var webFS embed.FS

// TokenHeader carries the page's per-session token on state-changing
// requests.
const TokenHeader = "X-Kubeblade-Token"

// tokenPlaceholder is replaced in index.html by the session's token.
const tokenPlaceholder = "__KUBEBLADE_TOKEN__"

// contentSecurityPolicy allows the page nothing but its own embedded files
// and its own API: no CDN, no external fonts, no inline script, no framing
// (a click on a blade changes the cluster, so no other site may overlay it).
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; manifest-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// Identifier makes the one change the page can ask for.
type Identifier interface {
	SetIdentify(ctx context.Context, node string, on bool) error
}

// Options configure the HTTP side.
type Options struct {
	Hub      *Hub
	Identify Identifier
	// Token is the session's token for state-changing requests; empty
	// makes a random one.
	Token string
	// Hosts are host names (besides IP addresses and localhost) the page
	// may be reached by, e.g. the machine's name when serving a wall
	// screen on the network. Others are refused, which stops DNS
	// rebinding: a web page whose name resolves to this address cannot
	// read the cluster through it.
	Hosts []string
	Clock clock.WithTicker
	// PingInterval is how often an idle stream says it is alive, so the
	// page notices a dead connection (default 10 s).
	PingInterval time.Duration
}

// Server serves the page, its stream and its API.
type Server struct {
	o     Options
	index []byte
	mux   *http.ServeMux
	cop   *http.CrossOriginProtection
}

// NewServer makes the dashboard's HTTP handler.
func NewServer(o Options) (*Server, error) {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.PingInterval <= 0 {
		o.PingInterval = 10 * time.Second
	}
	if o.Token == "" {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		o.Token = hex.EncodeToString(b)
	}
	index, err := webFS.ReadFile("web/index.html")
	if err != nil {
		return nil, err
	}
	s := &Server{o: o, mux: http.NewServeMux(), cop: http.NewCrossOriginProtection(),
		index: bytes.ReplaceAll(index, []byte(tokenPlaceholder), []byte(o.Token))}
	assets, _ := fs.Sub(webFS, "web")
	s.mux.HandleFunc("GET /{$}", s.serveIndex)
	s.mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(assets)))
	s.mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/assets/favicon.svg", http.StatusMovedPermanently)
	})
	s.mux.HandleFunc("GET /api/stream", s.stream)
	s.mux.HandleFunc("GET /api/blades/{name}/events", s.events)
	s.mux.HandleFunc("POST /api/blades/{name}/identify", s.identify)
	return s, nil
}

// Token is the session's token.
func (s *Server) Token() string { return s.o.Token }

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	if !s.hostAllowed(r.Host) {
		writeError(w, http.StatusMisdirectedRequest, "this dashboard is not served under the name "+r.Host+
			"; open it by IP address or localhost, or start it with --allow-host "+hostOnly(r.Host))
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		// Cross-site requests are refused twice over: by the browser's
		// Sec-Fetch-Site/Origin headers, and by the token only the page
		// itself can read.
		if err := s.cop.Check(r); err != nil {
			writeError(w, http.StatusForbidden, "cross-origin request refused")
			return
		}
		if subtle.ConstantTimeCompare([]byte(r.Header.Get(TokenHeader)), []byte(s.o.Token)) != 1 {
			writeError(w, http.StatusForbidden, "missing or wrong "+TokenHeader+": reload the page")
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.Trim(hostport, "[]")
}

func (s *Server) hostAllowed(hostport string) bool {
	h := strings.ToLower(hostOnly(hostport))
	if h == "localhost" || strings.HasSuffix(h, ".localhost") || net.ParseIP(h) != nil {
		return true
	}
	for _, a := range s.o.Hosts {
		if strings.EqualFold(a, h) {
			return true
		}
	}
	return false
}

func (s *Server) serveIndex(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(s.index)
}

// stream sends the page a snapshot, then every change, as server-sent
// events, until the page goes away or lags so far behind that the hub
// drops it (its EventSource reconnects and gets a fresh snapshot).
func (s *Server) stream(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "streaming unsupported")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	sub := s.o.Hub.Subscribe()
	defer sub.Close()
	// retry: how soon the browser reconnects after losing the stream.
	if _, err := io.WriteString(w, "retry: 1000\n\n"); err != nil {
		return
	}
	ping := s.o.Clock.NewTicker(s.o.PingInterval)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-sub.Dropped():
			return
		case m := <-sub.C():
			if _, err := w.Write(m); err != nil {
				return
			}
			// Send what else is queued in the same write.
			for more := true; more; {
				select {
				case m := <-sub.C():
					if _, err := w.Write(m); err != nil {
						return
					}
				default:
					more = false
				}
			}
		case <-ping.C():
			if _, err := io.WriteString(w, "event: ping\ndata: {}\n\n"); err != nil {
				return
			}
		}
		fl.Flush()
	}
}

func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	list := s.o.Hub.Events(r.PathValue("name"))
	if list == nil {
		list = []Event{}
	}
	writeJSON(w, http.StatusOK, list)
}

// identifyRequest is the body of POST /api/blades/{name}/identify.
type identifyRequest struct {
	Identify *bool `json:"identify"`
}

func (s *Server) identify(w http.ResponseWriter, r *http.Request) {
	var req identifyRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 1024))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || req.Identify == nil {
		writeError(w, http.StatusBadRequest, `want {"identify": true|false}`)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	name := r.PathValue("name")
	if err := s.o.Identify.SetIdentify(ctx, name, *req.Identify); err != nil {
		code := http.StatusBadGateway
		if errors.Is(err, ErrNodeNotFound) {
			code = http.StatusNotFound
		}
		writeError(w, code, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"node": name, "identify": *req.Identify})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}
