package bladectl

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kubeblade/kubeblade/internal/atomicfile"
	"github.com/kubeblade/kubeblade/internal/clientconfig"
	"github.com/kubeblade/kubeblade/internal/migrate"
)

func newConfigCmd(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Manage the named blades bladectl talks to",
		Long: `The config file lists named blades, like a kubeconfig lists clusters. Without
a file bladectl uses one blade, "local", at the agent's default socket
unix:///run/kubeblade/agent.sock.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newConfigListCmd(o), newConfigAddCmd(o), newConfigUseCmd(o), newConfigRemoveCmd(o), newConfigImportCmd(o),
		newConfigExportCmd(o), newConfigRequestCertificateCmd(o))
	return cmd
}

type configBladeView struct {
	Name    string `json:"name"`
	Server  string `json:"server"`
	Current bool   `json:"current"`
}

func newConfigListCmd(o *options) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls", "get-blades"},
		Short:   "List the blades in the config file",
		Args:    noArgs,
		RunE: func(*cobra.Command, []string) error {
			cfg, _, err := clientconfig.Load(o.resolvedConfigPath())
			if err != nil {
				return err
			}
			var views []configBladeView
			var rows [][]string
			for _, b := range cfg.Blades {
				cur := b.Name == cfg.CurrentBlade
				views = append(views, configBladeView{Name: b.Name, Server: b.Blade.Server, Current: cur})
				mark := ""
				if cur {
					mark = "*"
				}
				rows = append(rows, []string{mark, b.Name, b.Blade.Server})
			}
			p := o.printer()
			if p.format != outTable {
				return p.encode(views)
			}
			return p.table("CURRENT\tNAME\tSERVER", rows)
		},
	}
}

func newConfigAddCmd(o *options) *cobra.Command {
	var b clientconfig.Blade
	var use bool
	cmd := &cobra.Command{
		Use:   "add NAME --server unix:///PATH|HOST:PORT [--certificate-authority FILE --client-certificate FILE --client-key FILE]",
		Short: "Add or replace a blade",
		Long: `add stores a blade. A unix socket needs only --server unix:///path; a TCP
address is always mutual TLS and needs the agent's CA and a client
certificate and key (an agent with remote access writes them, with a ready
config, to /var/lib/kubeblade; see 'bladectl config import').`,
		Args: exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			for _, f := range []*string{&b.CertificateAuthority, &b.ClientCertificate, &b.ClientKey} {
				if *f != "" {
					abs, err := filepath.Abs(*f)
					if err != nil {
						return err
					}
					*f = abs
				}
			}
			if err := b.Validate(); err != nil {
				return usagef("blade %q: %v", args[0], err)
			}
			return o.editConfig(func(cfg *clientconfig.Config) error {
				cfg.Set(args[0], b)
				if use || cfg.CurrentBlade == "" {
					cfg.CurrentBlade = args[0]
				}
				fmt.Fprintf(o.env.Stdout, "blade %q saved\n", args[0])
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&b.Server, "server", "", "unix:///path/to/agent.sock or host:port (mutual TLS)")
	f.StringVar(&b.CertificateAuthority, "certificate-authority", "", "the agent's CA certificate (PEM file)")
	f.StringVar(&b.ClientCertificate, "client-certificate", "", "client certificate (PEM file)")
	f.StringVar(&b.ClientKey, "client-key", "", "client key (PEM file)")
	f.StringVar(&b.TLSServerName, "tls-server-name", "", "name to check in the agent's certificate (default: the host in --server)")
	f.BoolVar(&use, "use", false, "also make it the current blade")
	_ = cmd.MarkFlagRequired("server")
	return cmd
}

func newConfigUseCmd(o *options) *cobra.Command {
	return &cobra.Command{
		Use:               "use NAME",
		Short:             "Set the blade commands act on by default",
		Args:              exactArgs(1),
		ValidArgsFunction: o.completeBladeNames,
		RunE: func(_ *cobra.Command, args []string) error {
			return o.editConfig(func(cfg *clientconfig.Config) error {
				if _, ok := cfg.Lookup(args[0]); !ok {
					return fmt.Errorf("no blade named %q (see 'bladectl config list')", args[0])
				}
				cfg.CurrentBlade = args[0]
				fmt.Fprintf(o.env.Stdout, "current blade is now %q\n", args[0])
				return nil
			})
		},
	}
}

func newConfigRemoveCmd(o *options) *cobra.Command {
	return &cobra.Command{
		Use:               "remove NAME",
		Aliases:           []string{"rm", "delete"},
		Short:             "Remove a blade",
		Args:              exactArgs(1),
		ValidArgsFunction: o.completeBladeNames,
		RunE: func(_ *cobra.Command, args []string) error {
			return o.editConfig(func(cfg *clientconfig.Config) error {
				if !cfg.Remove(args[0]) {
					return fmt.Errorf("no blade named %q (see 'bladectl config list')", args[0])
				}
				fmt.Fprintf(o.env.Stdout, "blade %q removed\n", args[0])
				return nil
			})
		},
	}
}

func newConfigImportCmd(o *options) *cobra.Command {
	var skipPlaintext, replace bool
	cmd := &cobra.Command{
		Use:   "import [FILE]",
		Short: "Add the blades of another bladectl config: kubeblade's, or compute-blade-agent's (default ~/" + migrate.OldBladectlConfig + ")",
		Long: `import adds the blades of another config file to yours. A blade whose name is
already in yours with other settings is kept and nothing is imported, unless
--replace is given (an agent's bladectl.yaml and bladectl-viewer.yaml name the
same blade, with operator and viewer rights).

FILE is either kubeblade's format, like the config an agent with remote access
writes to /var/lib/kubeblade/bladectl.yaml, or the old compute-blade-agent
bladectl's (no apiVersion; blades of server and cert only, a socket as a bare
path), which is read from ~/` + migrate.OldBladectlConfig + ` when FILE is not given.

