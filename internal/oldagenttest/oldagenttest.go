// Package oldagenttest serves compute-blade-agent's gRPC API the way that
// agent does, over an in-memory blade, for kubeblade's compatibility tests:
// bladectl's fallback, config import and export. It is the old agent's
// wire behaviour rebuilt from kubeblade's copy of the proto (api/bladeapi),
// not a kubeblade agent: it serves no kubeblade service, no health service,
// and keeps the old agent's quirks. Nothing in the binaries imports it.
//
// What it models, from github.com/compute-blade-community/compute-blade-agent
// at 422cf18555ed2a7be290de6d82e7246209f73fb6:
//   - internal/agent/api.go: EmitEvent only queues the event (a channel of
//     10) and returns; the event loop applies it later, so GetStatus right
//     after EmitEvent can still show the old state. SetFanSpeed and
//     SetStealthMode fail (codes.Unknown, a plain error) in critical mode;
//     SetFanSpeedAuto does not. GetStatus truncates the temperature and
//     the curve's temperatures to whole degrees and computes fan_percent
//     from the current temperature.
//   - pkg/agent/state.go: WaitForIdentifyConfirm blocks until the next
//     IDENTIFY_CONFIRM event, also when identify is not active; CRITICAL
//     clears identify without releasing waiters.
//   - internal/agent/handler.go: the edge button toggles identify;
//     CRITICAL forces the fan to 100 % and stealth off; CRITICAL_RESET
//     restores the curve and the configured stealth mode.
//   - pkg/fancontroller: linear interpolation between the sorted steps,
//     truncated to a whole percent.
//   - internal/agent/api_certificates.go, pkg/certificate: with TCP and
//     listen.authenticated, an ECDSA P-384 CA, server and client
//     certificates (keys as "EC PRIVATE KEY"), and a bladectl config with
//     the client's credentials inline, server localhost:<port>.
//
// With Options.Predecessor it serves the older API of
// github.com/uptime-industries/compute-blade-agent at
// 485f5ac79b370a690c7c7edfe31d8be4326e476c (api/bladeapi/v1alpha1/blade.proto):
// no SetFanSpeedAuto, and StatusResponse fields 1–6 only.
package oldagenttest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	bladeapiv1 "github.com/kubeblade/kubeblade/api/bladeapi/v1alpha1"
)

// Step is one fan_controller step of the old config.
type Step struct {
	Temperature float64
	Percent     uint8
}

// Options shape the old agent.
type Options struct {
	// Dir holds the socket, certificates and written configs (default
	// t.TempDir()).
	Dir string
	// TCP serves on 127.0.0.1 instead of a unix socket (listen.mode tcp);
	// Authenticated adds mutual TLS (listen.authenticated).
	TCP, Authenticated bool
	// Version, Commit and BuildTime are reported in GetStatus.
	Version, Commit string
	BuildTime       time.Time
	// Steps default to the old default-config.yaml's 45 °C 40 %, 55 °C 80 %.
	Steps []Step
	// CriticalThreshold is critical_temperature_threshold (default 60).
	CriticalThreshold uint
	// Stealth is stealth_mode.
	Stealth bool
	// Temperature is the SoC temperature at the start (default 42.7 °C).
	Temperature float64
	// Predecessor serves the API of uptime-industries/compute-blade-agent at
	// 485f5ac instead: no SetFanSpeedAuto, and a StatusResponse with fields
	// 1–6 only (no fan percent, automatic flag, threshold, curve, version).
	Predecessor bool
}

// DefaultVersion is what an Agent reports without Options.Version.
const DefaultVersion = "v0.11.2"

