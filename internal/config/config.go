// Package config loads and validates the agent's configuration: defaults,
// then the YAML file, then KUBEBLADE_<PATH> environment variables, then
// validation that names the offending key. It also turns a validated config
// into the settings the agent core runs with.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"unicode"

	"sigs.k8s.io/yaml"

	agentconfigv1 "github.com/kubeblade/kubeblade/api/agentconfig/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/core"
	"github.com/kubeblade/kubeblade/internal/fancurve"
	"github.com/kubeblade/kubeblade/internal/hardware"
	"github.com/kubeblade/kubeblade/internal/hardware/linux/devnode"
)

// DefaultPath is where the standalone agent looks for its config file.
const DefaultPath = "/etc/kubeblade/agent.yaml"

// EnvPrefix starts every environment override.
const EnvPrefix = "KUBEBLADE_"

// Defaults as the spec gives them.
const (
	DefaultCriticalCelsius   = 60
	DefaultHysteresisCelsius = 5
	DefaultIdleColor         = "#001000"
	DefaultIdentifyColor     = "#100010"
	DefaultCriticalColor     = "#400000"
	// Maintenance amber, safe-to-pull blue (the colour servers use for
	// "may be removed"), node attention yellow; dim like the others.
	DefaultMaintenanceColor   = "#301000"
	DefaultSafeToPullColor    = "#000040"
	DefaultNodeAttentionColor = "#302000"
	DefaultFanPeerLostPercent = 60
	DefaultSocketPath         = "/run/kubeblade/agent.sock"
	DefaultRemotePort         = 8081
	DefaultMetricsAddress     = ":9666"
	DefaultThermalZoneType    = "cpu-thermal"
)

// Default returns the configuration used where nothing else is set.
func Default() agentconfigv1.AgentConfig {
	tach := true
	lost := int32(DefaultFanPeerLostPercent)
	return agentconfigv1.AgentConfig{
		FanPeerLostPercent: &lost,
		FanCurve: []agentconfigv1.FanCurveStep{
			{TemperatureCelsius: 45, Percent: 40},
			{TemperatureCelsius: 55, Percent: 80},
		},
		CriticalCelsius:   DefaultCriticalCelsius,
		HysteresisCelsius: DefaultHysteresisCelsius,
		TachEnabled:       &tach,
		LEDs: agentconfigv1.LEDColors{
			IdleColor:     DefaultIdleColor,
			IdentifyColor: DefaultIdentifyColor,
			CriticalColor: DefaultCriticalColor,

			MaintenanceColor:   DefaultMaintenanceColor,
			SafeToPullColor:    DefaultSafeToPullColor,
			NodeAttentionColor: DefaultNodeAttentionColor,
		},
		Hardware: agentconfigv1.HardwareConfig{Backend: agentconfigv1.BackendAuto},
		GRPC: agentconfigv1.GRPCConfig{
			SocketPath: DefaultSocketPath,
			Remote:     agentconfigv1.RemoteGRPCConfig{Port: DefaultRemotePort},
		},
		Metrics: agentconfigv1.MetricsConfig{BindAddress: DefaultMetricsAddress},
	}
}

// Load reads the config file at path (a missing file means defaults),
// applies environment overrides from environ (os.Environ() form) and
// validates the result. Errors name the file, variable or key at fault.
//
// KUBEBLADE_ variables that name no key are returned as ignored rather than
// refused: Kubernetes injects KUBEBLADE_SERVICE_HOST and friends into every
// pod in a namespace with a Service called kubeblade, and that must not stop
// a blade's fan control. The caller logs them, so a typo is still visible.
func Load(path string, environ []string) (cfg agentconfigv1.AgentConfig, ignored []string, err error) {
	c, ignored, err := LoadChecked(path, environ)
	return c.Config, ignored, err
}

// LoadChecked is Load that also returns the settings the config makes,
// validated once: what the agent runs from its file.
func LoadChecked(path string, environ []string) (Checked, []string, error) {
	cfg, ignored, err := load(path, environ)
	if err != nil {
		return Checked{}, nil, err
	}
	c, err := Check(cfg)
	if err != nil {
		return Checked{}, nil, err
	}
	return c, ignored, nil
}

