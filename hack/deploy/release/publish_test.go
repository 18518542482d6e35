package release

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	"helm.sh/helm/v4/pkg/registry"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/kubeblade/kubeblade/internal/testenv"
	"github.com/kubeblade/kubeblade/internal/testregistry"
)

// dockerConfig points go-containerregistry and Helm at a Docker config
// file holding auth for host (or none), for the rest of the test.
func dockerConfig(t *testing.T, host, user, password string) {
	t.Helper()
	dir := t.TempDir()
	cfg := `{"auths":{}}`
	if user != "" {
		cfg = `{"auths":{"` + host + `":{"auth":"` + base64.StdEncoding.EncodeToString([]byte(user+":"+password)) + `"}}}`
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", dir)
}

// TestPublishRoundTrip publishes a release to a real registry (the
// Distribution registry on loopback, behind htpasswd authentication with
// the credentials in a Docker config file), reads everything back and
// verifies it as a user would, publishes again (nothing changes), and
// installs the chart pulled from the registry with the Helm SDK into a
// real API server, its image pointed at the registry.
func TestPublishRoundTrip(t *testing.T) {
	dir := release(t)
	reg := testregistry.Start(t, testregistry.Options{Htpasswd: testregistry.TestHtpasswd})
	dockerConfig(t, reg.Host, testregistry.TestUser, testregistry.TestPassword)
	v := made.opts.Version
	cv := ChartVersion(v)
	base := reg.Host + "/lab"
	root := cleanRepo(t)
	pub := func() *Published {
		t.Helper()
		res, err := Publish(context.Background(), PublishOptions{Root: root, Dist: dir, Version: v, Registry: base, Key: made.key})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := pub()
	if res.Image != base+"/kubeblade:"+v || res.ImageDigest != made.res.ImageDigest {
		t.Fatalf("published %s@%s, want %s/kubeblade:%s@%s", res.Image, res.ImageDigest, base, v, made.res.ImageDigest)
	}
	ctx := context.Background()
	img, err := Repository(base+"/kubeblade", false)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := img.Resolve(ctx, v); err != nil || d.Digest.String() != made.res.ImageDigest.String() {
		t.Fatalf("the registry's %s:%s: %v %v", img.Reference, v, d.Digest, err)
	}
	imgDigest := made.res.ImageDigest.String()
	// The signature: cosign's simple signing payload for this repository
	// and digest, signed with the release key.
	payload, ann := attached(t, img, imgDigest, "sig")
	if err := VerifyBlob(made.pubPEM, payload, []byte(ann[SignatureAnnotation])); err != nil {
		t.Errorf("image signature: %v", err)
	}
	if err := VerifyBlob(made.pubPEM, append(bytes.Clone(payload), ' '), []byte(ann[SignatureAnnotation])); err == nil {
		t.Error("image signature verifies a changed payload")
	}
	if !bytes.Contains(payload, []byte(`"docker-reference":"`+img.Reference.String()+`"`)) || !bytes.Contains(payload, []byte(imgDigest)) {
		t.Errorf("signature payload %s does not name %s@%s", payload, img.Reference, imgDigest)
	}
	sbomData, _ := attached(t, img, imgDigest, "sbom")
	if want, _ := os.ReadFile(filepath.Join(dir, ImageSBOM)); !bytes.Equal(sbomData, want) {
		t.Error("the registry's SBOM differs from dist's")
	}
	att, ann := attached(t, img, imgDigest, "att")
	if err := VerifyDSSE(made.pubPEM, att); err != nil {
		t.Errorf("provenance attestation: %v", err)
	}
	if ann["predicateType"] != ProvenanceType {
		t.Errorf("attestation predicateType %q", ann["predicateType"])
	}

	// The chart, pulled with Helm's registry client: dist's bytes, signed.
	rc, err := registry.NewClient(registry.ClientOptCredentialsFile(filepath.Join(t.TempDir(), "none.json")), registry.ClientOptPlainHTTP())
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := rc.Pull(strings.TrimPrefix(res.Chart, "oci://") + ":" + cv)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(pulled.Chart.Data, made.chartBytes) {
		t.Fatal("the chart pulled from the registry differs from dist's")
	}
	charts, err := Repository(strings.TrimPrefix(res.Chart, "oci://"), false)
	if err != nil {
		t.Fatal(err)
	}
	cpayload, cann := attached(t, charts, res.ChartDigest, "sig")
	if err := VerifyBlob(made.pubPEM, cpayload, []byte(cann[SignatureAnnotation])); err != nil {
		t.Errorf("chart signature: %v", err)
	}

	// Publishing again finds everything in place.
	if again := pub(); again.ChartDigest != res.ChartDigest || again.ImageDigest != res.ImageDigest {
		t.Errorf("second publish: %+v, first %+v", again, res)
	}

	// Install the pulled chart as a user would, image from the registry.
	e := testenv.Need(t)
	ch, err := loader.LoadArchive(bytes.NewReader(pulled.Chart.Data))
	if err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := testenv.WriteKubeconfig(kc, "admin", map[string]*rest.Config{"admin": e.Config}); err != nil {
		t.Fatal(err)
	}
	const ns = "kubeblade-registry"
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = ptr(kc)
	flags.Namespace = ptr(ns)
	cfg := action.NewConfiguration()
	if err := cfg.Init(flags, ns, "secret"); err != nil {
		t.Fatal(err)
	}
	inst := action.NewInstall(cfg)
	inst.ReleaseName = "kubeblade"
	inst.Namespace = ns
	inst.CreateNamespace = true
	inst.WaitStrategy = kube.HookOnlyStrategy
	inst.Timeout = 3 * time.Minute
	ictx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if _, err := inst.RunWithContext(ictx, ch, map[string]any{"image": map[string]any{"repository": img.Reference.String()}}); err != nil {
		t.Fatalf("helm install: %v", err)
	}
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	deps, err := cs.AppsV1().Deployments(ns).List(ictx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(deps.Items) != 1 {
		t.Fatalf("%d Deployments after install", len(deps.Items))
	}
	if got := operatorImage(deps.Items[0]); got != res.Image {
		t.Errorf("the installed operator runs %q, want %q", got, res.Image)
	}
}

// attached reads the one layer of the cosign tag suffix of digest in repo,
// with its annotations.
func attached(t *testing.T, repo *remote.Repository, digest, suffix string) ([]byte, map[string]string) {
	t.Helper()
	ctx := context.Background()
	d, err := repo.Resolve(ctx, CosignTag(digest, suffix))
	if err != nil {
		t.Fatalf("%s:%s: %v", repo.Reference, CosignTag(digest, suffix), err)
	}
	b, err := content.FetchAll(ctx, repo, d)
	if err != nil {
		t.Fatal(err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Layers) != 1 {
		t.Fatalf("%s: %d layers", CosignTag(digest, suffix), len(m.Layers))
	}
	data, err := content.FetchAll(ctx, repo, m.Layers[0])
	if err != nil {
		t.Fatal(err)
	}
	return data, m.Layers[0].Annotations
}

func operatorImage(d appsv1.Deployment) string {
	if len(d.Spec.Template.Spec.Containers) == 0 {
		return ""
	}
	return d.Spec.Template.Spec.Containers[0].Image
}

func ptr[T any](v T) *T { return &v }

// TestPublishRefusesBadInput: each bad input ends in its own clear error
// before anything is pushed, and what a refused run leaves does not stop
// a good one.
func TestPublishRefusesBadInput(t *testing.T) {
	dir := release(t)
	v := made.opts.Version
	open := testregistry.Start(t, testregistry.Options{})
	locked := testregistry.Start(t, testregistry.Options{Htpasswd: testregistry.TestHtpasswd})
	// A port nothing listens on: a registry that was stopped.
	gone := testregistry.Start(t, testregistry.Options{})
	goneHost := gone.Host
	gone.Stop()
	root := cleanRepo(t)

	publish := func(o PublishOptions) error {
		t.Helper()
		if o.Root == "" {
			o.Root = root
		}
		if o.Dist == "" {
			o.Dist = dir
		}
		_, err := Publish(context.Background(), o)
		return err
	}
	images := func(host string) []string {
		t.Helper()
		reg, err := remote.NewRegistry(host)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := Repository(host+"/x", false)
		reg.Client, reg.PlainHTTP = r.Client, true
		var repos []string
		if err := reg.Repositories(context.Background(), "", func(rs []string) error {
			repos = append(repos, rs...)
			return nil
		}); err != nil {
			t.Fatalf("catalog of %s: %v", host, err)
		}
		return repos
	}

	t.Run("no version", func(t *testing.T) {
		dockerConfig(t, "", "", "")
		err := publish(PublishOptions{Registry: open.Host + "/x"})
		wantErr(t, err, "no version")
	})
	t.Run("not SemVer", func(t *testing.T) {
		dockerConfig(t, "", "", "")
		wantErr(t, publish(PublishOptions{Version: "0.1.0", Registry: open.Host + "/x"}), "must start with v")
	})
	t.Run("version not in dist", func(t *testing.T) {
		dockerConfig(t, "", "", "")
		wantErr(t, publish(PublishOptions{Version: v + "-other", Registry: open.Host + "/x"}), "run make image with the same VERSION")
	})
	t.Run("unreachable", func(t *testing.T) {
		dockerConfig(t, "", "", "")
		wantErr(t, publish(PublishOptions{Version: v, Registry: goneHost + "/x"}), "unreachable")
	})
	t.Run("authentication refused", func(t *testing.T) {
		dockerConfig(t, locked.Host, testregistry.TestUser, "wrong-password")
		wantErr(t, publish(PublishOptions{Version: v, Registry: locked.Host + "/x"}), "refused the credentials")
		dockerConfig(t, locked.Host, testregistry.TestUser, testregistry.TestPassword)
		if repos := images(locked.Host); len(repos) != 0 {
			t.Errorf("a refused publish left %v", repos)
		}
		// The next run, logged in, completes.
		if err := publish(PublishOptions{Version: v, Registry: locked.Host + "/x"}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("already published with different content", func(t *testing.T) {
		dockerConfig(t, "", "", "")
		taken, err := Repository(open.Host+"/taken/kubeblade", false)
		if err != nil {
			t.Fatal(err)
		}
		// Another manifest under the release's tag.
		if err := attach(context.Background(), taken, "sha256:"+strings.Repeat("0", 64), "other", "text/plain", []byte("not kubeblade"), nil, "2020-01-01T00:00:00Z"); err != nil {
			t.Fatal(err)
		}
		d, err := taken.Resolve(context.Background(), CosignTag("sha256:"+strings.Repeat("0", 64), "other"))
		if err != nil {
			t.Fatal(err)
		}
		if err := taken.Tag(context.Background(), d, v); err != nil {
			t.Fatal(err)
		}
		wantErr(t, publish(PublishOptions{Version: v, Registry: open.Host + "/taken"}), "already published with different content")
		if got := images(open.Host); strings.Contains(strings.Join(got, " "), "taken/charts") {
			t.Errorf("the refused publish pushed the chart: %v", got)
		}
	})
	t.Run("dirty tree for a release version", func(t *testing.T) {
		dockerConfig(t, "", "", "")
		repo := cleanRepo(t)
		f := filepath.Join(repo, "README")
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("git", "-C", repo, "-c", "user.email=t@example.com", "-c", "user.name=t", "add", "README").CombinedOutput(); err != nil {
			t.Fatalf("%v %s", err, out)
		}
		// v1.2.3 is not a dev version; dist holds another, but the tree is
		// checked first.
		wantErr(t, publish(PublishOptions{Root: repo, Version: "v1.2.3", Registry: open.Host + "/x"}), "uncommitted changes")
		if IsDevVersion("v1.2.3") || !IsDevVersion("v0.0.0-dev-gabc") {
			t.Error("IsDevVersion")
		}
	})
}

// cleanRepo is a git repository without uncommitted changes: the tree
// Publish checks, so that the tests do not depend on this checkout's state.
func cleanRepo(t *testing.T) string {
	t.Helper()
	repo := t.TempDir()
	for _, args := range [][]string{{"init", "-q"}, {"-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "x"}} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return repo
}

func wantErr(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one saying %q", want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}
	t.Logf("refused: %v", err)
}