// Agent is a running old agent.
type Agent struct {
	// Socket is the unix socket (without TCP); Addr is the TCP address.
	Socket, Addr string
	// Dir holds ca.pem, the certificates and written configs.
	Dir string
	o   Options

	events chan event

	mu             sync.Mutex
	identify       bool
	identifyDone   chan struct{}
	critical       bool
	stealth        bool
	override       *uint8
	temperature    float64
	rpm            float64
	poePlus        bool
	clientCertPEM  []byte
	clientKeyPEM   []byte
	caPEM          []byte
	calls          map[string]int
	waitersStarted int
}

type event int

const (
	evIdentify event = iota + 1
	evIdentifyConfirm
	evCritical
	evCriticalReset
	evEdgeButton
)

// Start runs the old agent until the test ends.
func Start(t testing.TB, o Options) *Agent {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	if o.Version == "" {
		o.Version = DefaultVersion
	}
	if o.Commit == "" {
		o.Commit = "2c1e6a0d5b1f4e7a9c3b8d6f0e2a4c6b8d0f1a3c"
	}
	if o.BuildTime.IsZero() {
		o.BuildTime = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	}
	if o.Steps == nil {
		o.Steps = []Step{{45, 40}, {55, 80}}
	}
	// The old fan controller sorts its steps in place.
	o.Steps = append([]Step(nil), o.Steps...)
	sort.Slice(o.Steps, func(i, j int) bool { return o.Steps[i].Temperature < o.Steps[j].Temperature })
	if o.CriticalThreshold == 0 {
		o.CriticalThreshold = 60
	}
	if o.Temperature == 0 {
		o.Temperature = 42.7
	}
	a := &Agent{Dir: o.Dir, o: o, events: make(chan event, 10), identifyDone: make(chan struct{}),
		stealth: o.Stealth, temperature: o.Temperature, rpm: 2412, calls: map[string]int{}}

	var opts []grpc.ServerOption
	var ln net.Listener
	var err error
	if o.TCP {
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		a.Addr = ln.Addr().String()
		if o.Authenticated {
			tlsCfg, err := a.makeCertificates()
			if err != nil {
				t.Fatal(err)
			}
			opts = append(opts, grpc.Creds(credentials.NewTLS(tlsCfg)))
		}
	} else {
		a.Socket = filepath.Join(o.Dir, "compute-blade-agent.sock")
		if ln, err = net.Listen("unix", a.Socket); err != nil {
			t.Fatal(err)
		}
	}
	srv := grpc.NewServer(opts...)
	desc := bladeapiv1.BladeAgentService_ServiceDesc
	if o.Predecessor {
		// A method the service does not describe is "unknown method" to
		// grpc-go, as it is to a server built from the older proto.
		var methods []grpc.MethodDesc
		for _, m := range desc.Methods {
			if m.MethodName != "SetFanSpeedAuto" {
				methods = append(methods, m)
			}
		}
		desc.Methods = methods
	}
	srv.RegisterService(&desc, &service{a: a})

	ctx, cancel := context.WithCancel(context.Background())
	loopDone := make(chan struct{})
	go func() { defer close(loopDone); a.run(ctx) }()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Stop()
		cancel()
		<-loopDone
		if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Errorf("old agent: serve: %v", err)
		}
	})
	return a
}

// run is the old agent's event handler loop.
func (a *Agent) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-a.events:
			a.handle(ev)
		}
	}
}

func (a *Agent) handle(ev event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch ev {
	case evIdentify:
		a.identify = true
	case evIdentifyConfirm:
		a.identify = false
		close(a.identifyDone)
		a.identifyDone = make(chan struct{})
	case evCritical:
		a.critical, a.identify = true, false
		full := uint8(100)
		a.override = &full
		a.stealth = false
	case evCriticalReset:
		a.critical = false
		a.override = nil
		a.stealth = a.o.Stealth
	case evEdgeButton:
		next := evIdentify
		if a.identify {
			next = evIdentifyConfirm
		}
		select {
		case a.events <- next:
		default: // dropped due to backlog, as the old agent does
		}
	}
}

