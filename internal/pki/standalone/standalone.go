// Package standalone issues the agent's mutual-TLS certificates without
// Kubernetes: a CA, a serving certificate and an admin client certificate
// kept in the agent's state directory, renewed before they expire, plus a
// ready client config for the local admin, in the format its caller gives
// (agentd: bladectl's). It is the pki.CertificateSource of an agent that
// runs outside a cluster.
package standalone

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/utils/clock"

	"github.com/kubeblade/kubeblade/internal/atomicfile"
	"github.com/kubeblade/kubeblade/internal/pki"
)

// File names inside Options.Dir.
const (
	CACert       = "ca.crt"
	CAKey        = "ca.key"
	ServerCert   = "server.crt"
	ServerKey    = "server.key"
	AdminCert    = "admin.crt"
	AdminKey     = "admin.key"
	BladectlFile = "bladectl.yaml"
	// CheckInterval is how often Run looks for certificates due for renewal.
	CheckInterval = time.Hour
)

// Options configure an Issuer.
type Options struct {
	// Dir holds keys and certificates (created 0700; keys are 0600).
	Dir string
	// Hostname names the blade; default os.Hostname().
	Hostname string
	// Addresses are the IPs the serving certificate covers; default the
	// addresses of the machine's interfaces.
	Addresses func() ([]net.IP, error)
	// ExtraSANs are extra DNS names or IPs for the serving certificate.
	ExtraSANs []string
	// Port and SocketPath go into the client config written for the admin.
	Port       int
	SocketPath string
	// ServerHost is the host that config dials (default Hostname): the
	// bind address when the listener is bound to one, because a Raspberry
	// Pi OS hostname often resolves to 127.0.1.1, where nothing listens then.
	ServerHost string
	// ClientConfig renders the admin's client config file (BladectlFile);
	// nil writes none.
	ClientConfig func(Admin) ([]byte, error)
	Clock        clock.WithTicker
	Logger       *slog.Logger
	// Lifetimes override pki.CALifetime and pki.LeafLifetime (tests).
	CALifetime, LeafLifetime time.Duration
}

// Admin is what the admin's client config holds: how to reach the blade
// and the credentials to do it with.
type Admin struct {
	// Host names the blade; ServerHost is the host to dial (Options).
	Host, ServerHost string
	Port             int
	SocketPath       string
	// CAPEM is the CA the blade's serving certificate chains to.
	CAPEM []byte
	// Client is the admin's client certificate and key.
	Client pki.KeyPair
}

// Issuer owns the certificates in Dir.
type Issuer struct {
	o Options
	pki.Holder
}

var _ pki.CertificateSource = (*Issuer)(nil)

// New loads the certificates in o.Dir, creating or renewing what is
// missing, expiring or no longer covers the blade's names.
func New(o Options) (*Issuer, error) {
	if o.Dir == "" {
		return nil, errors.New("standalone issuer: no state directory")
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Hostname == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("hostname: %w", err)
		}
		o.Hostname = h
	}
	if o.Addresses == nil {
		o.Addresses = InterfaceAddresses
	}
	i := &Issuer{o: o}
	if err := i.Ensure(); err != nil {
		return nil, err
	}
	return i, nil
}

// BladectlConfigPath is where the admin's bladectl config is written.
func (i *Issuer) BladectlConfigPath() string { return filepath.Join(i.o.Dir, BladectlFile) }

// Run re-checks the certificates every CheckInterval until ctx ends. A
// failed renewal is logged and retried; the current certificates stay in use.
func (i *Issuer) Run(ctx context.Context) error {
	t := i.o.Clock.NewTicker(CheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
			if err := i.Ensure(); err != nil {
				i.o.Logger.Error("certificate renewal failed; will retry", "err", err)
			}
		}
	}
}

