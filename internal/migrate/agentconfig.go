package migrate

import (
	"fmt"
	"math"
	"net"
	"path"
	"sort"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"

	agentconfigv1 "github.com/kubeblade/kubeblade/api/agentconfig/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/config"
)

// Where the old agents read their config (viper: config name "config",
// type yaml, one search path).
const (
	// OldAgentConfigPath is compute-blade-community/compute-blade-agent's.
	OldAgentConfigPath = "/etc/compute-blade-agent/config.yaml"
	// OlderAgentConfigPath is uptime-industries/compute-blade-agent's.
	OlderAgentConfigPath = "/etc/computeblade-agent/config.yaml"
)

// Target is what a translated agent config is for.
type Target int

const (
	// TargetAgentFile is a standalone agent's /etc/kubeblade/agent.yaml on
	// the same blade: every setting carries over, host-specific ones too.
	TargetAgentFile Target = iota
	// TargetBladeConfig is BladeConfig.spec.agent, shared by every blade the
	// BladeConfig selects and run by the operator's DaemonSet: settings that
	// belong to one host or to the DaemonSet (socket path, bind addresses)
	// are left out, with a warning.
	TargetBladeConfig
)

// AgentConfig is a translated compute-blade-agent config.
type AgentConfig struct {
	// Config is the full result, kubeblade's defaults included, as the
	// agent will run it; it has passed the agent's own validation.
	Config agentconfigv1.AgentConfig
	// Warnings are keys without an equivalent and behaviour that changes.
	Warnings []Finding
	// set holds only the translated keys (by their JSON names): the file
	// written says what the old file said and leaves the rest to defaults.
	set map[string]any
}

// TranslateOptions tune TranslateAgentConfig.
type TranslateOptions struct {
	// SpeedAsPercent takes a fan step's speed, which the old agent never
	// read, as the percent it evidently meant (migrate-config's
	// --speed-as-percent), with a warning; without it such a step fails
	// the translation with an explanation.
	SpeedAsPercent bool
}

// TranslateAgentConfig translates the old agent's config.yaml (raw, read
// from file, which only names it in messages). It fails, naming every key
// and line at fault, on a file the old agent could not have run with, on
// values kubeblade refuses, and on anything that is not such a config.
func TranslateAgentConfig(raw []byte, file string, target Target, o TranslateOptions) (*AgentConfig, error) {
	f := &findings{file: file}
	root := parseMapping(raw, f)
	if root == nil {
		return nil, f.err()
	}
	top, ok := newMapping(root, "", f)
	if !ok {
		return nil, f.err()
	}
	if err := looksLikeOldAgentConfig(top, f); err != nil {
		return nil, err
	}
	t := &agentTranslation{f: f, target: target, o: o, set: map[string]any{}}
	t.translate(top)
	if err := f.err(); err != nil {
		return nil, err
	}
	out, err := t.result()
	if err != nil {
		return nil, err
	}
	return out, nil
}

// oldAgentKeys are the top-level keys the old agents read.
var oldAgentKeys = []string{
	"log", "listen", "hal", "idle_led_color", "identify_led_color", "critical_led_color", "criticalledcolor",
	"stealth_mode", "critical_temperature_threshold", "fan_speed", "fan_controller",
}

// looksLikeOldAgentConfig refuses foreign YAML (a kubeblade agent.yaml, a
// Kubernetes manifest, another program's config) instead of translating
// it into an empty config with a warning per key.
func looksLikeOldAgentConfig(top *mapping, f *findings) error {
	for _, k := range oldAgentKeys {
		if _, ok := top.byKey[k]; ok {
			return nil
		}
	}
	var names []string
	for _, e := range top.entries {
		names = append(names, e.name)
	}
	line := 0
	if len(top.entries) > 0 {
		line = top.entries[0].key.Line
	}
	hint := "none of its keys (" + strings.Join(names, ", ") + ") is one the old agent reads (listen, hal, fan_controller, stealth_mode, …)"
	switch {
	case hasKey(top, "apiversion") || hasKey(top, "kind"):
		hint = "it has apiVersion/kind: it is a Kubernetes or kubeblade file, not the old agent's config"
	case hasKey(top, "fancurve") || hasKey(top, "criticalcelsius") || hasKey(top, "leds"):
		hint = "it looks like a kubeblade agent.yaml already"
	}
	f.fail(line, "", "not a compute-blade-agent config: %s", hint)
	return f.err()
}