Certificates are checked before anything is saved. A blade the old bladectl
reached without TLS (over TCP without a complete cert: block) is refused:
kubeblade's bladectl speaks TCP only with mutual TLS; --skip-plaintext leaves
such blades out instead.`,
		Args: maxArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			path := ""
			if len(args) == 1 {
				path = args[0]
			} else {
				home := o.env.Getenv("HOME")
				if home == "" {
					home, _ = os.UserHomeDir()
				}
				path = filepath.Join(home, migrate.OldBladectlConfig)
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				if os.IsNotExist(err) {
					return fmt.Errorf("%s does not exist", path)
				}
				return err
			}
			other, from, err := o.readImport(raw, path, skipPlaintext)
			if err != nil {
				return err
			}
			mine := o.resolvedConfigPath()
			return o.editConfig(func(cfg *clientconfig.Config) error {
				var kept []string
				for _, b := range other.Blades {
					if have, ok := cfg.Lookup(b.Name); ok && have != b.Blade && !replace {
						kept = append(kept, fmt.Sprintf("blade %q is already in %s (%s): kept it; the imported one is %s", b.Name, mine,
							describeBlade(have, configBaseDir(mine)), describeBlade(b.Blade, filepath.Dir(path))))
					}
				}
				if len(kept) > 0 {
					return fmt.Errorf("nothing imported from %s:\n%s\npass --replace to replace what was kept", path, indent(strings.Join(kept, "\n")))
				}
				for _, b := range other.Blades {
					have, ok := cfg.Lookup(b.Name)
					switch {
					case ok && have == b.Blade:
						fmt.Fprintf(o.env.Stdout, "blade %q unchanged%s\n", b.Name, from)
					case ok:
						cfg.Set(b.Name, b.Blade)
						fmt.Fprintf(o.env.Stdout, "blade %q replaced%s (it was %s)\n", b.Name, from, describeBlade(have, configBaseDir(mine)))
					default:
						cfg.Set(b.Name, b.Blade)
						fmt.Fprintf(o.env.Stdout, "blade %q imported%s\n", b.Name, from)
					}
				}
				if cfg.CurrentBlade == "" || cfg.CurrentBlade == clientconfig.LocalBlade && other.CurrentBlade != "" {
					cfg.CurrentBlade = other.CurrentBlade
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&skipPlaintext, "skip-plaintext", false, "leave out blades the old bladectl reached over TCP without TLS, instead of refusing the import")
	cmd.Flags().BoolVar(&replace, "replace", false, "replace blades of the same name already in your config, instead of refusing the import")
	return cmd
}

// describeBlade says which blade an entry is: its server and, when its
// client certificate can be read, the certificate's subject (which carries
// the role, e.g. O=kubeblade:viewers).
func describeBlade(b clientconfig.Blade, baseDir string) string {
	if b.IsUnix() {
		return "server " + b.Server
	}
	_, client, err := b.Credentials(baseDir)
	if err != nil {
		return "server " + b.Server
	}
	blk, _ := pem.Decode(client.CertPEM)
	if blk == nil {
		return "server " + b.Server
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return "server " + b.Server
	}
	return fmt.Sprintf("server %s, client certificate %s", b.Server, cert.Subject)
}

// readImport reads a config to import in either format; file paths in it
// are made absolute (they are relative to the file).
func (o *options) readImport(raw []byte, path string, skipPlaintext bool) (*clientconfig.Config, string, error) {
	if migrate.IsOldBladectlConfig(raw) {
		cfg, warnings, err := migrate.ImportBladectlConfig(raw, path, migrate.ImportOptions{SkipPlaintext: skipPlaintext})
		if err != nil {
			return nil, "", fmt.Errorf("nothing imported from compute-blade-agent's bladectl config:\n%s", indent(err.Error()))
		}
		o.warn(warnings)
		return cfg, " (from compute-blade-agent's bladectl config)", nil
	}
	cfg, err := clientconfig.Parse(raw)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	for i := range cfg.Blades {
		b := &cfg.Blades[i].Blade
		for _, f := range []*string{&b.CertificateAuthority, &b.ClientCertificate, &b.ClientKey} {
			if *f != "" && !filepath.IsAbs(*f) {
				*f = filepath.Join(filepath.Dir(path), *f)
			}
		}
	}
	return cfg, "", nil
}

// Export formats.
const (
	formatKubeblade = "kubeblade"
	formatOld       = "compute-blade-agent"
)

func newConfigExportCmd(o *options) *cobra.Command {
	var format, file string
	var force bool
	cmd := &cobra.Command{
		Use:   "export [--format kubeblade|compute-blade-agent] [--file PATH]",
		Short: "Write the blades (all, or --blade) as a self-contained config, for another machine or for compute-blade-agent's bladectl",
		Long: `export writes the blades of your config (all of them, or those named with
--blade) with their certificates inline, to stdout or to --file (mode 0600,
written only when the whole export succeeds; an existing file is replaced
only with --force).