// Ensure creates or renews whatever needs it and reloads the result.
func (i *Issuer) Ensure() error {
	if err := os.MkdirAll(i.o.Dir, 0o700); err != nil {
		return fmt.Errorf("certificate directory: %w", err)
	}
	now := i.o.Clock.Now()
	ca, caPEM, renewedCA, err := i.ensureCA(now)
	if err != nil {
		return err
	}
	dns, ips, err := i.sans()
	if err != nil {
		return err
	}
	serverPair, err := i.ensureLeaf(ca, ServerCert, ServerKey, renewedCA, now, pki.Request{
		CommonName: i.o.Hostname, Usage: pki.UsageServer, DNSNames: dns, IPAddresses: ips,
		Organization: []string{"kubeblade"}, Lifetime: i.o.LeafLifetime,
	})
	if err != nil {
		return fmt.Errorf("serving certificate: %w", err)
	}
	adminPair, err := i.ensureLeaf(ca, AdminCert, AdminKey, renewedCA, now, pki.Request{
		CommonName: "kubeblade-admin", Usage: pki.UsageClient,
		Organization: []string{"kubeblade:admins"}, Lifetime: i.o.LeafLifetime,
	})
	if err != nil {
		return fmt.Errorf("admin client certificate: %w", err)
	}
	if err := i.writeClientConfig(caPEM, adminPair); err != nil {
		return fmt.Errorf("bladectl config: %w", err)
	}
	serving, err := tls.X509KeyPair(serverPair.CertPEM, serverPair.KeyPEM)
	if err != nil {
		return fmt.Errorf("serving certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	i.Set(&serving, pool)
	return nil
}

func (i *Issuer) path(name string) string { return filepath.Join(i.o.Dir, name) }

func (i *Issuer) ensureCA(now time.Time) (*pki.CA, []byte, bool, error) {
	kp, err := i.read(CACert, CAKey)
	if err == nil {
		ca, err := pki.LoadCA(kp)
		if err == nil && !pki.NeedsRenewal(ca.Cert, now) {
			return ca, kp.CertPEM, false, nil
		}
		if err != nil {
			i.o.Logger.Warn("CA in the state directory is unusable; creating a new one", "err", err)
		} else {
			// Every client config made from the old CA stops working once
			// it expires; the new admin config is written below.
			i.o.Logger.Warn("CA is close to expiry; creating a new one and reissuing all certificates",
				"notAfter", ca.Cert.NotAfter)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, false, fmt.Errorf("reading CA: %w", err)
	}
	ca, kp, err := pki.NewCA("kubeblade-agent-ca@"+i.o.Hostname, now, i.o.CALifetime)
	if err != nil {
		return nil, nil, false, err
	}
	if err := i.write(CACert, CAKey, kp); err != nil {
		return nil, nil, false, err
	}
	i.o.Logger.Info("created the agent's certificate authority", "dir", i.o.Dir, "notAfter", ca.Cert.NotAfter)
	return ca, kp.CertPEM, true, nil
}

// ensureLeaf returns the key pair in certName/keyName, issuing a new one
// when it is missing, signed by another CA, due for renewal or missing a
// name the request asks for.
func (i *Issuer) ensureLeaf(ca *pki.CA, certName, keyName string, force bool, now time.Time, r pki.Request) (pki.KeyPair, error) {
	if !force {
		kp, err := i.read(certName, keyName)
		if err == nil {
			reason := i.stale(ca, kp, now, r)
			if reason == "" {
				return kp, nil
			}
			i.o.Logger.Info("reissuing certificate", "file", certName, "reason", reason)
		} else if !errors.Is(err, fs.ErrNotExist) {
			i.o.Logger.Warn("certificate unreadable; reissuing", "file", certName, "err", err)
		}
	}
	kp, err := ca.Issue(r, now)
	if err != nil {
		return pki.KeyPair{}, err
	}
	if err := i.write(certName, keyName, kp); err != nil {
		return pki.KeyPair{}, err
	}
	cert, _ := pki.ParseCertificate(kp.CertPEM)
	i.o.Logger.Info("issued certificate", "file", certName, "subject", r.CommonName, "notAfter", cert.NotAfter)
	return kp, nil
}

func (i *Issuer) stale(ca *pki.CA, kp pki.KeyPair, now time.Time, r pki.Request) string {
	if _, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM); err != nil {
		return "key pair unusable: " + err.Error()
	}
	cert, err := pki.ParseCertificate(kp.CertPEM)
	if err != nil {
		return "unparsable: " + err.Error()
	}
	if err := cert.CheckSignatureFrom(ca.Cert); err != nil {
		return "not signed by the current CA"
	}
	if pki.NeedsRenewal(cert, now) {
		return "less than a third of its lifetime remains"
	}
	for _, n := range r.DNSNames {
		if !slices.Contains(cert.DNSNames, n) {
			return "does not cover " + n
		}
	}
	for _, ip := range r.IPAddresses {
		if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
			return "does not cover " + ip.String()
		}
	}
	return ""
}

// sans are the names the serving certificate must cover: the hostname,
// localhost, the interface addresses and the configured extras.
func (i *Issuer) sans() ([]string, []net.IP, error) {
	dns := []string{i.o.Hostname, "localhost"}
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	addrs, err := i.o.Addresses()
	if err != nil {
		return nil, nil, fmt.Errorf("interface addresses: %w", err)
	}
	ips = append(ips, addrs...)
	for _, s := range i.o.ExtraSANs {
		if ip := net.ParseIP(s); ip != nil {
			ips = append(ips, ip)
		} else if s != "" {
			dns = append(dns, s)
		}
	}
	slices.Sort(dns)
	dns = slices.Compact(dns)
	var uniq []net.IP
	for _, ip := range ips {
		if !slices.ContainsFunc(uniq, ip.Equal) {
			uniq = append(uniq, ip)
		}
	}
	return dns, uniq, nil
}

// InterfaceAddresses lists the machine's unicast addresses, loopback and
// link-local excluded (link-local IPv6 needs a zone a certificate cannot hold).
func InterfaceAddresses() ([]net.IP, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	var out []net.IP
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || n.IP.IsLoopback() || n.IP.IsLinkLocalUnicast() {
			continue
		}
		out = append(out, n.IP)
	}
	return out, nil
}