func load(path string, environ []string) (agentconfigv1.AgentConfig, []string, error) {
	doc := map[string]any{}
	if path != "" {
		raw, err := os.ReadFile(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return agentconfigv1.AgentConfig{}, nil, fmt.Errorf("reading config: %w", err)
		default:
			if err := yaml.Unmarshal(raw, &doc); err != nil {
				return agentconfigv1.AgentConfig{}, nil, fmt.Errorf("config %s: %w", path, err)
			}
			if doc == nil {
				doc = map[string]any{} // an empty file
			}
			if err := dropRemoved(doc); err != nil {
				return agentconfigv1.AgentConfig{}, nil, fmt.Errorf("config %s: %w", path, err)
			}
		}
	}
	ignored, err := applyEnv(doc, environ)
	if err != nil {
		return agentconfigv1.AgentConfig{}, nil, err
	}
	cfg, err := decode(doc)
	if err != nil {
		where := "config"
		if path != "" {
			where = "config " + path
		}
		return agentconfigv1.AgentConfig{}, nil, fmt.Errorf("%s: %w", where, err)
	}
	return cfg, ignored, nil
}

// Parse decodes and validates one YAML or JSON document over the defaults,
// as a BladeConfig's spec.agent is applied.
func Parse(raw []byte) (agentconfigv1.AgentConfig, error) {
	return ParseEnv(raw, nil)
}

// ParseEnv is Parse with the KUBEBLADE_* variables of environ laid on top,
// as they are over the config file: a host's own overrides (a socket path,
// a GPIO line) win over the BladeConfig shared by many blades.
func ParseEnv(raw []byte, environ []string) (agentconfigv1.AgentConfig, error) {
	cfg, err := parseEnv(raw, environ)
	if err != nil {
		return agentconfigv1.AgentConfig{}, err
	}
	return cfg, Validate(cfg)
}

// FromSpec is the one step from a BladeConfig's spec.agent to what an
// agent runs, for the agent's start-up and for every later generation
// alike: the spec checked against the rules only a BladeConfig has
// (ValidateSpec), over the defaults, the host's KUBEBLADE_* variables over
// the spec (see ParseEnv), validated once, and the settings it makes.
func FromSpec(spec agentconfigv1.AgentConfig, environ []string) (Checked, error) {
	if err := ValidateSpec(spec); err != nil {
		return Checked{}, err
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return Checked{}, err
	}
	// The spec is JSON already: decoded as JSON, not through the YAML
	// parser a config file needs, which cost a fleet of agents
	// applying one change a third of a millisecond each
	// (docs/performance.md).
	doc := map[string]any{}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return Checked{}, err
	}
	cfg, err := overEnv(doc, environ)
	if err != nil {
		return Checked{}, err
	}
	return Check(cfg)
}

// parseEnv is ParseEnv without the validation.
func parseEnv(raw []byte, environ []string) (agentconfigv1.AgentConfig, error) {
	doc := map[string]any{}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return agentconfigv1.AgentConfig{}, err
	}
	return overEnv(doc, environ)
}

// overEnv lays the KUBEBLADE_* variables over doc, then doc over the
// defaults.
func overEnv(doc map[string]any, environ []string) (agentconfigv1.AgentConfig, error) {
	if doc == nil {
		doc = map[string]any{}
	}
	if _, err := applyEnv(doc, environ); err != nil {
		return agentconfigv1.AgentConfig{}, err
	}
	return decode(doc)
}

// decode lays doc over the defaults, refusing unknown keys.
func decode(doc map[string]any) (agentconfigv1.AgentConfig, error) {
	raw, err := json.Marshal(doc)
	if err != nil {
		return agentconfigv1.AgentConfig{}, err
	}
	cfg := Default()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return agentconfigv1.AgentConfig{}, fmt.Errorf("%s: want a %s, got %s", te.Field, te.Type, te.Value)
		}
		return agentconfigv1.AgentConfig{}, errors.New(strings.TrimPrefix(err.Error(), "json: "))
	}
	return cfg, nil
}

// EnvKeys maps every KUBEBLADE_ variable name to the config path it sets,
// derived from the config's JSON field names: leds.idleColor is
// KUBEBLADE_LEDS_IDLE_COLOR. Lists are set whole, as YAML or JSON.
func EnvKeys() map[string][]string {
	out := map[string][]string{}
	for name, f := range envFields() {
		out[name] = f.path
	}
	return out
}

type envField struct {
	path []string
	// str marks string fields, whose values are taken verbatim: "12" for
	// a GPIO line name must not become a number.
	str bool
}