func hasKey(m *mapping, k string) bool { _, ok := m.byKey[k]; return ok }

type agentTranslation struct {
	f      *findings
	target Target
	o      TranslateOptions
	set    map[string]any
}

// put sets a translated key by its path in kubeblade's config.
func (t *agentTranslation) put(keyPath string, v any) {
	m := t.set
	parts := strings.Split(keyPath, ".")
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = v
}

// noEquivalent are keys the old agents read that have no counterpart in
// kubeblade's config, and what to do instead. fan_speed {speed} is in the
// old agent's config struct, but nothing in it reads the value (its README
// calls it BLADE_FAN_SPEED_PERCENT); log.mode chose the logger.
var noEquivalent = []struct{ key, say string }{
	{"log", "no equivalent in the config file: kubeblade-agent takes --log-level and --log-format flags"},
	{"fan_speed", "no equivalent: the old agent never applied it, and kubeblade takes a fixed fan speed at run time ('bladectl fan PERCENT' or the kubeblade.io/fan-speed annotation), not from its config"},
}

func (t *agentTranslation) translate(top *mapping) {
	for _, n := range noEquivalent {
		if e, ok := top.get(n.key); ok {
			t.f.warn(e.key.Line, e.name, "%s", n.say)
		}
	}
	t.listen(top)
	t.hal(top)
	t.colors(top)
	if e, ok := top.get("stealth_mode"); ok {
		if v, err := asBool(e.val); err != nil {
			t.f.fail(e.val.Line, e.name, "%v", err)
		} else {
			t.put("stealth", v)
		}
	}
	t.critical(top)
	t.fanCurve(top)
	for _, e := range top.unused() {
		t.f.warn(e.key.Line, e.name, "no equivalent in kubeblade; ignored (the old agent ignored it too)")
	}
}

// listen: metrics (host:port), grpc (a socket path, or host:port in tcp
// mode), mode (unix or tcp; the older agent had no mode and always used a
// unix socket), authenticated (mutual TLS, tcp mode only).
func (t *agentTranslation) listen(top *mapping) {
	e, ok := top.get("listen")
	if !ok {
		return
	}
	l, ok := newMapping(e.val, e.name, t.f)
	if !ok {
		return
	}
	if m, ok := l.get("metrics"); ok {
		key := "listen." + m.name
		addr, err := asString(m.val)
		switch {
		case err != nil:
			t.f.fail(m.val.Line, key, "%v", err)
		case addr == "":
			t.f.warn(m.val.Line, key, "empty (the old agent then served metrics on port 80); kubeblade's default %s applies", config.DefaultMetricsAddress)
		default:
			host, port, err := net.SplitHostPort(addr)
			if _, perr := strconv.Atoi(port); err != nil || perr != nil {
				t.f.fail(m.val.Line, key, "%q is not host:port", addr)
				break
			}
			if t.target == TargetBladeConfig && host != "" && !unspecified(host) {
				t.f.warn(m.val.Line, key, "binds %s, one blade's address: a BladeConfig is shared by many blades, so the port :%s is kept and the host dropped", host, port)
				addr = ":" + port
			}
			t.put("metrics.bindAddress", addr)
		}
	}
	mode := "unix"
	modeLine := e.key.Line
	if m, ok := l.get("mode"); ok {
		v, err := asString(m.val)
		modeLine = m.val.Line
		switch {
		case err != nil:
			t.f.fail(m.val.Line, "listen."+m.name, "%v", err)
			return
		case v != "unix" && v != "tcp":
			t.f.fail(m.val.Line, "listen."+m.name, "%q is not tcp or unix (the old agent refused to start with it)", v)
			return
		}
		mode = v
	}
	authenticated := false
	authLine := 0
	if a, ok := l.get("authenticated"); ok {
		v, err := asBool(a.val)
		if err != nil {
			t.f.fail(a.val.Line, "listen."+a.name, "%v", err)
			return
		}
		authenticated, authLine = v, a.val.Line
	}
	g, ok := l.get("grpc")
	if !ok {
		if mode == "tcp" {
			t.f.fail(modeLine, "listen.grpc", "tcp mode needs a listen address (the old agent refused to start without one)")
		}
		// Without an address the old agent served no API at all; kubeblade
		// always serves its socket.
		return
	}
	key := "listen." + g.name
	addr, err := asString(g.val)
	if err != nil {
		t.f.fail(g.val.Line, key, "%v", err)
		return
	}
	if mode == "unix" {
		if authenticated {
			t.f.warn(authLine, "listen.authenticated", "has no effect on a unix socket (the old agent ignored it too)")
		}
		t.socket(g.val.Line, key, addr)
		return
	}
	t.remote(g.val.Line, key, addr, authenticated)
}

