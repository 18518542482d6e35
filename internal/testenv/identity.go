package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The agent's identity as a pod-bound ServiceAccount token presents it:
// the ServiceAccount user, its groups, and the extras the API server adds
// for a token bound to a pod (Kubernetes >= 1.30), which the admission
// policies in config/admission read.
const (
	AgentNamespace      = "kubeblade-system"
	AgentServiceAccount = "kubeblade-agent"
	AgentUser           = "system:serviceaccount:" + AgentNamespace + ":" + AgentServiceAccount
	NodeNameExtra       = "authentication.kubernetes.io/node-name"
	NodeUIDExtra        = "authentication.kubernetes.io/node-uid"
)

// AgentGroups are the groups of the agent ServiceAccount's user.
var AgentGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + AgentNamespace, "system:authenticated"}

// AgentExtra is the user-info extra of a token bound to a pod on the Node
// named nodeName with UID nodeUID.
func AgentExtra(nodeName string, nodeUID types.UID) map[string][]string {
	return map[string][]string{NodeNameExtra: {nodeName}, NodeUIDExtra: {string(nodeUID)}}
}

// AsAgent returns a copy of cfg that acts as the agent of the Node
// nodeName/nodeUID: the admin credentials impersonate the agent
// ServiceAccount with the node extras, so the API server authorizes every
// request as the agent's (RBAC, then the admission policies).
func AsAgent(cfg *rest.Config, nodeName string, nodeUID types.UID) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{
		UserName: AgentUser,
		Groups:   AgentGroups,
		Extra:    AgentExtra(nodeName, nodeUID),
	}
	return c
}

// As returns a copy of cfg that impersonates user with groups.
func As(cfg *rest.Config, user string, groups ...string) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
	return c
}

// ApplyFiles server-side applies every object of the YAML manifests at
// paths (relative to the repository root), with field manager "testenv".
func ApplyFiles(ctx context.Context, c client.Client, paths ...string) error {
	for _, p := range paths {
		raw, err := os.ReadFile(filepath.Join(RepoRoot(), p))
		if err != nil {
			return err
		}
		if err := Apply(ctx, c, raw); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
	}
	return nil
}

// Apply server-side applies every object of a multi-document YAML stream.
func Apply(ctx context.Context, c client.Client, manifests []byte) error {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("testenv"), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
}

// WriteKubeconfig writes a kubeconfig to path with one context per user
// (cluster, user and context all named by the key), current selected, for
// tests that drive a command-line tool as that user.
func WriteKubeconfig(path, current string, users map[string]*rest.Config) error {
	kc := clientcmdapi.NewConfig()
	for name, cfg := range users {
		kc.Clusters[name] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
		kc.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
		kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	kc.CurrentContext = current
	return clientcmd.WriteToFile(*kc, path)
}