func envFields() map[string]envField {
	out := map[string]envField{}
	var walk func(t reflect.Type, path []string)
	walk = func(t reflect.Type, path []string) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name := strings.Split(f.Tag.Get("json"), ",")[0]
			if name == "" || name == "-" {
				continue
			}
			p := append(append([]string(nil), path...), name)
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				walk(ft, p)
				continue
			}
			var parts []string
			for _, s := range p {
				parts = append(parts, upperSnake(s))
			}
			out[EnvPrefix+strings.Join(parts, "_")] = envField{path: p, str: ft.Kind() == reflect.String}
		}
	}
	walk(reflect.TypeOf(agentconfigv1.AgentConfig{}), nil)
	return out
}

func upperSnake(s string) string {
	var b strings.Builder
	rs := []rune(s)
	for i, r := range rs {
		if unicode.IsUpper(r) && i > 0 {
			prevLower := unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1])
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			// An acronym's plural "s" does not start a word.
			plural := nextLower && rs[i+1] == 's' && (i+2 == len(rs) || unicode.IsUpper(rs[i+2]))
			nextLower = nextLower && !plural
			// "fanCurve" -> FAN_CURVE, "extraSANs" -> EXTRA_SANS,
			// "gpioChip"/"GPIOChip" -> GPIO_CHIP.
			if prevLower || (nextLower && unicode.IsUpper(rs[i-1])) {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}

func applyEnv(doc map[string]any, environ []string) (ignored []string, err error) {
	keys := envFields()
	var names []string
	vals := map[string]string{}
	for _, kv := range environ {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, EnvPrefix) {
			continue
		}
		names = append(names, name)
		vals[name] = val
	}
	sort.Strings(names)
	for _, name := range names {
		field, ok := keys[name]
		if !ok {
			ignored = append(ignored, name)
			continue
		}
		path := field.path
		var v any = vals[name]
		if !field.str {
			if err := yaml.Unmarshal([]byte(vals[name]), &v); err != nil {
				return nil, fmt.Errorf("environment variable %s: %w", name, err)
			}
			if v == nil {
				// YAML reads "#..." as a comment and "" as null; let the
				// decoder report the type mismatch on the raw value.
				v = vals[name]
			}
		}
		m := doc
		for _, seg := range path[:len(path)-1] {
			next, ok := m[seg].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[seg] = next
			}
			m = next
		}
		m[path[len(path)-1]] = v
	}
	return ignored, nil
}

// removedKeys were settings that let a config point the agent, which runs
// as root, at any host file: the roots it found sysfs, device nodes and
// procfs under, and the simulated blade's control socket. A file may still
// name a root at the only value it can have (older docs showed them
// spelled out); anything else is refused with what to do instead.
var removedKeys = []struct {
	path []string
	keep string // the value still accepted (and ignored); "" for none
	why  string
}{
	{[]string{"hardware", "linux", "sysfsRoot"}, "/sys", "the agent reads sysfs at /sys only"},
	{[]string{"hardware", "linux", "devRoot"}, "/dev", "the agent opens device nodes under /dev only"},
	{[]string{"hardware", "linux", "procRoot"}, "/proc", "the agent reads procfs at /proc only"},
	{[]string{"hardware", "simulated", "controlSocket"}, "", "the simulated blade's controls are served on <state-dir>/simulator.sock"},
}

// dropRemoved takes the removed keys out of a config file's document, or
// refuses a value they can no longer have.
func dropRemoved(doc map[string]any) error {
	var errs []error
	for _, k := range removedKeys {
		m := doc
		for _, seg := range k.path[:len(k.path)-1] {
			next, _ := m[seg].(map[string]any)
			if next == nil {
				m = nil
				break
			}
			m = next
		}
		last := k.path[len(k.path)-1]
		v, ok := m[last]
		if !ok {
			continue
		}
		if sv, _ := v.(string); k.keep != "" && (sv == k.keep || sv == k.keep+"/") {
			delete(m, last)
			continue
		}
		errs = append(errs, fmt.Errorf("%s: %v: this setting was removed (%s); delete it", strings.Join(k.path, "."), v, k.why))
	}
	return errors.Join(errs...)
}

// bladeConfigSocket is the CRD's rule for grpc.socketPath in a BladeConfig
// (api/v1alpha1, BladeConfigSpec.Agent): a socket file name, or one in
// /run/kubeblade, the host directory the agent pods share for sockets.
var bladeConfigSocket = regexp.MustCompile(`^(/run/kubeblade/)?[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}[.]sock$`)

