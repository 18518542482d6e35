package bladectl

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/kubeblade/kubeblade/internal/clientconfig"
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
		newConfigRequestCertificateCmd(o))
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
	return &cobra.Command{
		Use:   "import FILE",
		Short: "Add the blades of another bladectl config, e.g. the one an agent wrote to /var/lib/kubeblade/bladectl.yaml",
		Args:  exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			other, exists, err := clientconfig.Load(args[0])
			if err != nil {
				return err
			}
			if !exists {
				return fmt.Errorf("%s does not exist", args[0])
			}
			return o.editConfig(func(cfg *clientconfig.Config) error {
				for _, b := range other.Blades {
					// File paths in the imported config are relative to it.
					for _, f := range []*string{&b.Blade.CertificateAuthority, &b.Blade.ClientCertificate, &b.Blade.ClientKey} {
						if *f != "" && !filepath.IsAbs(*f) {
							*f = filepath.Join(filepath.Dir(args[0]), *f)
						}
					}
					cfg.Set(b.Name, b.Blade)
					fmt.Fprintf(o.env.Stdout, "blade %q imported\n", b.Name)
				}
				if cfg.CurrentBlade == "" || cfg.CurrentBlade == clientconfig.LocalBlade && other.CurrentBlade != "" {
					cfg.CurrentBlade = other.CurrentBlade
				}
				return nil
			})
		},
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