// enqueue is EmitEvent's half: it returns once the event is queued.
func (a *Agent) enqueue(ctx context.Context, ev event) error {
	select {
	case a.events <- ev:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// PressButton presses the edge button: it toggles identify.
func (a *Agent) PressButton() {
	a.events <- evEdgeButton
}

// SetTemperature sets the SoC temperature. The old agent does not enter
// critical mode by itself; EmitEvent(CRITICAL) does.
func (a *Agent) SetTemperature(c float64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.temperature = c
}

// SetPoEPlus sets the PoE 802.3at detect input.
func (a *Agent) SetPoEPlus(on bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.poePlus = on
}

// State is what the old agent holds.
type State struct {
	Identify, Critical, Stealth bool
	// FanOverride is the manual (or critical) percent; nil follows the curve.
	FanOverride *uint8
	// Pending is how many queued events the loop has not handled yet.
	Pending int
}

// State returns the agent's state.
func (a *Agent) State() State {
	a.mu.Lock()
	defer a.mu.Unlock()
	var o *uint8
	if a.override != nil {
		v := *a.override
		o = &v
	}
	return State{Identify: a.identify, Critical: a.critical, Stealth: a.stealth, FanOverride: o, Pending: len(a.events)}
}

// Calls counts the RPCs served by method name.
func (a *Agent) Calls(method string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls[method]
}

// Waiting reports how many WaitForIdentifyConfirm calls have started.
func (a *Agent) Waiting() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.waitersStarted
}

func (a *Agent) count(method string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls[method]++
}

// fanPercent is fancontroller.GetFanSpeedPercent.
func (a *Agent) fanPercent(temp float64) uint8 {
	if a.override != nil {
		return *a.override
	}
	s := a.o.Steps
	if temp <= s[0].Temperature {
		return s[0].Percent
	}
	last := len(s) - 1
	if temp >= s[last].Temperature {
		return s[last].Percent
	}
	for i := 0; i < last; i++ {
		if temp >= s[i].Temperature && temp < s[i+1].Temperature {
			slope := float64(s[i+1].Percent-s[i].Percent) / (s[i+1].Temperature - s[i].Temperature)
			return uint8(float64(s[i].Percent) + slope*(temp-s[i].Temperature))
		}
	}
	return s[last].Percent
}

type service struct {
	bladeapiv1.UnimplementedBladeAgentServiceServer
	a *Agent
}

func (s *service) EmitEvent(ctx context.Context, req *bladeapiv1.EmitEventRequest) (*emptypb.Empty, error) {
	s.a.count("EmitEvent")
	var ev event
	switch req.GetEvent() {
	case bladeapiv1.Event_IDENTIFY:
		ev = evIdentify
	case bladeapiv1.Event_IDENTIFY_CONFIRM:
		ev = evIdentifyConfirm
	case bladeapiv1.Event_CRITICAL:
		ev = evCritical
	case bladeapiv1.Event_CRITICAL_RESET:
		ev = evCriticalReset
	default:
		return nil, status.Errorf(codes.InvalidArgument, "invalid event type")
	}
	if err := s.a.enqueue(ctx, ev); err != nil {
		return &emptypb.Empty{}, err
	}
	return &emptypb.Empty{}, nil
}

func (s *service) WaitForIdentifyConfirm(ctx context.Context, _ *emptypb.Empty) (*emptypb.Empty, error) {
	s.a.count("WaitForIdentifyConfirm")
	s.a.mu.Lock()
	done := s.a.identifyDone
	s.a.waitersStarted++
	s.a.mu.Unlock()
	select {
	case <-ctx.Done():
		return &emptypb.Empty{}, ctx.Err()
	case <-done:
		return &emptypb.Empty{}, nil
	}
}

func (s *service) SetFanSpeed(_ context.Context, req *bladeapiv1.SetFanSpeedRequest) (*emptypb.Empty, error) {
	s.a.count("SetFanSpeed")
	s.a.mu.Lock()
	defer s.a.mu.Unlock()
	if s.a.critical {
		// A humane error, not a gRPC status: clients see codes.Unknown.
		return &emptypb.Empty{}, errors.New("cannot set fan speed while the blade is in a critical state")
	}
	p := uint8(req.GetPercent()) // no range check in the old agent
	s.a.override = &p
	return &emptypb.Empty{}, nil
}

func (s *service) SetFanSpeedAuto(context.Context, *emptypb.Empty) (*emptypb.Empty, error) {
	s.a.count("SetFanSpeedAuto")
	s.a.mu.Lock()
	defer s.a.mu.Unlock()
	s.a.override = nil // also in critical mode: the old agent let the fan drop
	return &emptypb.Empty{}, nil
}

func (s *service) SetStealthMode(_ context.Context, req *bladeapiv1.StealthModeRequest) (*emptypb.Empty, error) {
	s.a.count("SetStealthMode")
	s.a.mu.Lock()
	defer s.a.mu.Unlock()
	if s.a.critical {
		return &emptypb.Empty{}, errors.New("cannot set stealth mode while the blade is in a critical state")
	}
	s.a.stealth = req.GetEnable()
	return &emptypb.Empty{}, nil
}

func (s *service) GetStatus(context.Context, *emptypb.Empty) (*bladeapiv1.StatusResponse, error) {
	s.a.count("GetStatus")
	a := s.a
	a.mu.Lock()
	defer a.mu.Unlock()
	steps := make([]*bladeapiv1.FanCurveStep, len(a.o.Steps))
	for i, st := range a.o.Steps {
		steps[i] = &bladeapiv1.FanCurveStep{Temperature: int64(st.Temperature), Percent: uint32(st.Percent)}
	}
	power := bladeapiv1.PowerStatus_POE_OR_USBC
	if a.poePlus {
		power = bladeapiv1.PowerStatus_POE_802_AT
	}
	if a.o.Predecessor {
		return &bladeapiv1.StatusResponse{StealthMode: a.stealth, IdentifyActive: a.identify, CriticalActive: a.critical,
			Temperature: int64(a.temperature), FanRpm: int64(a.rpm), PowerStatus: power}, nil
	}
	return &bladeapiv1.StatusResponse{
		StealthMode:                  a.stealth,
		IdentifyActive:               a.identify,
		CriticalActive:               a.critical,
		Temperature:                  int64(a.temperature),
		FanRpm:                       int64(a.rpm),
		FanPercent:                   uint32(a.fanPercent(a.temperature)),
		FanSpeedAutomatic:            a.override == nil,
		PowerStatus:                  power,
		FanCurveSteps:                steps,
		CriticalTemperatureThreshold: int64(a.o.CriticalThreshold),
		Version:                      &bladeapiv1.VersionInfo{Version: a.o.Version, Commit: a.o.Commit, Date: a.o.BuildTime.Unix()},
	}, nil
}

// makeCertificates makes the old agent's CA, server and client
// certificates and returns the server's TLS config.
func (a *Agent) makeCertificates() (*tls.Config, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{Organization: []string{"Compute Blade CA"}, CommonName: "Compute Blade Agent Root CA"},
		NotBefore:             now,
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	issue := func(cn string, usage x509.ExtKeyUsage) ([]byte, []byte, error) {
		key, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		host, _ := os.Hostname()
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(time.Now().UnixNano()),
			Subject:      pkix.Name{CommonName: cn},
			NotBefore:    now, NotAfter: now.Add(365 * 24 * time.Hour),
			KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			ExtKeyUsage: []x509.ExtKeyUsage{usage},
			DNSNames:    []string{"localhost", host, host + ".local"},
		}
		if usage == x509.ExtKeyUsageServerAuth {
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			return nil, nil, err
		}
		kb, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, nil, err
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), nil
	}
	serverCert, serverKey, err := issue("Compute Blade Agent", x509.ExtKeyUsageServerAuth)
	if err != nil {
		return nil, err
	}
	a.clientCertPEM, a.clientKeyPEM, err = issue("localhost", x509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, err
	}
	a.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	for name, b := range map[string][]byte{"ca.pem": a.caPEM, "server.pem": serverCert, "server-key.pem": serverKey} {
		if err := os.WriteFile(filepath.Join(a.Dir, name), b, 0o600); err != nil {
			return nil, err
		}
	}
	pair, err := tls.X509KeyPair(serverCert, serverKey)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}, nil
}

