package kubeagent

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/kubeclient"
)

// Initial is the agent's first read of its Node and of the BladeConfig the
// Node is assigned to, made before the hardware opens (the assigned config
// chooses how it opens). The Reporter's watches of the two start from these
// lists, at their resourceVersion, instead of listing again: the first read
// and the watches' initial lists would be the same requests twice (four of
// an agent's start-up requests, docs/performance.md).
type Initial struct {
	// Node lists this agent's Node (by name: none or one).
	Node *corev1.NodeList
	// ConfigName is the BladeConfig the Node is assigned to (its
	// kubeblade.io/config label), empty when none; Config lists it.
	ConfigName string
	Config     *v1alpha1.BladeConfigList
}

// NodeObject is the listed Node, nil when it does not exist.
func (i *Initial) NodeObject() *corev1.Node {
	if i == nil || i.Node == nil || len(i.Node.Items) == 0 {
		return nil
	}
	return &i.Node.Items[0]
}

// ConfigObject is the listed BladeConfig, nil when the Node names none or
// it does not exist.
func (i *Initial) ConfigObject() *v1alpha1.BladeConfig {
	if i == nil || i.Config == nil || len(i.Config.Items) == 0 {
		return nil
	}
	return &i.Config.Items[0]
}

// ReadInitial lists the Node nodeName and, if its kubeblade.io/config label
// names one, that BladeConfig: each by name, as the Reporter's watches
// list them, and consistently (the current state in etcd, as a GET reads
// it), since the config read here decides how the hardware opens. On an
// error after the Node was read it returns what it read with the error.
func ReadInitial(ctx context.Context, cfg *rest.Config, nodeName string) (*Initial, error) {
	c, err := kubeclient.New(cfg)
	if err != nil {
		return nil, err
	}
	nodes, err := kubeclient.ListWatchNamed(c.Nodes, nodeName).ListWithContext(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing Node %s: %w", nodeName, err)
	}
	in := &Initial{Node: nodes.(*corev1.NodeList)}
	n := in.NodeObject()
	if n == nil {
		return in, nil
	}
	in.ConfigName = n.Labels[v1alpha1.LabelConfig]
	if in.ConfigName == "" {
		return in, nil
	}
	bcs, err := kubeclient.ListWatchNamed(c.BladeConfigs, in.ConfigName).ListWithContext(ctx, metav1.ListOptions{})
	if err != nil {
		return in, fmt.Errorf("listing BladeConfig %s: %w", in.ConfigName, err)
	}
	in.Config = bcs.(*v1alpha1.BladeConfigList)
	return in, nil
}
