package gpio_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeblade/kubeblade/internal/hardware/linux/gpio"
	"github.com/kubeblade/kubeblade/internal/hardware/linux/gpio/gpiotest"
)

func devTree(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestChipPathsNumericOrder(t *testing.T) {
	dev := devTree(t, "gpiochip10", "gpiochip2", "gpiochip0", "ttyAMA0")
	got, err := gpio.ChipPaths(dev)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dev, "gpiochip0"), filepath.Join(dev, "gpiochip2"), filepath.Join(dev, "gpiochip10")}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

func TestFindChip(t *testing.T) {
	dev := devTree(t, "gpiochip0", "gpiochip1", "gpiochip4")
	d := gpiotest.NewDriver()
	brcm := d.AddChip(filepath.Join(dev, "gpiochip0"), "gpiochip0", "gpio-brcmstb@107d508500", 32)
	aon := d.AddChip(filepath.Join(dev, "gpiochip1"), "gpiochip1", "gpio-brcmstb@107d517c00", 15)
	rp1 := d.AddChip(filepath.Join(dev, "gpiochip4"), "gpiochip4", "pinctrl-rp1", 54)

	c, err := gpio.FindChip(d, dev, "pinctrl-bcm2711", "pinctrl-rp1")
	if err != nil {
		t.Fatal(err)
	}
	if c.Label() != "pinctrl-rp1" {
		t.Fatalf("found %s", c.Label())
	}
	if !brcm.Closed() || !aon.Closed() || rp1.Closed() {
		t.Fatalf("non-matching chips must be closed, the match kept open")
	}
	if c, err := gpio.FindChip(d, dev, "gpiochip1"); err != nil || c.Name() != "gpiochip1" {
		t.Fatalf("by name: %v, %v", c, err)
	}
	if _, err := gpio.FindChip(d, dev, "pinctrl-bcm2711"); !errors.Is(err, gpio.ErrNoChip) {
		t.Fatalf("want ErrNoChip, got %v", err)
	}
	if diff := cmp.Diff([]string{"gpio-brcmstb@107d508500", "gpio-brcmstb@107d517c00", "pinctrl-rp1"}, gpio.Labels(d, dev)); diff != "" {
		t.Fatalf("labels (-want +got):\n%s", diff)
	}
}

func TestResolve(t *testing.T) {
	d := gpiotest.NewDriver()
	named := d.AddChip("/x/gpiochip0", "gpiochip0", "pinctrl-bcm2711", 58).NameLine(33, "GPIO20")
	unnamed := d.AddChip("/x/gpiochip1", "gpiochip1", "pinctrl-bcm2711", 58)
	cases := map[string]struct {
		chip    gpio.Chip
		spec    gpio.LineSpec
		want    int
		wantErr bool
	}{
		"name wins over offset":       {chip: named, spec: gpio.LineSpec{Name: "GPIO20", Offset: 20}, want: 33},
		"offset fallback":             {chip: unnamed, spec: gpio.LineSpec{Name: "GPIO20", Offset: 20}, want: 20},
		"name only, missing":          {chip: unnamed, spec: gpio.LineSpec{Name: "GPIO20", Offset: -1}, wantErr: true},
		"offset out of range":         {chip: unnamed, spec: gpio.LineSpec{Offset: 99}, wantErr: true},
		"parsed offset":               {chip: named, spec: gpio.ParseLineSpec("7", gpio.LineSpec{Name: "GPIO20", Offset: 20}), want: 7},
		"parsed name":                 {chip: named, spec: gpio.ParseLineSpec("GPIO20", gpio.LineSpec{Offset: 1}), want: 33},
		"empty config takes defaults": {chip: unnamed, spec: gpio.ParseLineSpec(" ", gpio.LineSpec{Name: "GPIO21", Offset: 21}), want: 21},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := gpio.Resolve(tc.chip, tc.spec)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if err == nil && got != tc.want {
				t.Fatalf("offset %d, want %d", got, tc.want)
			}
		})
	}
}

func TestCDevRefusesNonDevices(t *testing.T) {
	dev := devTree(t, "gpiochip0")
	if _, err := (gpio.CDev{}).Open(filepath.Join(dev, "gpiochip0")); err == nil {
		t.Fatal("a regular file opened as a GPIO chip")
	}
	if (gpio.CDev{}).Now() <= 0 {
		t.Fatal("CLOCK_MONOTONIC reads 0")
	}
}
