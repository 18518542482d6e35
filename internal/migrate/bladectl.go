package migrate

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/kubeblade/kubeblade/internal/clientconfig"
)

// OldBladectlConfig is where the old bladectl reads its config, under the
// user's home directory (viper: $HOME/.config/bladectl, config.yaml); the
// old agent also writes one there for the user it runs as.
const OldBladectlConfig = ".config/bladectl/config.yaml"

// The old bladectl's file (cmd/bladectl/config/config.go). bladectl reads
// it with viper; the old agent writes it with yaml.v3 and these tags, in
// this order.
type oldBladectlConfig struct {
	Blades       []oldNamedBlade `yaml:"blades"`
	CurrentBlade string          `yaml:"current-blade"`
}

type oldNamedBlade struct {
	Name  string   `yaml:"name"`
	Blade oldBlade `yaml:"blade"`
}

type oldBlade struct {
	Server      string  `yaml:"server"`
	Certificate oldCert `yaml:"cert,omitempty"`
}

type oldCert struct {
	CertificateAuthorityData string `yaml:"certificate-authority-data,omitempty"`
	ClientCertificateData    string `yaml:"client-certificate-data,omitempty"`
	ClientKeyData            string `yaml:"client-key-data,omitempty"`
}

// IsOldBladectlConfig reports whether raw is the old bladectl's format
// rather than kubeblade's, by its structure. kubeblade writes an apiVersion
// and kind into every file (clientconfig.Marshal); the old agent writes
// neither (internal/agent/api_certificates.go of compute-blade-agent
// 422cf18555ed2a7be290de6d82e7246209f73fb6 marshals
// cmd/bladectl/config.BladectlConfig: blades: [{name, blade: {server,
// cert}}], current-blade), and leaves the cert block out altogether in
// unix-socket mode and in plaintext TCP mode, writing a bare socket path
// or localhost:<port> as the server. So a file without apiVersion and kind
// whose blades hold nothing but server and cert is the old format, unless
// every server is a unix:// URL without certificates, which both formats
// read alike. A blade with one of kubeblade's own keys (tls-server-name,
// certificate-authority-data, …) makes it kubeblade's, whose strict parser
// then says what is wrong.
func IsOldBladectlConfig(raw []byte) bool {
	var probe struct {
		APIVersion *string `yaml:"apiVersion"`
		Kind       *string `yaml:"kind"`
		Blades     []struct {
			Blade map[string]any `yaml:"blade"`
		} `yaml:"blades"`
	}
	if err := yaml.Unmarshal(raw, &probe); err != nil {
		// Let the old format's parser report where the YAML breaks.
		return !strings.Contains(string(raw), "apiVersion:")
	}
	if probe.APIVersion != nil || probe.Kind != nil {
		return false
	}
	onlyUnixURLs := true
	for _, b := range probe.Blades {
		for k, v := range b.Blade {
			switch strings.ToLower(k) {
			case "cert":
				onlyUnixURLs = false
			case "server":
				if s, ok := v.(string); !ok || !strings.HasPrefix(s, "unix://") {
					onlyUnixURLs = false
				}
			default:
				return false
			}
		}
	}
	return len(probe.Blades) > 0 && !onlyUnixURLs
}

// ImportOptions tune ImportBladectlConfig.
type ImportOptions struct {
	// SkipPlaintext leaves out, with a warning, blades the old bladectl
	// reached over TCP without TLS; without it they fail the import.
	SkipPlaintext bool
}