// ValidateSpec checks the rules a BladeConfig's spec.agent has beyond a
// config file's (the CRD's on BladeConfigSpec.Agent): the agent applies
// them to what it reads, so a BladeConfig stored before them, or written
// past the CRD, is refused here too. The metrics endpoint binds an IP
// address or every interface, never a host name or a link-local address
// (the kubelet probes that host), and is not disabled; the gRPC socket is
// a file name or a file in /run/kubeblade.
func ValidateSpec(spec agentconfigv1.AgentConfig) error {
	var errs []error
	if a := spec.Metrics.BindAddress; a != "" {
		if a == "0" {
			errs = append(errs, errors.New(`metrics.bindAddress: "0" in a BladeConfig: the agent DaemonSet's liveness and readiness probes use that endpoint`))
		} else if i := strings.LastIndex(a, ":"); i >= 0 {
			h := strings.Trim(a[:i], "[]")
			if ip, err := netip.ParseAddr(h); h != "" && (err != nil || ip.Zone() != "" || ip.IsLinkLocalUnicast()) {
				errs = append(errs, fmt.Errorf("metrics.bindAddress: %q in a BladeConfig binds an IP address or every interface, not a host name or a link-local address (the kubelet probes that host)", a))
			}
		}
	}
	if p := spec.GRPC.SocketPath; p != "" && !bladeConfigSocket.MatchString(p) {
		errs = append(errs, fmt.Errorf("grpc.socketPath: %q in a BladeConfig is a socket file name (agent.sock) or one in /run/kubeblade", p))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("invalid BladeConfig spec.agent: %w", errors.Join(errs...))
}

// Validate checks cfg against the rules the BladeConfig CRD also enforces,
// naming the first offending key.
func Validate(cfg agentconfigv1.AgentConfig) error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(cfg.FanCurve) == 0 {
		add("fanCurve: needs at least one step")
	}
	if len(cfg.FanCurve) > 16 {
		add("fanCurve: at most 16 steps, got %d", len(cfg.FanCurve))
	}
	for i, s := range cfg.FanCurve {
		if s.Percent < 0 || s.Percent > 100 {
			add("fanCurve[%d].percent: %d is outside 0–100", i, s.Percent)
		}
		if s.TemperatureCelsius < -40 || s.TemperatureCelsius > 125 {
			add("fanCurve[%d].temperatureCelsius: %d is outside -40–125", i, s.TemperatureCelsius)
		}
		if i > 0 && s.TemperatureCelsius <= cfg.FanCurve[i-1].TemperatureCelsius {
			add("fanCurve[%d].temperatureCelsius: %d must be above the previous step's %d (temperatures ascend)",
				i, s.TemperatureCelsius, cfg.FanCurve[i-1].TemperatureCelsius)
		}
	}
	if cfg.CriticalCelsius < 30 || cfg.CriticalCelsius > 110 {
		add("criticalCelsius: %d is outside 30–110", cfg.CriticalCelsius)
	}
	if cfg.HysteresisCelsius < 1 || cfg.HysteresisCelsius > 50 {
		add("hysteresisCelsius: %d is outside 1–50 (below 1 critical mode could flap)", cfg.HysteresisCelsius)
	}
	if p := cfg.FanPeerLostPercent; p != nil && (*p < 0 || *p > 100) {
		add("fanPeerLostPercent: %d is outside 0–100", *p)
	}
	if cfg.HysteresisCelsius >= cfg.CriticalCelsius {
		add("hysteresisCelsius: %d must be below criticalCelsius %d", cfg.HysteresisCelsius, cfg.CriticalCelsius)
	}
	for key, c := range map[string]string{
		"leds.idleColor": cfg.LEDs.IdleColor, "leds.identifyColor": cfg.LEDs.IdentifyColor, "leds.criticalColor": cfg.LEDs.CriticalColor,
		"leds.maintenanceColor": cfg.LEDs.MaintenanceColor, "leds.safeToPullColor": cfg.LEDs.SafeToPullColor,
		"leds.nodeAttentionColor": cfg.LEDs.NodeAttentionColor,
	} {
		if !strings.HasPrefix(c, "#") {
			add("%s: %q is not a colour in #rrggbb form", key, c)
		} else if _, err := hardware.ParseColor(c); err != nil {
			add("%s: %q is not a colour in #rrggbb form", key, c)
		}
	}
	switch cfg.Hardware.Backend {
	case agentconfigv1.BackendAuto, agentconfigv1.BackendLinux, agentconfigv1.BackendSimulated,
		agentconfigv1.BackendBCM2711, agentconfigv1.BackendBCM2712:
	default:
		add("hardware.backend: %q is not one of auto, linux, simulated, bcm2711, bcm2712", cfg.Hardware.Backend)
	}
	switch cfg.Hardware.Linux.FanUnit {
	case "", "auto", "standard", "smart", "none":
	default:
		add("hardware.linux.fanUnit: %q is not one of auto, standard, smart, none", cfg.Hardware.Linux.FanUnit)
	}
	if c := cfg.Hardware.Linux.PWMChannel; c != nil && *c < 0 {
		add("hardware.linux.pwmChannel: %d must not be negative", *c)
	}
	errs = append(errs, validateLinux(cfg.Hardware.Linux)...)
	switch cfg.Hardware.Simulated.FanUnit {
	case "", "standard", "smart":
	default:
		add("hardware.simulated.fanUnit: %q is not one of standard, smart", cfg.Hardware.Simulated.FanUnit)
	}
	if l := cfg.Hardware.Simulated.LoadPercent; l < 0 || l > 1000 {
		add("hardware.simulated.loadPercent: %d is outside 0–1000", l)
	}
	if p := cfg.GRPC.Remote.Port; p < 1 || p > 65535 {
		add("grpc.remote.port: %d is outside 1–65535", p)
	}
	if err := ValidateBindAddress(cfg.GRPC.Remote.BindAddress); err != nil {
		add("grpc.remote.bindAddress: %v", err)
	}
	if cfg.GRPC.SocketPath == "" {
		add("grpc.socketPath: must not be empty")
	}
	if err := ValidateMetricsAddress(cfg.Metrics.BindAddress); err != nil {
		add("metrics.bindAddress: %v", err)
	}
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("invalid config: %w", errors.Join(errs...))
}

