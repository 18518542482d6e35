// Package testbrowser starts headless Chromium for browser tests and
// harnesses, driven through chromedp: Debian's chromium package, a fresh
// profile each time, and the flags a machine without internet needs.
package testbrowser

import (
	"context"
	"errors"
	"os"
	"os/exec"

	"github.com/chromedp/chromedp"
)

// EnvPath names a Chromium binary to use instead of looking on PATH.
const EnvPath = "KUBEBLADE_CHROMIUM"

// ErrNotFound means no Chromium was found.
var ErrNotFound = errors.New("no Chromium found: install Debian's chromium package (apt-get install chromium) or set " + EnvPath)

// Path finds Chromium: $KUBEBLADE_CHROMIUM, else chromium,
// chromium-browser or google-chrome on PATH.
func Path() (string, error) {
	if p := os.Getenv(EnvPath); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", err
		}
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", ErrNotFound
}

// Browser is a running headless Chromium.
type Browser struct {
	// Ctx runs the browser: chromedp.NewContext(Ctx) opens a tab in it.
	Ctx context.Context
	// Profile is its user data directory, which every one of its
	// processes names on its command line (harnesses find them by it).
	Profile string
	stop    func()
}

// Stop stops the browser and removes its profile.
func (b *Browser) Stop() { b.stop() }

// Start launches a headless browser.
func Start(ctx context.Context) (*Browser, error) {
	path, err := Path()
	if err != nil {
		return nil, err
	}
	profile, err := os.MkdirTemp("", "kubeblade-chromium-")
	if err != nil {
		return nil, err
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.UserDataDir(profile),
		// Running as root in a container: no sandbox. No GPU here.
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		// Without these Chromium keeps dialling Google's services, which a
		// closed network refuses, many at a time.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
	)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	bctx, bcancel := chromedp.NewContext(actx)
	stop := func() {
		bcancel()
		acancel()
		_ = os.RemoveAll(profile)
	}
	// Start the browser now, so a broken install fails here.
	if err := chromedp.Do(bctx); err != nil {
		stop()
		return nil, err
	}
	return &Browser{Ctx: bctx, Profile: profile, stop: stop}, nil
}