--format compute-blade-agent writes the old bladectl's format, for
~/` + migrate.OldBladectlConfig + `. A blade reached over mutual TLS is never written
without its certificates: if they cannot be read, the export fails.`,
		Args:      noArgs,
		ValidArgs: []string{formatKubeblade, formatOld},
		RunE: func(*cobra.Command, []string) error {
			toFile := file != "" && file != "-"
			if _, err := os.Lstat(file); toFile && err == nil && !force {
				return fmt.Errorf("nothing exported: %s exists; pass --force to replace it", file)
			}
			path := o.resolvedConfigPath()
			cfg, _, err := clientconfig.Load(path)
			if err != nil {
				return err
			}
			var out []byte
			switch format {
			case formatOld:
				var warnings []migrate.Finding
				out, warnings, err = migrate.ExportBladectlConfig(cfg, o.blades, configBaseDir(path), path)
				if err != nil {
					return fmt.Errorf("nothing exported:\n%s", indent(err.Error()))
				}
				o.warn(warnings)
			case formatKubeblade:
				if out, err = exportInline(cfg, o.blades, configBaseDir(path)); err != nil {
					return fmt.Errorf("nothing exported: %w", err)
				}
			default:
				return usagef("--format %q: want %s or %s", format, formatKubeblade, formatOld)
			}
			if !toFile {
				_, err := o.env.Stdout.Write(out)
				return err
			}
			if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
				return err
			}
			if err := atomicfile.Write(file, out, 0o600); err != nil {
				return err
			}
			fmt.Fprintf(o.env.Stderr, "wrote %s\n", file)
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", formatKubeblade, "kubeblade or compute-blade-agent (the old bladectl's config)")
	cmd.Flags().StringVar(&file, "file", "", "write here instead of stdout (not over an existing file without --force)")
	cmd.Flags().BoolVar(&force, "force", false, "let --file replace an existing file")
	_ = cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions([]string{formatKubeblade, formatOld}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// exportInline is cfg's named blades (all when names is empty) with every
// certificate file read into the *-data fields.
func exportInline(cfg *clientconfig.Config, names []string, baseDir string) ([]byte, error) {
	if len(names) == 0 {
		names = cfg.Names()
	}
	out := &clientconfig.Config{}
	for _, n := range names {
		b, ok := cfg.Lookup(n)
		if !ok {
			return nil, fmt.Errorf("no blade named %q", n)
		}
		if !b.IsUnix() {
			ca, client, err := b.Credentials(baseDir)
			if err != nil {
				return nil, fmt.Errorf("blade %q: %w", n, err)
			}
			b64 := base64.StdEncoding.EncodeToString
			b.CertificateAuthority, b.ClientCertificate, b.ClientKey = "", "", ""
			b.CertificateAuthorityData, b.ClientCertificateData, b.ClientKeyData = b64(ca), b64(client.CertPEM), b64(client.KeyPEM)
		}
		out.Set(n, b)
		if n == cfg.CurrentBlade {
			out.CurrentBlade = n
		}
	}
	return clientconfig.Marshal(out)
}

func (o *options) warn(fs []migrate.Finding) {
	for _, f := range fs {
		fmt.Fprintf(o.env.Stderr, "warning: %s\n", f)
	}
}

func indent(s string) string { return "  " + strings.ReplaceAll(s, "\n", "\n  ") }

func maxArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > n {
			return usagef("usage: %s", cmd.UseLine())
		}
		return nil
	}
}

// editConfig loads the config (or the built-in default), applies fn and
// saves it with mode 0600.
func (o *options) editConfig(fn func(*clientconfig.Config) error) error {
	path := o.resolvedConfigPath()
	cfg, _, err := clientconfig.Load(path)
	if err != nil {
		return err
	}
	if err := fn(cfg); err != nil {
		return err
	}
	if err := clientconfig.Save(path, cfg); err != nil {
		if os.IsPermission(err) {
			return fmt.Errorf("cannot write %s: permission denied", path)
		}
		return err
	}
	return nil
}

func (o *options) completeBladeNames(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	cfg, _, err := clientconfig.Load(o.resolvedConfigPath())
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	return cfg.Names(), cobra.ShellCompDirectiveNoFileComp
}
