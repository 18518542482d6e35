package bladectl

import (
	"context"
	"encoding/base64"
	"fmt"
	"os/user"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeblade/kubeblade/internal/clientconfig"
	"github.com/kubeblade/kubeblade/internal/csrclient"
	"github.com/kubeblade/kubeblade/internal/pki"
)

// newConfigRequestCertificateCmd asks the cluster for a client certificate
// (signer kubeblade.io/client). The key is made here and never sent; a
// person approves the request with kubectl certificate approve.
func newConfigRequestCertificateCmd(o *options) *cobra.Command {
	var server, kubeconfig, commonName, tlsName, roleName string
	var wait time.Duration
	var use bool
	cmd := &cobra.Command{
		Use:   "request-certificate NAME --server HOST:PORT",
		Short: "Get a client certificate through the Kubernetes CSR API and add the blade",
		Long: `request-certificate makes a private key on this machine, sends a
CertificateSigningRequest for signer kubeblade.io/client to the cluster in
your kubeconfig, waits until someone runs 'kubectl certificate approve' on it
and kubeblade-operator signs it, then stores the blade NAME at --server with
the certificate, the key and the operator's CA in the bladectl config.

--role viewer (the default) may read status and watch; --role operator may
also change the fan, stealth, identify and LEDs. The role is the
certificate's Organization (kubeblade:viewers or kubeblade:operators); the
approver sees it with 'kubectl describe csr NAME', and the CSR's name ends
in the role.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if server == "" {
				return usagef("--server HOST:PORT is required")
			}
			role, err := pki.ParseRole(roleName)
			if err != nil {
				return usagef("--role: %v", err)
			}
			if commonName == "" {
				if u, err := user.Current(); err == nil {
					commonName = u.Username
				}
			}
			rules := clientcmd.NewDefaultClientConfigLoadingRules()
			rules.ExplicitPath = kubeconfig
			rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
			if err != nil {
				return fmt.Errorf("kubeconfig: %w", err)
			}
			cs, err := kubernetes.NewForConfig(rc)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), wait)
			defer cancel()
			iss, err := csrclient.Obtain(ctx, cs.CertificatesV1().CertificateSigningRequests(), csrclient.Request{
				Name: "bladectl-" + commonName + "-" + role.String(), SignerName: csrclient.SignerClient, CommonName: commonName,
				Organization: []string{role.Organization()},
			}, func(name string) {
				fmt.Fprintf(o.env.Stderr, "waiting for approval of a %s certificate for %s: kubectl certificate approve %s\n", role, commonName, name)
			})
			if err != nil {
				return err
			}
			b64 := base64.StdEncoding.EncodeToString
			err = o.editConfig(func(cfg *clientconfig.Config) error {
				cfg.Set(args[0], clientconfig.Blade{
					Server: server, TLSServerName: tlsName,
					CertificateAuthorityData: b64(iss.CAPEM),
					ClientCertificateData:    b64(iss.CertPEM),
					ClientKeyData:            b64(iss.KeyPEM),
				})
				if use || cfg.CurrentBlade == "" {
					cfg.CurrentBlade = args[0]
				}
				return nil
			})
			if err != nil {
				return err
			}
			path := o.resolvedConfigPath()
			fmt.Fprintf(o.env.Stdout, "blade %q added to %s (certificate valid until %s)\n", args[0], path, iss.NotAfter.Format(time.RFC3339))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&server, "server", "", "the agent's HOST:PORT (mutual TLS)")
	f.StringVar(&tlsName, "tls-server-name", "", "name to check in the agent's certificate (default: the host in --server; agents' certificates name their Node)")
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&commonName, "common-name", "", "name in the certificate (default: your user name)")
	f.DurationVar(&wait, "wait", 15*time.Minute, "how long to wait for approval and signing")
	f.BoolVar(&use, "use", false, "make it the current blade")
	f.StringVar(&roleName, "role", pki.RoleViewer.String(), "viewer (read) or operator (read and change the blade)")
	return cmd
}