func (i *Issuer) read(certName, keyName string) (pki.KeyPair, error) {
	c, err := os.ReadFile(i.path(certName))
	if err != nil {
		return pki.KeyPair{}, err
	}
	k, err := os.ReadFile(i.path(keyName))
	if err != nil {
		return pki.KeyPair{}, err
	}
	return pki.KeyPair{CertPEM: c, KeyPEM: k}, nil
}

// write stores the key first: a crash between the two writes leaves a
// mismatched pair, which the next start detects and reissues.
func (i *Issuer) write(certName, keyName string, kp pki.KeyPair) error {
	if err := atomicfile.Write(i.path(keyName), kp.KeyPEM, 0o600); err != nil {
		return err
	}
	return atomicfile.Write(i.path(certName), kp.CertPEM, 0o644)
}

// writeClientConfig writes the admin's client config when it changed.
func (i *Issuer) writeClientConfig(caPEM []byte, admin pki.KeyPair) error {
	if i.o.ClientConfig == nil {
		return nil
	}
	server := i.o.ServerHost
	if server == "" {
		server = i.o.Hostname
	}
	want, err := i.o.ClientConfig(Admin{Host: i.o.Hostname, ServerHost: server, Port: i.o.Port, SocketPath: i.o.SocketPath, CAPEM: caPEM, Client: admin})
	if err != nil {
		return err
	}
	if have, err := os.ReadFile(i.BladectlConfigPath()); err == nil && string(have) == string(want) {
		return nil
	}
	return atomicfile.Write(i.BladectlConfigPath(), want, 0o600)
}
