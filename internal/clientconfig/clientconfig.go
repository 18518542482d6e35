// Package clientconfig reads and writes bladectl's kubeconfig-style file of
// named blades and turns one entry into a gRPC connection: a unix socket,
// or TCP with mutual TLS (there is no plaintext TCP).
package clientconfig

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"sigs.k8s.io/yaml"

	"github.com/kubeblade/kubeblade/internal/atomicfile"
	"github.com/kubeblade/kubeblade/internal/pki"
)

// APIVersion and Kind head every file this package writes.
const (
	APIVersion = "bladectl.kubeblade.io/v1alpha1"
	Kind       = "Config"
	// EnvVar overrides DefaultPath.
	EnvVar = "BLADECTL_CONFIG"
	// LocalBlade is the name of the implicit blade behind the default
	// socket, used when no config file exists.
	LocalBlade = "local"
	// DefaultSocket is the agent's default unix socket.
	DefaultSocket = "/run/kubeblade/agent.sock"
)

// Config is the file: named blades and the one used when none is named.
type Config struct {
	APIVersion   string       `json:"apiVersion"`
	Kind         string       `json:"kind"`
	CurrentBlade string       `json:"current-blade,omitempty"`
	Blades       []NamedBlade `json:"blades"`
}

// NamedBlade is one entry of the file.
type NamedBlade struct {
	Name  string `json:"name"`
	Blade Blade  `json:"blade"`
}

// Blade says how to reach one agent.
type Blade struct {
	// Server is "unix:///path/to/agent.sock" or "host:port" (mutual TLS).
	Server string `json:"server"`
	// TLSServerName overrides the name checked in the agent's certificate.
	TLSServerName string `json:"tls-server-name,omitempty"`
	// Files or inline PEM (the *-data fields, base64 as in kubeconfig).
	CertificateAuthority     string `json:"certificate-authority,omitempty"`
	CertificateAuthorityData string `json:"certificate-authority-data,omitempty"`
	ClientCertificate        string `json:"client-certificate,omitempty"`
	ClientCertificateData    string `json:"client-certificate-data,omitempty"`
	ClientKey                string `json:"client-key,omitempty"`
	ClientKeyData            string `json:"client-key-data,omitempty"`
}

// DefaultPath is $BLADECTL_CONFIG, else ~/.config/kubeblade/bladectl.yaml.
func DefaultPath(getenv func(string) string) string {
	if p := getenv(EnvVar); p != "" {
		return p
	}
	dir := getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home := getenv("HOME")
		if home == "" {
			home, _ = os.UserHomeDir()
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "kubeblade", "bladectl.yaml")
}

// Default is the config used when no file exists: the local agent's
// default socket, so bladectl works on a blade out of the box.
func Default() *Config {
	return &Config{
		APIVersion:   APIVersion,
		Kind:         Kind,
		CurrentBlade: LocalBlade,
		Blades:       []NamedBlade{{Name: LocalBlade, Blade: Blade{Server: "unix://" + DefaultSocket}}},
	}
}

// Load reads path. A missing file is not an error: it yields Default()
// and exists=false.
func Load(path string) (cfg *Config, exists bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Default(), false, nil
	}
	if err != nil {
		return nil, false, err
	}
	cfg, err = Parse(b)
	if err != nil {
		return nil, true, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, true, nil
}

// Parse decodes a config file's contents, refusing unknown keys.
func Parse(b []byte) (*Config, error) {
	cfg := &Config{}
	if err := yaml.UnmarshalStrict(b, cfg); err != nil {
		return nil, err
	}
	if cfg.Kind != "" && cfg.Kind != Kind {
		return nil, fmt.Errorf("kind is %q, want %q", cfg.Kind, Kind)
	}
	seen := map[string]bool{}
	for _, b := range cfg.Blades {
		if b.Name == "" {
			return nil, errors.New("a blade has no name")
		}
		if seen[b.Name] {
			return nil, fmt.Errorf("blade %q is listed twice", b.Name)
		}
		seen[b.Name] = true
	}
	return cfg, nil
}

// Save writes cfg to path atomically with mode 0600: it may hold a
// client key.
func Save(path string, cfg *Config) error {
	b, err := Marshal(cfg)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.Write(path, b, 0o600)
}

// Marshal encodes cfg as YAML, setting its apiVersion and kind.
func Marshal(cfg *Config) ([]byte, error) {
	cfg.APIVersion, cfg.Kind = APIVersion, Kind
	return yaml.Marshal(cfg)
}

