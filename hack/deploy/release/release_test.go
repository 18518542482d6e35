package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"debug/buildinfo"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubeblade/kubeblade/hack/deploy/image"
	"github.com/kubeblade/kubeblade/internal/testenv"
	"github.com/kubeblade/kubeblade/internal/testreq"
)

// The image layout the release tests take (make image's dist/image, built
// for the version below with the Makefile's flags): the Makefile's
// deploy-test passes them.
const (
	envLayout  = "KUBEBLADE_IMAGE_LAYOUT"
	envVersion = "KUBEBLADE_RELEASE_VERSION"
	envLDFlags = "KUBEBLADE_RELEASE_LDFLAGS"
	envCreated = "KUBEBLADE_RELEASE_CREATED"
	envTags    = "KUBEBLADE_RELEASE_TAGS"
)

// made is one release shared by the tests that read it, made with an
// Ed25519 key (deterministic signatures), and a second one of the same
// inputs for the reproducibility test.
var made struct {
	once       sync.Once
	err        error
	opts       Options
	a, b       string
	res        *Result
	key, pub   string
	pubPEM     []byte
	chartBytes []byte
}

func testOptions(t *testing.T) Options {
	t.Helper()
	layout := os.Getenv(envLayout)
	version := os.Getenv(envVersion)
	if layout == "" || version == "" {
		testreq.Unavailable(t, "%s and %s are not set: make deploy-test sets them to make image's layout and its VERSION", envLayout, envVersion)
	}
	if _, err := os.Stat(filepath.Join(layout, "index.json")); err != nil {
		testreq.Unavailable(t, "no image layout: %v (make image writes it)", err)
	}
	var created int64
	if _, err := fmt.Sscan(os.Getenv(envCreated), &created); err != nil {
		t.Fatalf("%s=%q: %v", envCreated, os.Getenv(envCreated), err)
	}
	return Options{
		Root: testenv.RepoRoot(), Version: version, Commit: "0123456789abcdef0123456789abcdef01234567",
		Created: time.Unix(created, 0).UTC(), LDFlags: os.Getenv(envLDFlags), Tags: os.Getenv(envTags), ImageLayout: layout,
	}
}

// release makes (once) the shared releases and returns the first's directory.
func release(t *testing.T) string {
	t.Helper()
	o := testOptions(t)
	made.once.Do(func() {
		dir, err := os.MkdirTemp("", "kubeblade-release-test-")
		if err != nil {
			made.err = err
			return
		}
		made.key = filepath.Join(dir, "key.pem")
		if made.err = writeEd25519Key(made.key); made.err != nil {
			return
		}
		made.a, made.b = filepath.Join(dir, "a"), filepath.Join(dir, "b")
		o.Key = made.key
		made.opts = o
		// The releases are made by the deploytool command as make release
		// runs it, built without -race: compressing the archives in this
		// -race test binary takes minutes each.
		tool := filepath.Join(dir, "deploytool")
		build := exec.Command("go", "build", "-trimpath", "-o", tool, ".")
		build.Dir = filepath.Join(o.Root, "hack", "deploy")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			made.err = fmt.Errorf("go build deploytool: %v\n%s", err, out)
			return
		}
		for i, out := range []string{made.a, made.b} {
			cmd := exec.Command(tool, "release", "-out", out, "-image", o.ImageLayout, "-version", o.Version,
				"-commit", o.Commit, "-created", fmt.Sprint(o.Created.Unix()), "-tags", o.Tags, "-ldflags", o.LDFlags, "-key", o.Key)
			cmd.Dir = o.Root
			if b, err := cmd.CombinedOutput(); err != nil {
				made.err = fmt.Errorf("release %d: %v\n%s", i+1, err, b)
				return
			}
		}
		digest, err := LayoutIndex(filepath.Join(made.a, ImageDir), o.Version)
		if err != nil {
			made.err = err
			return
		}
		made.res = &Result{ImageDigest: digest}
		if made.pubPEM, made.err = os.ReadFile(filepath.Join(made.a, PublicKey)); made.err != nil {
			return
		}
		made.chartBytes, made.err = os.ReadFile(filepath.Join(made.a, ChartFile(ChartVersion(o.Version))))
	})
	if made.err != nil {
		t.Fatal(made.err)
	}
	return made.a
}

func writeEd25519Key(path string) error {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
}

// TestMain starts the API server the chart is installed into.
func TestMain(m *testing.M) {
	code := testenv.Main(m, testenv.Options{}, func(e *testenv.Env) { env = e })
	if made.a != "" {
		os.RemoveAll(filepath.Dir(made.a))
	}
	os.Exit(code)
}

var env *testenv.Env