// socket is not carried over: kubeblade's systemd unit gives the agent a
// private /tmp (PrivateTmp) and a read-only file system outside its own
// directories (ProtectSystem=strict), so the old path would be reachable
// by nobody. The agent serves /run/kubeblade/agent.sock, and a link from
// the old path keeps the old bladectl and scripts working
// (docs/migration.md).
func (t *agentTranslation) socket(line int, key, addr string) {
	switch {
	case addr == "":
		t.f.fail(line, key, "empty socket path (the old agent refused to start without one)")
	case !path.IsAbs(addr):
		t.f.fail(line, key, "%q is relative to wherever the old agent started; give an absolute socket path", addr)
	case addr == config.DefaultSocketPath:
	case t.target == TargetBladeConfig:
		t.f.warn(line, key, "socket %s not carried over: the DaemonSet's agents serve %s on the host", addr, config.DefaultSocketPath)
	default:
		t.f.warn(line, key, "socket %s not carried over: kubeblade serves %s (mode 0660, group kubeblade); link the old path to it (docs/migration.md) to keep the old bladectl and scripts working",
			addr, config.DefaultSocketPath)
	}
}

func (t *agentTranslation) remote(line int, key, addr string, authenticated bool) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		t.f.fail(line, key, "%q is not host:port (tcp mode)", addr)
		return
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 {
		t.f.fail(line, key, "port %q is not a number from 1 to 65535", portStr)
		return
	}
	t.put("grpc.remote.enabled", true)
	t.put("grpc.remote.port", port)
	switch {
	case host == "" || unspecified(host):
	case t.target == TargetBladeConfig:
		t.f.warn(line, key, "binds %s, one blade's address: a BladeConfig is shared by many blades, so its agents bind every interface", host)
	case net.ParseIP(host) != nil && config.ValidateBindAddress(host) == nil:
		t.put("grpc.remote.bindAddress", host)
	case host == "localhost":
		t.put("grpc.remote.bindAddress", "127.0.0.1")
	default:
		t.f.warn(line, key, "binds the host name %q; kubeblade binds an IP address (grpc.remote.bindAddress), so it listens on every interface until you set one", host)
	}
	if authenticated {
		t.f.warn(line, key, "the old agent's certificates in /etc/compute-blade-agent are not reused: kubeblade issues its own CA and an admin bladectl config in its state directory (/var/lib/kubeblade/bladectl.yaml); import that with 'bladectl config import'")
	} else {
		t.f.warn(line, key, "the old agent served this port without TLS (listen.authenticated is false); kubeblade's TCP listener is always mutual TLS, so clients need the bladectl config it writes to /var/lib/kubeblade/bladectl.yaml")
	}
}