// ValidateBindAddress accepts what the CRD's isIP() accepts: an IPv4 or
// IPv6 address without a zone, not IPv4-mapped; empty means every interface.
func ValidateBindAddress(s string) error {
	if s == "" {
		return nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" || a.Is4In6() {
		return fmt.Errorf("%q is not an IP address (no port, no host name; empty binds every interface)", s)
	}
	return nil
}

// metricsAddress is the CRD's rule for metrics.bindAddress (its
// XValidation in api/agentconfig/v1alpha1): host:port, the host empty, an
// IPv4 address or host name, or a bracketed IPv6 address, the port 0–65535.
var metricsAddress = regexp.MustCompile(`^(\[[0-9A-Fa-f:.]+\]|[0-9A-Za-z.-]*):([0-9]{1,4}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])$`)

// ValidateMetricsAddress accepts what the CRD accepts for
// metrics.bindAddress: empty (the default), "0" (disabled) or host:port. A
// typo would otherwise only show when the listener fails, and in a
// BladeConfig as an agent DaemonSet without probes.
func ValidateMetricsAddress(s string) error {
	if s == "" || s == "0" || metricsAddress.MatchString(s) {
		return nil
	}
	return fmt.Errorf(`%q is not host:port (e.g. ":9666", "127.0.0.1:9666" or "[::1]:9666", port 0–65535), nor "0" to disable`, s)
}

// Checked is an agent config that passed Validate and the agent core's
// settings it makes. Only this package builds one (Check, LoadChecked,
// FromSpec), so whoever holds it need not validate again. Change nothing
// in Config: Settings were derived from it.
type Checked struct {
	Config   agentconfigv1.AgentConfig
	Settings core.Settings
}

// Check validates cfg and derives the agent core's settings from it.
func Check(cfg agentconfigv1.AgentConfig) (Checked, error) {
	if err := Validate(cfg); err != nil {
		return Checked{}, err
	}
	s, err := settings(cfg)
	if err != nil {
		return Checked{}, err
	}
	return Checked{Config: cfg, Settings: s}, nil
}

// Settings validates cfg and returns the agent core's settings; Check
// returns both.
func Settings(cfg agentconfigv1.AgentConfig) (core.Settings, error) {
	c, err := Check(cfg)
	return c.Settings, err
}