// ForAdmin is the file an agent writes for its local admin: the blade,
// named host, over mutual TLS at serverHost:port with the credentials
// inline, so the admin can copy the one file to a workstation, and, with a
// socket path, "<host>-local" over the unix socket.
func ForAdmin(host, serverHost string, port int, socketPath string, caPEM, certPEM, keyPEM []byte) ([]byte, error) {
	b64 := base64.StdEncoding.EncodeToString
	cfg := &Config{CurrentBlade: host}
	cfg.Set(host, Blade{
		Server:                   net.JoinHostPort(serverHost, strconv.Itoa(port)),
		CertificateAuthorityData: b64(caPEM),
		ClientCertificateData:    b64(certPEM),
		ClientKeyData:            b64(keyPEM),
	})
	if socketPath != "" {
		cfg.Set(host+"-local", Blade{Server: "unix://" + socketPath})
	}
	return Marshal(cfg)
}

// Lookup returns the named blade.
func (c *Config) Lookup(name string) (Blade, bool) {
	for _, b := range c.Blades {
		if b.Name == name {
			return b.Blade, true
		}
	}
	return Blade{}, false
}

// Names lists the blades in file order.
func (c *Config) Names() []string {
	out := make([]string, 0, len(c.Blades))
	for _, b := range c.Blades {
		out = append(out, b.Name)
	}
	return out
}

// Set adds or replaces a blade.
func (c *Config) Set(name string, b Blade) {
	for i := range c.Blades {
		if c.Blades[i].Name == name {
			c.Blades[i].Blade = b
			return
		}
	}
	c.Blades = append(c.Blades, NamedBlade{Name: name, Blade: b})
}

// Remove deletes a blade; it reports whether it existed.
func (c *Config) Remove(name string) bool {
	i := slices.IndexFunc(c.Blades, func(b NamedBlade) bool { return b.Name == name })
	if i < 0 {
		return false
	}
	c.Blades = slices.Delete(c.Blades, i, i+1)
	if c.CurrentBlade == name {
		c.CurrentBlade = ""
	}
	return true
}

// IsUnix reports whether the blade is reached over a unix socket.
func (b Blade) IsUnix() bool { return strings.HasPrefix(b.Server, "unix:") }

// SocketPath is the socket of a unix blade.
func (b Blade) SocketPath() string {
	p := strings.TrimPrefix(b.Server, "unix:")
	return strings.TrimPrefix(p, "//")
}

// Validate checks that the entry can be dialled.
func (b Blade) Validate() error {
	switch {
	case b.Server == "":
		return errors.New("no server address")
	case b.IsUnix():
		if b.SocketPath() == "" {
			return errors.New("unix server address has no path")
		}
		return nil
	case strings.Contains(b.Server, "://"):
		return fmt.Errorf("server %q: use unix:///path or host:port (TCP is always mutual TLS)", b.Server)
	}
	if b.CertificateAuthority == "" && b.CertificateAuthorityData == "" {
		return errors.New("TCP needs a certificate authority (certificate-authority or certificate-authority-data)")
	}
	if (b.ClientCertificate == "" && b.ClientCertificateData == "") || (b.ClientKey == "" && b.ClientKeyData == "") {
		return errors.New("TCP needs a client certificate and key (mutual TLS)")
	}
	return nil
}

// Credentials loads the blade's TLS material. Relative file paths are
// resolved against baseDir (the config file's directory).
func (b Blade) Credentials(baseDir string) (caPEM []byte, client pki.KeyPair, err error) {
	if caPEM, err = material(b.CertificateAuthorityData, b.CertificateAuthority, baseDir); err != nil {
		return nil, client, fmt.Errorf("certificate authority: %w", err)
	}
	if client.CertPEM, err = material(b.ClientCertificateData, b.ClientCertificate, baseDir); err != nil {
		return nil, client, fmt.Errorf("client certificate: %w", err)
	}
	if client.KeyPEM, err = material(b.ClientKeyData, b.ClientKey, baseDir); err != nil {
		return nil, client, fmt.Errorf("client key: %w", err)
	}
	return caPEM, client, nil
}

func material(data, file, baseDir string) ([]byte, error) {
	if data != "" {
		return base64.StdEncoding.DecodeString(data)
	}
	if file == "" {
		return nil, nil
	}
	if !filepath.IsAbs(file) && baseDir != "" {
		file = filepath.Join(baseDir, file)
	}
	return os.ReadFile(file)
}

// Dial connects to the blade lazily: errors from the network show up on
// the first call. baseDir resolves relative certificate paths.
func (b Blade) Dial(baseDir string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	if err := b.Validate(); err != nil {
		return nil, err
	}
	if b.IsUnix() {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
		// The authority of a unix target is not a host name; "localhost"
		// keeps HTTP/2 and any proxies happy.
		opts = append(opts, grpc.WithAuthority("localhost"))
		return grpc.NewClient("unix://"+b.SocketPath(), opts...)
	}
	caPEM, client, err := b.Credentials(baseDir)
	if err != nil {
		return nil, err
	}
	tlsCfg, err := pki.ClientTLSConfig(caPEM, client, b.TLSServerName)
	if err != nil {
		return nil, err
	}
	opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(tlsCfg)))
	return grpc.NewClient("passthrough:///"+b.Server, opts...)
}
