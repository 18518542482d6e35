package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/kubeblade/kubeblade/internal/atomicfile"
	"github.com/kubeblade/kubeblade/internal/migrate"
)

// errReported is an error whose explanation is already on stderr.
var errReported = errors.New("nothing written")

// migrateConfig is `kubeblade-agent migrate-config [flags] [path]`: the old
// agent's config.yaml to an agent.yaml or a BladeConfig (internal/migrate
// does the translation).
func migrateConfig(args []string, stdout, stderr io.Writer) error {
	flags := flag.NewFlagSet("kubeblade-agent migrate-config", flag.ContinueOnError)
	flags.SetOutput(stderr)
	output := flags.String("o", "agent", "what to write: agent (an /etc/kubeblade/agent.yaml) or bladeconfig (a BladeConfig for the cluster)")
	name := flags.String("name", migrate.BladeConfigName, "the BladeConfig's name (-o bladeconfig)")
	write := flags.String("write", "", "write the result to this file (only if it does not exist, unless --force) instead of stdout")
	force := flags.Bool("force", false, "let --write replace an existing file")
	speedAsPercent := flags.Bool("speed-as-percent", false, "take fan_controller.steps[].speed, which the old agent never read (it ran such steps at 0 %), as the percent it meant")
	flags.Usage = func() {
		fmt.Fprintf(stderr, `Usage: kubeblade-agent migrate-config [flags] [PATH]

Translates compute-blade-agent's config (PATH, default %s,
else %s) into kubeblade's. Keys without an equivalent are
reported on stderr; a file that cannot be translated is reported by key and
line, and nothing is written.

`, migrate.OldAgentConfigPath, migrate.OlderAgentConfigPath)
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		return err
	}
	if flags.NArg() > 1 {
		return fmt.Errorf("migrate-config takes one path, got %q", flags.Args())
	}
	target := migrate.TargetAgentFile
	switch *output {
	case "agent":
	case "bladeconfig":
		target = migrate.TargetBladeConfig
	default:
		return fmt.Errorf("-o %q: want agent or bladeconfig", *output)
	}
	path := flags.Arg(0)
	if path == "" {
		path = migrate.OldAgentConfigPath
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			if _, err := os.Stat(migrate.OlderAgentConfigPath); err == nil {
				path = migrate.OlderAgentConfigPath
			}
		}
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	res, err := migrate.TranslateAgentConfig(raw, path, target, migrate.TranslateOptions{SpeedAsPercent: *speedAsPercent})
	if findings, ok := migrate.AsError(err); ok {
		for _, f := range findings {
			fmt.Fprintf(stderr, "error: %s\n", f)
		}
		return errReported
	}
	if err != nil {
		return err
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	abs, _ := filepath.Abs(path)
	var out []byte
	if target == migrate.TargetBladeConfig {
		out, err = res.BladeConfigYAML(abs, *name)
	} else {
		out, err = res.AgentYAML(abs)
	}
	if err != nil {
		return err
	}
	if *write == "" {
		_, err := stdout.Write(out)
		return err
	}
	if _, err := os.Stat(*write); err == nil && !*force {
		return fmt.Errorf("%s exists; pass --force to replace it", *write)
	}
	if err := os.MkdirAll(filepath.Dir(*write), 0o755); err != nil {
		return err
	}
	if err := atomicfile.Write(*write, out, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "wrote %s\n", *write)
	return nil
}