// TestReleaseIsReproducible: two releases of one commit are the same
// bytes, file for file (archives, chart, SBOMs, checksums, provenance and,
// with an Ed25519 key, the signatures), and rebuilding the image with the
// Makefile's flags gives the digest of the layout make image wrote.
func TestReleaseIsReproducible(t *testing.T) {
	a := release(t)
	fa, fb := tree(t, a), tree(t, made.b)
	if len(fa) < 20 {
		t.Fatalf("release has %d files: %v", len(fa), keys(fa))
	}
	for name, sum := range fa {
		if fb[name] != sum {
			t.Errorf("%s differs between two releases of one commit", name)
		}
	}
	for name := range fb {
		if _, ok := fa[name]; !ok {
			t.Errorf("%s only in the second release", name)
		}
	}
	o := made.opts
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	idx, err := image.Build(ctx, image.Options{Root: o.Root, Out: filepath.Join(t.TempDir(), "image"), Version: o.Version, LDFlags: o.LDFlags, Tags: o.Tags, Created: o.Created})
	if err != nil {
		t.Fatal(err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if d != made.res.ImageDigest {
		t.Errorf("the image rebuilt has digest %s, make image's %s", d, made.res.ImageDigest)
	}
}

func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		m[rel] = sha256Hex(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func keys[V any](m map[string]V) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	return k
}

// TestReleaseCarriesItsVersion: one version in every artefact: the
// image's ref name and binaries, the chart's version and appVersion and
// its default image, each archive's binary, the krew manifest, the DKMS
// package, the SBOMs and the provenance.
func TestReleaseCarriesItsVersion(t *testing.T) {
	dir := release(t)
	v := made.opts.Version
	cv := ChartVersion(v)
	if _, err := LayoutIndex(filepath.Join(dir, ImageDir), v); err != nil {
		t.Error(err)
	}
	ch := chartFiles(t, made.chartBytes)
	var meta struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yamlUnmarshal(ch["kubeblade/Chart.yaml"], &meta); err != nil {
		t.Fatal(err)
	}
	if meta.Version != cv || meta.AppVersion != v {
		t.Errorf("chart version %q appVersion %q, want %q and %q", meta.Version, meta.AppVersion, cv, v)
	}
	img, err := renderedImage(made.chartBytes, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := DefaultImageRepository + ":" + v; img != want {
		t.Errorf("the chart's default image is %q, want %q", img, want)
	}
	for _, a := range Archives {
		files := tgzFiles(t, filepath.Join(dir, a.FileName(v)))
		bi, err := buildinfo.Read(bytes.NewReader(files[a.Binary]))
		if err != nil {
			t.Fatalf("%s: %v", a.FileName(v), err)
		}
		// -trimpath builds do not record -ldflags in the build info; the
		// stamped string is in the binary's data.
		if !bytes.Contains(files[a.Binary], []byte(v)) {
			t.Errorf("%s: %s is not stamped with %s", a.FileName(v), a.Binary, v)
		}
		if setting(bi, "GOOS") != a.OS || setting(bi, "GOARCH") != a.Arch {
			t.Errorf("%s: built for %s/%s", a.FileName(v), setting(bi, "GOOS"), setting(bi, "GOARCH"))
		}
	}
	krew, err := os.ReadFile(filepath.Join(dir, KrewManifest))
	if err != nil {
		t.Fatal(err)
	}
	var p krewPlugin
	if err := yamlUnmarshal(krew, &p); err != nil {
		t.Fatal(err)
	}
	if p.Spec.Version != v || len(p.Spec.Platforms) != 4 {
		t.Errorf("krew manifest: version %q, %d platforms", p.Spec.Version, len(p.Spec.Platforms))
	}
	sums := checksums(t, dir)
	for _, pl := range p.Spec.Platforms {
		name := pl.URI[strings.LastIndex(pl.URI, "/")+1:]
		if !strings.HasPrefix(pl.URI, DefaultDownloadURL+"/"+v+"/") || sums[name] == "" || pl.SHA256 != sums[name] {
			t.Errorf("krew platform %v: uri %s sha256 %s; SHA256SUMS has %q", pl.Selector.MatchLabels, pl.URI, pl.SHA256, sums[name])
		}
	}
	dkms := tgzFiles(t, filepath.Join(dir, "kubeblade-leds-dkms-"+cv+".tar.gz"))
	if !bytes.Contains(dkms["kubeblade-leds-"+cv+"/dkms.conf"], []byte(`PACKAGE_VERSION="`+cv+`"`)) {
		t.Errorf("DKMS package's dkms.conf lacks PACKAGE_VERSION=%q", cv)
	}
	talos := tgzFiles(t, filepath.Join(dir, "kubeblade-leds-talos-"+cv+".tar.gz"))
	for _, f := range []string{"deploy/talos/kubeblade-leds/pkgs/kubeblade-leds/pkg.yaml", "kernel/kubeblade-leds/core.c"} {
		if _, ok := talos["kubeblade-leds-talos-"+cv+"/"+f]; !ok {
			t.Errorf("Talos build context lacks %s", f)
		}
	}
	var bom struct {
		Metadata struct {
			Component struct{ Version string } `json:"component"`
		} `json:"metadata"`
	}
	b, _ := os.ReadFile(filepath.Join(dir, ImageSBOM))
	if err := json.Unmarshal(b, &bom); err != nil || bom.Metadata.Component.Version != v {
		t.Errorf("image SBOM's subject version %q (%v), want %q", bom.Metadata.Component.Version, err, v)
	}
}

func setting(bi *buildinfo.BuildInfo, key string) string {
	for _, s := range bi.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}

// TestArchivesAreNormalised: every archive entry is owned by root, has the
// release's mtime and no user or group name.
func TestArchivesAreNormalised(t *testing.T) {
	dir := release(t)
	for name := range checksums(t, dir) {
		if !strings.HasSuffix(name, ".tar.gz") {
			continue
		}
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		if !zr.ModTime.IsZero() || zr.Name != "" {
			t.Errorf("%s: gzip header has name %q time %s", name, zr.Name, zr.ModTime)
		}
		tr := tar.NewReader(zr)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" || !h.ModTime.Equal(made.opts.Created) {
				t.Errorf("%s: %s: uid %d gid %d %q %q mtime %s", name, h.Name, h.Uid, h.Gid, h.Uname, h.Gname, h.ModTime)
			}
		}
		f.Close()
	}
}

func checksums(t *testing.T, dir string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, Checksums))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q", line)
		}
		m[name] = sum
	}
	return m
}

func tgzFiles(t *testing.T, path string) map[string][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := untgz(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

func chartFiles(t *testing.T, b []byte) map[string][]byte {
	t.Helper()
	m, err := untgz(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func untgz(b []byte) (map[string][]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(zr)
	m := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return m, nil
		}
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		m[h.Name] = data
	}
}