// ImportBladectlConfig reads the old bladectl's config (raw, from file)
// into bladectl's own. Certificates are checked, not just copied: a blade
// whose certificate does not parse fails the import, as does one the old
// bladectl would have reached without TLS (its cert block incomplete, or
// none for a TCP address), because kubeblade has no plaintext TCP and must
// not pretend an mTLS blade is one.
func ImportBladectlConfig(raw []byte, file string, o ImportOptions) (*clientconfig.Config, []Finding, error) {
	f := &findings{file: file}
	root := parseMapping(raw, f)
	if root == nil {
		return nil, nil, f.err()
	}
	top, ok := newMapping(root, "", f)
	if !ok {
		return nil, nil, f.err()
	}
	if hasKey(top, "apiversion") || hasKey(top, "kind") {
		f.fail(0, "", "has apiVersion/kind: this is not the old bladectl's config")
		return nil, nil, f.err()
	}
	cfg := &clientconfig.Config{}
	be, ok := top.get("blades")
	if !ok {
		f.fail(0, "blades", "missing: not the old bladectl's config (it lists blades: [{name, blade: {server, cert}}])")
		return nil, nil, f.err()
	}
	seq := resolve(be.val)
	if seq.Kind != yaml.SequenceNode {
		f.fail(seq.Line, be.name, "want a list of blades, got a %s", kindName(seq))
		return nil, nil, f.err()
	}
	dir := filepath.Dir(file)
	seen := map[string]int{}
	for i, n := range seq.Content {
		name, b, ok := importBlade(n, fmt.Sprintf("blades[%d]", i), dir, o, f)
		if !ok {
			continue
		}
		if line, dup := seen[name]; dup {
			f.fail(resolve(n).Line, fmt.Sprintf("blades[%d].name", i), "%q is also listed on line %d", name, line)
			continue
		}
		seen[name] = resolve(n).Line
		cfg.Set(name, b)
	}
	if ce, ok := top.get("current-blade"); ok {
		cur, err := asString(ce.val)
		switch {
		case err != nil:
			f.fail(ce.val.Line, ce.name, "%v", err)
		case cur == "":
		case seen[cur] == 0:
			f.warn(ce.val.Line, ce.name, "%q is not among the imported blades; not made current", cur)
		default:
			cfg.CurrentBlade = cur
		}
	}
	for _, u := range top.unused() {
		f.warn(u.key.Line, u.name, "not part of the old bladectl's config; ignored")
	}
	if err := f.err(); err != nil {
		return nil, nil, err
	}
	return cfg, f.warnings, nil
}

func importBlade(n *yaml.Node, key, dir string, o ImportOptions, f *findings) (string, clientconfig.Blade, bool) {
	var out clientconfig.Blade
	m, ok := newMapping(n, key, f)
	if !ok {
		return "", out, false
	}
	line := resolve(n).Line
	var name string
	if ne, ok := m.get("name"); !ok {
		f.fail(line, key+".name", "missing")
		return "", out, false
	} else if v, err := asString(ne.val); err != nil || v == "" {
		f.fail(ne.val.Line, key+".name", "want a blade name")
		return "", out, false
	} else {
		name = v
	}
	key = fmt.Sprintf("blade %q", name)
	be, ok := m.get("blade")
	for _, u := range m.unused() {
		f.warn(u.key.Line, key+"."+u.name, "not part of the old bladectl's config; ignored")
	}
	if !ok {
		f.fail(line, key+".blade", "missing (want blade: {server, cert})")
		return "", out, false
	}
	bm, ok := newMapping(be.val, key+".blade", f)
	if !ok {
		return "", out, false
	}
	se, ok := bm.get("server")
	if !ok {
		f.fail(resolve(be.val).Line, key+".blade.server", "missing")
		return "", out, false
	}
	raw, err := asString(se.val)
	if err != nil {
		f.fail(se.val.Line, key+".blade.server", "%v", err)
		return "", out, false
	}
	server, unix, err := importServer(raw)
	if err != nil {
		f.fail(se.val.Line, key+".blade.server", "%v", err)
		return "", out, false
	}
	out.Server = server
	cert, certLine, good := importCert(bm, key+".blade", dir, f)
	for _, u := range bm.unused() {
		f.warn(u.key.Line, key+".blade."+u.name, "not part of the old bladectl's config; ignored")
	}
	if !good {
		return "", out, false
	}
	have := []bool{cert.CertificateAuthorityData != "" || cert.CertificateAuthority != "",
		cert.ClientCertificateData != "" || cert.ClientCertificate != "",
		cert.ClientKeyData != "" || cert.ClientKey != ""}
	switch n := count(have); {
	case n == 3 && unix:
		f.warn(certLine, key+".blade.cert", "a unix socket needs no certificates; they are dropped")
	case n == 3:
		out.CertificateAuthority, out.CertificateAuthorityData = cert.CertificateAuthority, cert.CertificateAuthorityData
		out.ClientCertificate, out.ClientCertificateData = cert.ClientCertificate, cert.ClientCertificateData
		out.ClientKey, out.ClientKeyData = cert.ClientKey, cert.ClientKeyData
	case n > 0:
		var missing []string
		for i, k := range []string{"certificate-authority-data", "client-certificate-data", "client-key-data"} {
			if !have[i] {
				missing = append(missing, k)
			}
		}
		f.fail(certLine, key+".blade.cert", "has no %s: the old bladectl then connected without TLS, without saying so; kubeblade needs all three for mutual TLS (copy the agent's bladectl config again)",
			strings.Join(missing, " or "))
		return "", out, false
	case !unix && o.SkipPlaintext:
		f.warn(se.val.Line, key+".blade.server", "skipped: the old bladectl reached %s without TLS, and kubeblade's bladectl speaks TCP only with mutual TLS", server)
		return "", out, false
	case !unix:
		f.fail(se.val.Line, key+".blade.server", "%s has no cert block: the old bladectl reached it without TLS, and kubeblade's bladectl speaks TCP only with mutual TLS. Turn on listen.authenticated on that agent (or install kubeblade there) and copy its config again, or pass --skip-plaintext to leave this blade out", server)
		return "", out, false
	}
	return name, out, true
}

