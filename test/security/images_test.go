package security

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/operator/imagepolicy"
	"github.com/kubeblade/kubeblade/internal/testenv"
)

var configSeq atomic.Int32

// bladeConfigEditor is a user who may edit BladeConfigs and nothing else:
// the identity of finding 1 (a BladeConfig edit must not be root on a Node).
func bladeConfigEditor(t *testing.T) client.Client {
	t.Helper()
	const user = "editor@example.com"
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "test-bladeconfig-editor"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{kbv1.GroupVersion.Group}, Resources: []string{"bladeconfigs"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := admin.Create(ctx(t), o); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
	}
	return as(testenv.As(env.Config, user))
}

func bladeConfig(image string) *kbv1.BladeConfig {
	bc := &kbv1.BladeConfig{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("images-%d", configSeq.Add(1))}}
	bc.Spec.DaemonSet.Image = image
	bc.Spec.NodeSelector = selectsNothing()
	return bc
}

// TestBladeConfigImages: a BladeConfig editor may name only images from an
// allowed repository (config/admission/agent-images.yaml, default list:
// the project's own), decided as internal/operator/imagepolicy decides it.
func TestBladeConfigImages(t *testing.T) {
	testenv.Need(t)
	editor := bladeConfigEditor(t)
	allow := imagepolicy.AllowList{imagepolicy.DefaultRepository}
	for image := range imagepolicy.Cases {
		t.Run(image, func(t *testing.T) {
			err := editor.Create(ctx(t), bladeConfig(image))
			if allow.Check(image) == nil {
				allowed(t, "an allowed image", err)
			} else {
				// The policy names the repository it computed: the same
				// as imagepolicy.Repository's.
				refused(t, "an image from another repository", err, "kubeblade-agent-images",
					"(repository "+imagepolicy.Repository(image)+") is not from an allowed repository", imagepolicy.DefaultRepository)
			}
		})
	}
	allowed(t, "no image (the operator's own)", editor.Create(ctx(t), bladeConfig("")))

	bc := bladeConfig(imagepolicy.DefaultRepository + ":v1")
	if err := editor.Create(ctx(t), bc); err != nil {
		t.Fatal(err)
	}
	refused(t, "changing the image to another repository", edit(t, editor, bc.Name, func(bc *kbv1.BladeConfig) {
		bc.Spec.DaemonSet.Image = "ghcr.io/evil/kubeblade:v1"
	}), "kubeblade-agent-images")
	allowed(t, "changing the tag", edit(t, editor, bc.Name, func(bc *kbv1.BladeConfig) {
		bc.Spec.DaemonSet.Image = imagepolicy.DefaultRepository + ":v2"
	}))
}

// edit changes a fresh copy of a BladeConfig with f and sends the change
// as c, as a merge patch (the operator adds its finalizer meanwhile).
func edit(t *testing.T, c client.Client, name string, f func(*kbv1.BladeConfig)) error {
	t.Helper()
	bc := &kbv1.BladeConfig{}
	if err := admin.Get(ctx(t), client.ObjectKey{Name: name}, bc); err != nil {
		t.Fatal(err)
	}
	orig := bc.DeepCopy()
	f(bc)
	return c.Patch(ctx(t), bc, client.MergeFrom(orig))
}

// TestBladeConfigGrandfatheredImage: a BladeConfig that holds a refused
// image from before the policy can still be edited otherwise (and its
// finalizer removed) — the operator refuses to run it — but its image can
// only change to an allowed one.
func TestBladeConfigGrandfatheredImage(t *testing.T) {
	testenv.Need(t)
	editor := bladeConfigEditor(t)
	allowed(t, "another field of a BladeConfig with an old image", edit(t, editor, grandfathered, func(bc *kbv1.BladeConfig) { bc.Spec.Priority = 7 }))
	allowed(t, "a finalizer", edit(t, editor, grandfathered, func(bc *kbv1.BladeConfig) {
		bc.Finalizers = append(bc.Finalizers, "kubeblade.io/test")
	}))
	allowed(t, "removing it again", edit(t, editor, grandfathered, func(bc *kbv1.BladeConfig) {
		bc.Finalizers = slices.DeleteFunc(bc.Finalizers, func(f string) bool { return f == "kubeblade.io/test" })
	}))
	refused(t, "another refused image", edit(t, editor, grandfathered, func(bc *kbv1.BladeConfig) {
		bc.Spec.DaemonSet.Image = "ghcr.io/evil/kubeblade:v2"
	}), "kubeblade-agent-images")
}

// selectsNothing keeps the suite's BladeConfigs off the Nodes other tests
// attack: the operator runs and would label them.
func selectsNothing() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"kbtest": "nothing"}}
}
