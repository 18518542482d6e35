package talostest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const root = "../.."

// TestDocsPatches validates every Talos machine-config patch in docs/*.md
// (its ```yaml blocks whose top level is `machine`/`cluster`) with Talos's
// configpatcher and metal-mode validation.
func TestDocsPatches(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no docs found: %v", err)
	}
	var patches []Block
	for _, f := range files {
		blocks, err := YAMLBlocks(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks {
			if IsMachineConfigPatch(b.Text) {
				patches = append(patches, b)
			}
		}
	}
	// docs/talos.md: the install image and the kubeblade-leds module.
	if len(patches) < 2 {
		t.Fatalf("found %d Talos patches in docs/, want at least 2 (docs/talos.md's): %v", len(patches), patches)
	}
	for _, b := range patches {
		t.Run(strings.TrimPrefix(b.String(), root+"/"), func(t *testing.T) {
			text, err := FillPlaceholders(b.Text)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Validate([]byte(text)); err != nil {
				t.Fatalf("%s:\n%s\n%v", b, b.Text, err)
			}
		})
	}
}

// TestDeployTalosPatches validates every machine-config patch under
// deploy/talos/ and checks what the kubeblade-leds patch makes Talos load.
func TestDeployTalosPatches(t *testing.T) {
	var found []string
	err := filepath.WalkDir(filepath.Join(root, "deploy", "talos"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || (!strings.HasSuffix(path, ".yaml") && !strings.HasSuffix(path, ".yml")) {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !IsMachineConfigPatch(string(data)) {
			return nil
		}
		found = append(found, path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) == 0 {
		t.Fatal("no machine-config patch under deploy/talos")
	}
	for _, path := range found {
		t.Run(strings.TrimPrefix(path, root+"/"), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := Validate(data)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if filepath.Base(filepath.Dir(path)) != "kubeblade-leds" {
				return
			}
			var params []string
			for _, m := range cfg.Machine().Kernel().Modules() {
				if m.Name() == "kubeblade-leds" {
					params = m.Parameters()
				}
			}
			if !slices.Contains(params, "backend=auto") {
				t.Fatalf("patched config loads kubeblade-leds with %q, want backend=auto", params)
			}
		})
	}
}

// TestExtensionManifest renders the kubeblade-leds extension recipe and
// validates it with machinery's extension loader and validation against
// this module's Talos release.
func TestExtensionManifest(t *testing.T) {
	recipe := filepath.Join(root, "deploy", "talos", "kubeblade-leds", "extensions", "drivers", "kubeblade-leds")
	dir, err := ExtensionDir(recipe, t.TempDir(), "6.18.0-talos")
	if err != nil {
		t.Fatal(err)
	}
	ext, err := ValidateExtension(dir, TalosVersion)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ext.Manifest.Metadata.Name, "kubeblade-leds"; got != want {
		t.Errorf("name %q, want %q", got, want)
	}
	if got, want := ext.Manifest.Metadata.Version, "0.1.0-"+TalosVersion; got != want {
		t.Errorf("version %q, want %q", got, want)
	}
	// The recipe's constraint (">= v1.12.0") refuses an older Talos.
	if _, err := ValidateExtension(dir, "v1.11.5"); err == nil || !strings.Contains(err.Error(), "can't be satisfied") {
		t.Errorf("validating against Talos v1.11.5: %v, want Talos's version-constraint error", err)
	}
}

// TestBrokenPatchIsCaught proves the validation refuses what Talos refuses,
// with Talos's own message.
func TestBrokenPatchIsCaught(t *testing.T) {
	for _, tc := range []struct {
		name, patch, want string
	}{
		{
			name:  "misspelt field",
			patch: "machine:\n  kernel:\n    module:\n      - name: kubeblade-leds\n",
			want:  "unknown keys found during decoding",
		},
		{
			name:  "modules is a list, not a string",
			patch: "machine:\n  kernel:\n    modules: kubeblade-leds\n",
			want:  "cannot unmarshal",
		},
		{
			name:  "node label name Kubernetes refuses",
			patch: "machine:\n  nodeLabels:\n    \"kubeblade.io/fan unit\": smart\n",
			want:  `name "fan unit" is invalid`,
		},
		{
			// A Talos 1.12 machine config boots with the UKI's command line.
			name:  "install.extraKernelArgs on a Talos 1.12 config",
			patch: "machine:\n  install:\n    extraKernelArgs:\n      - pinctrl_bcm2835.persist_gpio_outputs=1\n",
			want:  "install.extraKernelArgs and install.grubUseUKICmdline can't be used together",
		},
		{
			name:  "JSON patch against a multi-document config",
			patch: `[{"op": "add", "path": "/machine/kernel/modules", "value": [{"name": "kubeblade-leds"}]}]`,
			want:  "JSON6902 patches are not supported for multi-document machine configuration",
		},
		{
			name:  "not a patch at all",
			patch: "overlay:\n  name: rpi_generic\n",
			want:  "missing kind",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Validate([]byte(tc.patch))
			if err == nil {
				t.Fatalf("Talos accepted a broken patch:\n%s", tc.patch)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not contain Talos's %q", err, tc.want)
			}
			t.Logf("Talos says: %v", err)
		})
	}
}

// TestBrokenExtensionIsCaught: a file outside the paths Talos allows in an
// extension, and a manifest of an unknown version, are refused.
func TestBrokenExtensionIsCaught(t *testing.T) {
	recipe := filepath.Join(root, "deploy", "talos", "kubeblade-leds", "extensions", "drivers", "kubeblade-leds")
	t.Run("disallowed path", func(t *testing.T) {
		dir, err := ExtensionDir(recipe, t.TempDir(), "6.18.0-talos")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, "rootfs", "usr", "lib64"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "rootfs", "usr", "lib64", "kubeblade-leds.ko"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = ValidateExtension(dir, TalosVersion)
		if err == nil || !strings.Contains(err.Error(), `path "/usr/lib64/kubeblade-leds.ko" is not allowed in extensions`) {
			t.Fatalf("got %v, want Talos's disallowed-path error", err)
		}
	})
	t.Run("manifest version", func(t *testing.T) {
		dir, err := ExtensionDir(recipe, t.TempDir(), "6.18.0-talos")
		if err != nil {
			t.Fatal(err)
		}
		m := filepath.Join(dir, "manifest.yaml")
		data, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(m, []byte(strings.Replace(string(data), "version: v1alpha1", "version: v1alpha2", 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = ValidateExtension(dir, TalosVersion)
		if err == nil || !strings.Contains(err.Error(), `unsupported manifest version: "v1alpha2"`) {
			t.Fatalf("got %v, want Talos's manifest-version error", err)
		}
	})
}

// TestYAMLBlocks: the block finder sees indented blocks in list items and
// skips other languages.
func TestYAMLBlocks(t *testing.T) {
	md := filepath.Join(t.TempDir(), "x.md")
	text := "a\n```sh\nmachine: no\n```\n1. item\n\n   ```yaml\n   machine:\n     kernel: {}\n   ```\n```\nplain\n```\n"
	if err := os.WriteFile(md, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	blocks, err := YAMLBlocks(md)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 1 || blocks[0].Line != 7 || blocks[0].Text != "machine:\n  kernel: {}\n" {
		t.Fatalf("blocks %+v", blocks)
	}
	if !IsMachineConfigPatch(blocks[0].Text) || IsMachineConfigPatch("overlay:\n  name: rpi_5\n") {
		t.Fatal("IsMachineConfigPatch misclassifies")
	}
}

// TestDoctorPatches validates the machine-config patches `bladectl doctor`
// prints (internal/doctor/talos/*.yaml, embedded into bladectl), with the
// placeholders filled in as a user would.
func TestDoctorPatches(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(root, "internal", "doctor", "talos", "*.yaml"))
	if err != nil || len(files) < 2 {
		t.Fatalf("doctor's Talos patches: %v %v", files, err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !IsMachineConfigPatch(string(data)) {
				t.Fatalf("%s is not a machine-config patch", path)
			}
			text, err := FillPlaceholders(string(data))
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := Validate([]byte(text))
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if img := cfg.Machine().Install().Image(); strings.Contains(img, "<") || img == "" {
				t.Fatalf("install image %q", img)
			}
		})
	}
}