func count(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// importServer turns the old bladectl's server, which it hands to
// grpc.NewClient as it is, into kubeblade's form. The old agent writes a
// unix socket as a bare path (which the old bladectl's dns resolver could
// not dial); unix:// URLs are what people fixed it to.
func importServer(s string) (server string, unix bool, err error) {
	switch {
	case s == "":
		return "", false, errors.New("empty")
	case strings.HasPrefix(s, "unix:"):
		p := strings.TrimPrefix(strings.TrimPrefix(s, "unix:"), "//")
		if !filepath.IsAbs(p) {
			return "", false, fmt.Errorf("%q: want unix:///absolute/path", s)
		}
		return "unix://" + p, true, nil
	case filepath.IsAbs(s):
		return "unix://" + s, true, nil
	}
	for _, scheme := range []string{"dns:///", "passthrough:///"} {
		s = strings.TrimPrefix(s, scheme)
	}
	if strings.Contains(s, "://") {
		return "", false, fmt.Errorf("%q: want host:port, unix:///path or an absolute socket path", s)
	}
	if _, _, err := net.SplitHostPort(s); err != nil {
		return "", false, fmt.Errorf("%q: want host:port (the old bladectl dialled port 443 without one; say so explicitly)", s)
	}
	return s, false, nil
}

// importCert reads and checks the cert block: the old format's
// *-data fields (base64 PEM), and file paths (certificate-authority,
// client-certificate, client-key) that people write by analogy with
// kubeconfig, which the old bladectl never read.
func importCert(bm *mapping, key, dir string, f *findings) (clientconfig.Blade, int, bool) {
	var out clientconfig.Blade
	ce, ok := bm.get("cert")
	if !ok {
		return out, 0, true
	}
	key += "." + ce.name
	cm, ok := newMapping(ce.val, key, f)
	if !ok {
		return out, ce.key.Line, false
	}
	// material is one PEM read from the block, and where.
	type material struct {
		pem  []byte
		line int
		key  string
	}
	var got [3]*material
	good := true
	for i, fld := range []struct {
		data, file string
		dataDst    *string
		fileDst    *string
	}{
		{"certificate-authority-data", "certificate-authority", &out.CertificateAuthorityData, &out.CertificateAuthority},
		{"client-certificate-data", "client-certificate", &out.ClientCertificateData, &out.ClientCertificate},
		{"client-key-data", "client-key", &out.ClientKeyData, &out.ClientKey},
	} {
		if de, ok := cm.get(fld.data); ok {
			s, err := asString(de.val)
			var b []byte
			if err == nil {
				b, err = base64.StdEncoding.DecodeString(strings.Join(strings.Fields(s), ""))
			}
			if err != nil {
				f.fail(de.val.Line, key+"."+de.name, "not base64: %v", err)
				good = false
				continue
			}
			*fld.dataDst = base64.StdEncoding.EncodeToString(b)
			got[i] = &material{pem: b, line: de.val.Line, key: key + "." + de.name}
		}
		if fe, ok := cm.get(fld.file); ok {
			if got[i] != nil {
				f.fail(fe.val.Line, key+"."+fe.name, "set as well as %s; keep one", fld.data)
				good = false
				continue
			}
			p, err := asString(fe.val)
			if err == nil && !filepath.IsAbs(p) {
				p = filepath.Join(dir, p)
			}
			var b []byte
			if err == nil {
				b, err = os.ReadFile(p)
			}
			if err != nil {
				f.fail(fe.val.Line, key+"."+fe.name, "%v", err)
				good = false
				continue
			}
			f.warn(fe.val.Line, key+"."+fe.name, "the old bladectl never read certificate files (only the *-data fields) and connected without TLS; kubeblade uses the file")
			*fld.fileDst = p
			got[i] = &material{pem: b, line: fe.val.Line, key: key + "." + fe.name}
		}
	}
	for _, u := range cm.unused() {
		f.warn(u.key.Line, key+"."+u.name, "not part of the old bladectl's cert block; ignored")
	}
	if !good {
		return out, ce.key.Line, false
	}
	ca, cert, priv := got[0], got[1], got[2]
	if ca != nil {
		if err := checkCA(ca.pem); err != nil {
			f.fail(ca.line, ca.key, "%v", err)
			good = false
		}
	}
	switch {
	case cert != nil && priv != nil:
		if _, err := tls.X509KeyPair(cert.pem, priv.pem); err != nil {
			f.fail(cert.line, cert.key, "client certificate and key do not load: %v", err)
			good = false
		}
	case cert != nil:
		if err := checkCA(cert.pem); err != nil {
			f.fail(cert.line, cert.key, "%v", err)
			good = false
		}
	}
	return out, ce.key.Line, good
}

// checkCA parses every certificate in a PEM bundle.
func checkCA(b []byte) error {
	n := 0
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			return fmt.Errorf("certificate does not parse: %v", err)
		}
		n++
	}
	if n == 0 {
		return errors.New("no PEM certificate in it")
	}
	return nil
}