// settings turns a valid config into the agent core's settings.
func settings(cfg agentconfigv1.AgentConfig) (core.Settings, error) {
	steps := make([]fancurve.Step, len(cfg.FanCurve))
	for i, s := range cfg.FanCurve {
		steps[i] = fancurve.Step{TemperatureCelsius: float64(s.TemperatureCelsius), Percent: uint8(s.Percent)}
	}
	curve, err := fancurve.New(steps)
	if err != nil {
		return core.Settings{}, fmt.Errorf("fanCurve: %w", err)
	}
	// Colours were validated by Check.
	idle, _ := hardware.ParseColor(cfg.LEDs.IdleColor)
	ident, _ := hardware.ParseColor(cfg.LEDs.IdentifyColor)
	crit, _ := hardware.ParseColor(cfg.LEDs.CriticalColor)
	maint, _ := hardware.ParseColor(cfg.LEDs.MaintenanceColor)
	pull, _ := hardware.ParseColor(cfg.LEDs.SafeToPullColor)
	attn, _ := hardware.ParseColor(cfg.LEDs.NodeAttentionColor)
	lost := uint8(DefaultFanPeerLostPercent)
	if p := cfg.FanPeerLostPercent; p != nil {
		lost = uint8(*p)
	}
	return core.Settings{
		FanPeerLostPercent: lost,
		MaintenanceColor:   maint,
		SafeToPullColor:    pull,
		NodeAttentionColor: attn,
		Curve:              curve,
		CriticalCelsius:    float64(cfg.CriticalCelsius),
		HysteresisCelsius:  float64(cfg.HysteresisCelsius),
		Stealth:            cfg.Stealth,
		TachEnabled:        cfg.TachEnabled == nil || *cfg.TachEnabled,
		IdleColor:          idle,
		IdentifyColor:      ident,
		CriticalColor:      crit,
	}, nil
}

// lineSpec matches a GPIO line name or offset, as the CRD's pattern does.
var lineSpec = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,32}$`)

// The CRD's patterns for the linux backend's device names (see
// api/agentconfig/v1alpha1): each admits only the shape the hardware has.
var (
	ledStream    = regexp.MustCompile(devnode.LEDStreamPattern)
	serialDevice = regexp.MustCompile(devnode.UARTPattern)
	pwmChip      = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:@,+-]{0,63}$`)
)

// validateLinux checks the linux backend's device names.
func validateLinux(l agentconfigv1.LinuxHardwareConfig) []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch l.FanDriver {
	case "", "auto", "pwm", "hwmon", "gpio":
	default:
		add("hardware.linux.fanDriver: %q is not one of auto, pwm, hwmon, gpio", l.FanDriver)
	}
	if len(l.HwmonName) > 64 {
		add("hardware.linux.hwmonName: longer than 64 characters")
	}
	for key, v := range map[string]string{
		"button": l.Lines.Button, "stealth": l.Lines.Stealth, "poeDetect": l.Lines.PoEDetect,
		"fanTach": l.Lines.FanTach, "fanPWM": l.Lines.FanPWM,
	} {
		if v != "" && !lineSpec.MatchString(v) {
			add("hardware.linux.lines.%s: %q is not a GPIO line name or offset", key, v)
		}
	}
	for key, v := range map[string]string{"top": l.LEDs.Top, "edge": l.LEDs.Edge} {
		if v != "" && (strings.Contains(v, "/") || len(v) > 64 || v == "." || v == "..") {
			add("hardware.linux.leds.%s: %q is not an LED class name", key, v)
		}
	}
	if v := l.LEDs.Stream; v != "" && !ledStream.MatchString(v) {
		add("hardware.linux.leds.stream: %q is not a ws2812-pio-rp1 LED stream (leds0 or /dev/leds0, N up to 3 digits): the agent writes LED frames to it", v)
	}
	if v := l.SerialDevice; v != "" && !serialDevice.MatchString(v) {
		add("hardware.linux.serialDevice: %q is not a UART (ttyAMA5, /dev/ttyAMA5 or ttyS0): the agent writes fan requests to it", v)
	}
	if v := l.PWMChip; v != "" && !pwmChip.MatchString(v) {
		add("hardware.linux.pwmChip: %q is not a PWM chip or device name (pwmchip0, 1f00098000.pwm)", v)
	}
	return errs
}