// Credentials are the client certificate, key and CA the old agent made
// (PEM), for an authenticated TCP agent.
func (a *Agent) Credentials() (caPEM, certPEM, keyPEM []byte) {
	return a.caPEM, a.clientCertPEM, a.clientKeyPEM
}

// OldBladectlEntry is one blade of the old bladectl's config, as the old
// agent writes it: server localhost:<port> for TCP, the bare socket path
// for a unix socket, and the cert block for an authenticated agent.
type OldBladectlEntry struct {
	Name  string `yaml:"name"`
	Blade struct {
		Server string `yaml:"server"`
		Cert   struct {
			CertificateAuthorityData string `yaml:"certificate-authority-data,omitempty"`
			ClientCertificateData    string `yaml:"client-certificate-data,omitempty"`
			ClientKeyData            string `yaml:"client-key-data,omitempty"`
		} `yaml:"cert,omitempty"`
	} `yaml:"blade"`
}

// BladectlEntry is the entry the old agent writes to the old bladectl's
// config for itself, named name (the old agent uses its hostname).
func (a *Agent) BladectlEntry(name string) OldBladectlEntry {
	var e OldBladectlEntry
	e.Name = name
	e.Blade.Server = a.Socket
	if a.o.TCP {
		_, port, _ := net.SplitHostPort(a.Addr)
		e.Blade.Server = "localhost:" + port
	}
	if a.o.TCP && a.o.Authenticated {
		b64 := base64.StdEncoding.EncodeToString
		e.Blade.Cert.CertificateAuthorityData = b64(a.caPEM)
		e.Blade.Cert.ClientCertificateData = b64(a.clientCertPEM)
		e.Blade.Cert.ClientKeyData = b64(a.clientKeyPEM)
	}
	return e
}