// ExportBladectlConfig writes the blades of cfg named in names (all when
// empty) in the old bladectl's format, which knows only inline
// certificates: files are read (relative ones from baseDir) and embedded.
// A TCP blade whose credentials cannot be read or do not parse fails the
// export: leaving its cert block out would make the old bladectl connect
// without TLS.
func ExportBladectlConfig(cfg *clientconfig.Config, names []string, baseDir, file string) ([]byte, []Finding, error) {
	f := &findings{file: file}
	if len(names) == 0 {
		names = cfg.Names()
	}
	out := oldBladectlConfig{}
	for _, name := range names {
		b, ok := cfg.Lookup(name)
		if !ok {
			f.fail(0, "", "no blade named %q", name)
			continue
		}
		key := fmt.Sprintf("blade %q", name)
		if err := b.Validate(); err != nil {
			f.fail(0, key, "%v", err)
			continue
		}
		nb := oldNamedBlade{Name: name}
		if b.IsUnix() {
			nb.Blade.Server = "unix://" + b.SocketPath()
			out.Blades = append(out.Blades, nb)
			continue
		}
		nb.Blade.Server = b.Server
		ca, client, err := b.Credentials(baseDir)
		if err == nil {
			err = checkCA(ca)
		}
		if err == nil {
			_, err = tls.X509KeyPair(client.CertPEM, client.KeyPEM)
		}
		if err != nil {
			f.fail(0, key, "cannot export its mutual-TLS credentials (%v); without them the old bladectl would connect without TLS", err)
			continue
		}
		if b.TLSServerName != "" {
			host, _, _ := net.SplitHostPort(b.Server)
			f.warn(0, key+".tls-server-name", "the old bladectl cannot be told to expect %q: it checks %q, the host in its server address, against the agent's certificate", b.TLSServerName, host)
		}
		b64 := base64.StdEncoding.EncodeToString
		nb.Blade.Certificate = oldCert{CertificateAuthorityData: b64(ca), ClientCertificateData: b64(client.CertPEM), ClientKeyData: b64(client.KeyPEM)}
		out.Blades = append(out.Blades, nb)
	}
	if err := f.err(); err != nil {
		return nil, nil, err
	}
	for _, nb := range out.Blades {
		if nb.Name == cfg.CurrentBlade {
			out.CurrentBlade = nb.Name
		}
	}
	if out.CurrentBlade == "" && len(out.Blades) > 0 {
		out.CurrentBlade = out.Blades[0].Name
	}
	body, err := yaml.Marshal(&out)
	if err != nil {
		return nil, nil, err
	}
	head := "# Written by 'bladectl config export --format compute-blade-agent' for\n# compute-blade-agent's bladectl, which reads ~/" + OldBladectlConfig + ".\n"
	return append([]byte(head), body...), f.warnings, nil
}