func unspecified(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

// hal: the old agents' only hardware option. Both hal.Config and
// ComputeBladeHalOpts read the same key.
func (t *agentTranslation) hal(top *mapping) {
	e, ok := top.get("hal")
	if !ok {
		return
	}
	h, ok := newMapping(e.val, e.name, t.f)
	if !ok {
		return
	}
	if r, ok := h.get("rpm_reporting_standard_fan_unit"); ok {
		v, err := asBool(r.val)
		if err != nil {
			t.f.fail(r.val.Line, "hal."+r.name, "%v", err)
		} else {
			t.put("tachEnabled", v)
		}
	}
	for _, u := range h.unused() {
		t.f.warn(u.key.Line, "hal."+u.name, "no equivalent in kubeblade; ignored (the old agent ignored it too)")
	}
}

// colors: {red, green, blue} of 0–255 each; a missing component is 0, as
// in the old agent.
func (t *agentTranslation) colors(top *mapping) {
	for _, c := range []struct{ old, key, def string }{
		{"idle_led_color", "leds.idleColor", config.DefaultIdleColor},
		{"identify_led_color", "leds.identifyColor", config.DefaultIdentifyColor},
		{"critical_led_color", "leds.criticalColor", config.DefaultCriticalColor},
	} {
		e, ok := top.get(c.old)
		if ok {
			if hex, ok := t.color(e); ok {
				t.put(c.key, hex)
			}
			continue
		}
		if c.old == "critical_led_color" && hasKey(top, "criticalledcolor") {
			continue
		}
		line := 0
		if e != nil {
			line = e.key.Line
		}
		t.f.warn(line, c.old, "not set: the old agent left that LED dark; kubeblade's default %s applies", c.def)
	}
	// The old agent's own default-config.yaml spells this key
	// criticalLedColor, which viper folds to criticalledcolor: the agent
	// (mapstructure tag critical_led_color) never read it and blinked
	// black. What the file meant is clear, so it is translated.
	if e, ok := top.get("criticalledcolor"); ok {
		if _, set := top.get("critical_led_color"); set {
			t.f.warn(e.key.Line, e.name, "ignored: critical_led_color is set too (the old agent never read %s)", e.name)
		} else if hex, ok := t.color(e); ok {
			t.f.warn(e.key.Line, e.name, "the old agent never read this key (it reads critical_led_color), so its critical LED stayed dark; kubeblade will show %s", hex)
			t.put("leds.criticalColor", hex)
		}
	}
}

func (t *agentTranslation) color(e *entry) (string, bool) {
	m, ok := newMapping(e.val, e.name, t.f)
	if !ok {
		return "", false
	}
	var rgb [3]int64
	good := true
	for i, k := range []string{"red", "green", "blue"} {
		c, ok := m.get(k)
		if !ok {
			continue
		}
		v, err := asWhole(c.val, 0, 255)
		if err != nil {
			t.f.fail(c.val.Line, e.name+"."+c.name, "%v", err)
			good = false
		}
		rgb[i] = v
	}
	for _, u := range m.unused() {
		t.f.warn(u.key.Line, e.name+"."+u.name, "not a colour component (red, green, blue); ignored")
	}
	return fmt.Sprintf("#%02x%02x%02x", rgb[0], rgb[1], rgb[2]), good
}

func (t *agentTranslation) critical(top *mapping) {
	e, ok := top.get("critical_temperature_threshold")
	if !ok {
		return
	}
	v, err := asWhole(e.val, 30, 110)
	if err != nil {
		t.f.fail(e.val.Line, e.name, "%v (kubeblade's criticalCelsius range)", err)
		return
	}
	t.put("criticalCelsius", v)
	// compute-blade-agent 422cf18 only reports this threshold: nothing in
	// it compares the temperature against it (critical mode came only from
	// an EmitEvent(CRITICAL) call). kubeblade acts on it.
	t.f.warn(e.val.Line, e.name, "kubeblade enters critical mode by itself at %d °C (fan 100 %%, top LED blinking) and leaves it %d °C lower; the old agent only reported the threshold",
		v, config.DefaultHysteresisCelsius)
}

// fan_controller.steps: {temperature (float), percent (0–100)} each. The
// old agent sorted the steps by temperature before checking them, so it
// accepted them in any order; kubeblade refuses a curve that is not
// written in ascending order rather than guess which order was meant.
func (t *agentTranslation) fanCurve(top *mapping) {
	e, ok := top.get("fan_controller")
	if !ok {
		t.f.warn(0, "fan_controller", "not set: the old agent could not run without fan steps; kubeblade's default curve applies")
		return
	}
	fc, ok := newMapping(e.val, e.name, t.f)
	if !ok {
		return
	}
	for _, u := range fc.unused() {
		if strings.ToLower(u.name) != "steps" {
			t.f.warn(u.key.Line, e.name+"."+u.name, "no equivalent in kubeblade; ignored (the old agent ignored it too)")
		}
	}
	s, ok := fc.get("steps")
	if !ok {
		t.f.warn(e.key.Line, e.name+".steps", "not set: the old agent could not run without fan steps; kubeblade's default curve applies")
		return
	}
	key := e.name + "." + s.name
	seq := resolve(s.val)
	if seq.Kind != yaml.SequenceNode {
		t.f.fail(seq.Line, key, "want a list of {temperature, percent}, got a %s", kindName(seq))
		return
	}
	if len(seq.Content) == 0 {
		t.f.warn(seq.Line, key, "empty: the old agent could not run without fan steps; kubeblade's default curve applies")
		return
	}
	if len(seq.Content) > 16 {
		t.f.fail(seq.Line, key, "%d steps; kubeblade takes at most 16", len(seq.Content))
		return
	}
	type step struct {
		temp, pct int64
		line      int
		valid     bool // temperature and percent both read
	}
	var steps []step
	var curve []any
	for i, n := range seq.Content {
		sk := fmt.Sprintf("%s[%d]", key, i)
		m, ok := newMapping(n, sk, t.f)
		if !ok {
			continue
		}
		st := step{line: resolve(n).Line}
		if te, ok := m.get("temperature"); !ok {
			t.f.fail(st.line, sk+".temperature", "missing")
		} else if v, err := asNumber(te.val); err != nil {
			t.f.fail(te.val.Line, sk+"."+te.name, "%v", err)
		} else {
			r := math.Round(v)
			if r != v {
				t.f.warn(te.val.Line, sk+"."+te.name, "%s °C rounded to %d: kubeblade's curve takes whole degrees", te.val.Value, int64(r))
			}
			if r < -40 || r > 125 {
				t.f.fail(te.val.Line, sk+"."+te.name, "%s is outside -40–125", te.val.Value)
			}
			st.temp, st.line, st.valid = int64(r), te.val.Line, true
		}
		if pe, ok := m.get("percent"); !ok {
			if se, ok := m.get("speed"); ok {
				st.pct, ok = t.speedStep(se, sk)
				st.valid = st.valid && ok
			} else {
				t.f.fail(resolve(n).Line, sk+".percent", "missing")
				st.valid = false
			}
		} else if v, err := asWhole(pe.val, 0, 100); err != nil {
			t.f.fail(pe.val.Line, sk+"."+pe.name, "%v", err)
			st.valid = false
		} else {
			st.pct = v
		}
		for _, u := range m.unused() {
			t.f.warn(u.key.Line, sk+"."+u.name, "not part of a fan step (temperature, percent); ignored")
		}
		if n := len(steps); n > 0 && steps[n-1].valid && st.valid {
			prev := steps[n-1]
			switch {
			case st.temp < prev.temp:
				t.f.fail(st.line, sk+".temperature", "%d °C is below the previous step's %d °C (line %d): the old agent sorted the steps silently, kubeblade wants them written in ascending order; reorder them",
					st.temp, prev.temp, prev.line)
			case st.temp == prev.temp:
				t.f.fail(st.line, sk+".temperature", "%d °C again (line %d): temperatures must ascend strictly (the old agent refused this too)", st.temp, prev.line)
			case st.pct < prev.pct:
				t.f.warn(st.line, sk+".percent", "%d %% is below the previous step's %d %%: the old agent refused to start with a falling curve; kubeblade runs it as written", st.pct, prev.pct)
			}
		}
		steps = append(steps, st)
		curve = append(curve, map[string]any{"temperatureCelsius": st.temp, "percent": st.pct})
	}
	t.put("fanCurve", curve)
}

// speedStep reads a fan step that has speed where the old agent read
// percent. compute-blade-agent's own default config wrote the steps with
// speed at 7f166f2ed37af3cf005824a7bb9337e7fff9652d and
// 99920370fba8176dc34243d28281aa343f437fc5 (cmd/agent/default-config.yaml)
// while pkg/fancontroller/fancontroller.go read only
// `mapstructure:"percent"`; viper's Unmarshal ignores unknown keys, so the
// agent ran such a step at 0 %. a8d470d4f9ec2749e1067474805f67639cd24c09
// changed the default to percent. Files copied from the old default still
// have speed.
func (t *agentTranslation) speedStep(se *entry, sk string) (int64, bool) {
	if !t.o.SpeedAsPercent {
		t.f.fail(se.val.Line, sk+".percent", "missing; this step has %s: %s instead, a key the old agent never read (it reads percent; its own default config said speed by mistake until a8d470d), so that agent ran this step at 0 %%. "+
			"Write percent: %s if that is what was meant (or pass --speed-as-percent to take every speed as percent), or percent: 0 to keep what the old agent did",
			se.name, se.val.Value, se.val.Value)
		return 0, false
	}
	v, err := asWhole(se.val, 0, 100)
	if err != nil {
		t.f.fail(se.val.Line, sk+"."+se.name, "%v", err)
		return 0, false
	}
	t.f.warn(se.val.Line, sk+"."+se.name, "taken as percent: %d (--speed-as-percent); the old agent never read speed and ran this step at 0 %%, so kubeblade runs the fan faster here than the old agent did", v)
	return v, true
}

// result validates the translation the way the agent reads its file and a
// BladeConfig's spec.agent: through config.Parse.
func (t *agentTranslation) result() (*AgentConfig, error) {
	raw, err := sigsyaml.Marshal(t.set)
	if err != nil {
		return nil, err
	}
	cfg, err := config.Parse(raw)
	if err != nil {
		t.f.fail(0, "", "the translation does not pass kubeblade's validation: %v", err)
		return nil, t.f.err()
	}
	sort.SliceStable(t.f.warnings, func(i, j int) bool { return t.f.warnings[i].Line < t.f.warnings[j].Line })
	return &AgentConfig{Config: cfg, Warnings: t.f.warnings, set: t.set}, nil
}

// AgentYAML is the agent.yaml to install as /etc/kubeblade/agent.yaml.
func (a *AgentConfig) AgentYAML(source string) ([]byte, error) {
	body, err := sigsyaml.Marshal(a.set)
	if err != nil {
		return nil, err
	}
	return append([]byte(header(source, "")), body...), nil
}

// BladeConfigName is the default name of a translated BladeConfig.
const BladeConfigName = "migrated"

// BladeConfigYAML is a BladeConfig named name with the translation as its
// spec.agent. It is written as plain YAML so this package (and the lean
// agent that uses it) needs no Kubernetes types; tests check it against
// the CRD on a real API server.
func (a *AgentConfig) BladeConfigYAML(source, name string) ([]byte, error) {
	doc := map[string]any{
		"apiVersion": "kubeblade.io/v1alpha1",
		"kind":       "BladeConfig",
		"metadata":   map[string]any{"name": name},
		"spec":       map[string]any{"agent": a.set},
	}
	body, err := sigsyaml.Marshal(doc)
	if err != nil {
		return nil, err
	}
	hint := "# Without spec.nodeSelector it selects every arm64 Node; add one (and\n# spec.priority) before applying it to a cluster with other BladeConfigs.\n"
	return append([]byte(header(source, hint)), body...), nil
}

func header(source, extra string) string {
	return "# Translated by 'kubeblade-agent migrate-config' from compute-blade-agent's\n# " + source +
		"\n# Keys not set here take kubeblade's defaults (docs/configuration.md).\n" + extra
}