// WriteBladectlConfig writes an old bladectl config with entries, in the
// old agent's format (yaml.v3 of cmd/bladectl/config.BladectlConfig).
func WriteBladectlConfig(path, current string, entries ...OldBladectlEntry) error {
	doc := struct {
		Blades       []OldBladectlEntry `yaml:"blades"`
		CurrentBlade string             `yaml:"current-blade"`
	}{entries, current}
	b, err := yaml.Marshal(&doc)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// Dial connects the way the old bladectl does (cmd/bladectl/cmd_root.go
// buildClient): mutual TLS when the entry has all three certificate
// fields, with the host of the server as the TLS server name; otherwise
// without TLS. It is how tests check that an exported config works for
// the old bladectl.
func Dial(server, caB64, certB64, keyB64 string) (bladeapiv1.BladeAgentServiceClient, func() error, error) {
	opts := []grpc.DialOption{}
	if caB64 != "" && certB64 != "" && keyB64 != "" {
		dec := base64.StdEncoding.DecodeString
		ca, err1 := dec(caB64)
		cert, err2 := dec(certB64)
		key, err3 := dec(keyB64)
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, nil, err
		}
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			return nil, nil, fmt.Errorf("client cert/key pair: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, nil, errors.New("CA certificate")
		}
		name := server
		if h, _, err := net.SplitHostPort(server); err == nil {
			name = h
		}
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, ServerName: name})))
	} else {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	conn, err := grpc.NewClient(server, opts...)
	if err != nil {
		return nil, nil, err
	}
	return bladeapiv1.NewBladeAgentServiceClient(conn), conn.Close, nil
}
