package v1alpha1

// AgentConfig is how one agent drives its blade. It is both the standalone
// agent's config file (/etc/kubeblade/agent.yaml) and BladeConfig.spec.agent,
// so a blade behaves the same with or without Kubernetes.
//
// +kubebuilder:validation:XValidation:rule="!has(self.hysteresisCelsius) || !has(self.criticalCelsius) || self.hysteresisCelsius < self.criticalCelsius",message="hysteresisCelsius must be below criticalCelsius"
type AgentConfig struct {
	// FanCurve maps SoC temperature to fan duty; between steps the duty is
	// interpolated linearly. Temperatures must ascend.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.map(s, s.temperatureCelsius).isSorted() && self.all(a, self.exists_one(b, b.temperatureCelsius == a.temperatureCelsius))",message="fanCurve temperatures must ascend strictly"
	// +optional
	FanCurve []FanCurveStep `json:"fanCurve,omitempty"`

	// CriticalCelsius is the SoC temperature at which the blade enters
	// critical mode: fan at 100 %, top LED blinking, stealth suspended.
	// +kubebuilder:validation:Minimum=30
	// +kubebuilder:validation:Maximum=110
	// +kubebuilder:default=60
	// +optional
	CriticalCelsius int32 `json:"criticalCelsius,omitempty"`

	// HysteresisCelsius is how far below CriticalCelsius the temperature
	// must fall before critical mode ends: at least 1 °C, so that a
	// temperature hovering at the threshold cannot flap critical mode (and
	// the fan, the LEDs and the taint) on and off every sample.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=50
	// +kubebuilder:default=5
	// +optional
	HysteresisCelsius int32 `json:"hysteresisCelsius,omitempty"`

	// TaintOnCritical taints the Node kubeblade.io/thermal-critical:NoSchedule
	// while the blade is critical.
	// +optional
	TaintOnCritical bool `json:"taintOnCritical,omitempty"`

	// Stealth turns all LEDs dark and drives the stealth output. The Node
	// annotation kubeblade.io/stealth and the API override it.
	// +optional
	Stealth bool `json:"stealth,omitempty"`

	// FanPeerLostPercent is the least fan duty while the fan peer (the
	// blade the Node annotation kubeblade.io/fan-peer names, sharing this
	// blade's standard fan unit) is missing or its heartbeat is older than
	// three heartbeat periods: its heat is then unknown. Default 60.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=60
	// +optional
	FanPeerLostPercent *int32 `json:"fanPeerLostPercent,omitempty"`

	// TachEnabled reads the fan tachometer (and so detects a stalled fan).
	// Default true; turn it off for fans without a tach wire.
	// +optional
	TachEnabled *bool `json:"tachEnabled,omitempty"`

	// LEDs sets the colours the blade shows.
	// +optional
	LEDs LEDColors `json:"leds,omitempty"`

	// Hardware selects and configures the hardware backend.
	// +optional
	Hardware HardwareConfig `json:"hardware,omitempty"`

	// GRPC configures the agent's gRPC API.
	// +optional
	GRPC GRPCConfig `json:"grpc,omitempty"`

	// Metrics configures the Prometheus endpoint.
	// +optional
	Metrics MetricsConfig `json:"metrics,omitempty"`
}

// FanCurveStep is one point of the fan curve.
type FanCurveStep struct {
	// TemperatureCelsius is the SoC temperature of this step.
	// +kubebuilder:validation:Minimum=-40
	// +kubebuilder:validation:Maximum=125
	TemperatureCelsius int32 `json:"temperatureCelsius"`
	// Percent is the fan duty at this temperature.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Percent int32 `json:"percent"`
}

// LEDColors are colours in #rrggbb form.
type LEDColors struct {
	// IdleColor is the edge LED's colour when nothing is going on.
	// +kubebuilder:validation:Pattern=`^#[0-9a-fA-F]{6}$`
	// +optional
	IdleColor string `json:"idleColor,omitempty"`
	// IdentifyColor is the colour the edge LED blinks during identify.
	// +kubebuilder:validation:Pattern=`^#[0-9a-fA-F]{6}$`
	// +optional
	IdentifyColor string `json:"identifyColor,omitempty"`
	// CriticalColor is the colour the LEDs show in critical mode.
	// +kubebuilder:validation:Pattern=`^#[0-9a-fA-F]{6}$`
	// +optional
	CriticalColor string `json:"criticalColor,omitempty"`
	// MaintenanceColor: the edge LED is steady in it while maintenance is
	// requested or queued and blinks it while the Node drains; the top LED
	// blinks it when the drain failed.
	// +kubebuilder:validation:Pattern=`^#[0-9a-fA-F]{6}$`
	// +optional
	MaintenanceColor string `json:"maintenanceColor,omitempty"`
	// SafeToPullColor is the edge LED's steady colour once the Node is
	// drained: the blade may be pulled.
	// +kubebuilder:validation:Pattern=`^#[0-9a-fA-F]{6}$`
	// +optional
	SafeToPullColor string `json:"safeToPullColor,omitempty"`
	// NodeAttentionColor is the top LED's steady colour while the Node is
	// cordoned by someone other than kubeblade or is not Ready.
	// +kubebuilder:validation:Pattern=`^#[0-9a-fA-F]{6}$`
	// +optional
	NodeAttentionColor string `json:"nodeAttentionColor,omitempty"`
}

// HardwareBackend names a hardware backend.
// +kubebuilder:validation:Enum=auto;linux;simulated;bcm2711;bcm2712
type HardwareBackend string

const (
	// BackendAuto picks linux on a blade, or the register backend of its
	// SoC when no kernel driver provides the LEDs and /dev/mem is usable
	// (Raspberry Pi OS; never Talos). It never falls back to the
	// simulation: a blade that cannot be driven must say so.
	BackendAuto      HardwareBackend = "auto"
	BackendLinux     HardwareBackend = "linux"
	BackendSimulated HardwareBackend = "simulated"
	// BackendBCM2711 and BackendBCM2712 are the linux backend with the
	// LEDs and a standard fan unit's PWM driven through the SoC's registers
	// (/dev/mem), as the old compute-blade-agent did.
	BackendBCM2711 HardwareBackend = "bcm2711"
	BackendBCM2712 HardwareBackend = "bcm2712"
)

// HardwareConfig selects and configures the hardware backend.
type HardwareConfig struct {
	// Backend is auto, linux, simulated, bcm2711 or bcm2712.
	// +kubebuilder:default=auto
	// +optional
	Backend HardwareBackend `json:"backend,omitempty"`
	// Linux configures the linux backend; every setting has a default.
	// +optional
	Linux LinuxHardwareConfig `json:"linux,omitempty"`
	// Simulated configures the simulated backend.
	// +optional
	Simulated SimulatedHardwareConfig `json:"simulated,omitempty"`
}

// LinuxHardwareConfig overrides which devices the linux backend drives.
// Empty fields mean auto-detection. It names devices, never where they
// live: the backend reads sysfs at /sys and opens device nodes under /dev
// only, so neither a BladeConfig nor a config file can point the agent,
// which runs as root, at another host file. Each field admits only the
// shapes the blade's hardware has (docs/configuration.md lists them).
type LinuxHardwareConfig struct {
	// GPIOChip is the GPIO chip's name or label (default: the chip labelled
	// pinctrl-bcm2711 or pinctrl-rp1). It is compared with what the
	// kernel lists, never opened as a path.
	// +optional
	GPIOChip string `json:"gpioChip,omitempty"`
	// PWMChip is a sysfs PWM chip's name (pwmchip0) or its device's name
	// (1f00098000.pwm) (default: detected): a name, not a path.
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9_.:@,+-]{0,63}$`
	// +optional
	PWMChip string `json:"pwmChip,omitempty"`
	// PWMChannel is the PWM channel driving the fan (default 0).
	// +kubebuilder:validation:Minimum=0
	// +optional
	PWMChannel *int32 `json:"pwmChannel,omitempty"`
	// SerialDevice is the smart fan unit's UART, a PL011 (ttyAMAN) or 8250
	// (ttySN) port under /dev: ttyAMA5 or /dev/ttyAMA5 (default ttyAMA5 on
	// CM4, ttyAMA4 on CM5). The agent opens it only if it is that
	// driver's character device.
	// +kubebuilder:validation:Pattern=`^(/dev/)?tty(AMA|S)[0-9]{1,3}$`
	// +optional
	SerialDevice string `json:"serialDevice,omitempty"`
	// ThermalZoneType is the type of the thermal zone to read (default
	// cpu-thermal).
	// +optional
	ThermalZoneType string `json:"thermalZoneType,omitempty"`
	// FanUnit forces the fan unit kind instead of detecting it.
	// +kubebuilder:validation:Enum=auto;standard;smart;none
	// +optional
	FanUnit string `json:"fanUnit,omitempty"`
	// FanDriver picks how a standard fan unit is driven: auto tries sysfs
	// PWM, then hwmon pwm1, then GPIO on/off.
	// +kubebuilder:validation:Enum=auto;pwm;hwmon;gpio
	// +optional
	FanDriver string `json:"fanDriver,omitempty"`
	// HwmonName is the hwmon device (its name attribute) driving the fan
	// when fanDriver is hwmon or auto falls back to it (default: the first
	// hwmon device with pwm1).
	// +kubebuilder:validation:MaxLength=64
	// +optional
	HwmonName string `json:"hwmonName,omitempty"`
	// Lines overrides which GPIO lines the blade's signals are on.
	// +optional
	Lines GPIOLines `json:"lines,omitempty"`
	// LEDs says where kernel LED drivers expose the blade's WS2812 LEDs.
	// +optional
	LEDs LinuxLEDConfig `json:"leds,omitempty"`
}

// GPIOLines names GPIO lines: a devicetree line name (GPIO20) or a bare
// offset on the chip ("20"). Empty means the blade's default: the name
// GPIO<n>, falling back to offset n.
type GPIOLines struct {
	// Button is the edge button (default GPIO20).
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]{1,32}$`
	// +optional
	Button string `json:"button,omitempty"`
	// Stealth is the stealth output (default GPIO21).
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]{1,32}$`
	// +optional
	Stealth string `json:"stealth,omitempty"`
	// PoEDetect is the 802.3at detect input (default GPIO23).
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]{1,32}$`
	// +optional
	PoEDetect string `json:"poeDetect,omitempty"`
	// FanTach is the fan tachometer input (default GPIO13).
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]{1,32}$`
	// +optional
	FanTach string `json:"fanTach,omitempty"`
	// FanPWM is the fan line driven on/off when no PWM driver exists
	// (default GPIO12).
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]{1,32}$`
	// +optional
	FanPWM string `json:"fanPWM,omitempty"`
}

// LinuxLEDConfig locates the LEDs. Without a kernel driver (stock Talos)
// there are none, and the agent runs without LEDs.
type LinuxLEDConfig struct {
	// Top is the LED class name (/sys/class/leds/<top>) of the top LED
	// (default: the multicolor LED whose name contains "top").
	// +kubebuilder:validation:Pattern=`^[^/]{1,64}$`
	// +kubebuilder:validation:XValidation:rule="self != '.' && self != '..'",message="an LED class name, not . or .."
	// +optional
	Top string `json:"top,omitempty"`
	// Edge is the LED class name of the edge LED (default: the
	// multicolor LED whose name contains "edge").
	// +kubebuilder:validation:Pattern=`^[^/]{1,64}$`
	// +kubebuilder:validation:XValidation:rule="self != '.' && self != '..'",message="an LED class name, not . or .."
	// +optional
	Edge string `json:"edge,omitempty"`
	// Stream is the /dev/ledsN character device of Raspberry Pi's
	// ws2812-pio-rp1 driver driving both LEDs, top first: leds0 or
	// /dev/leds0 (default: /dev/leds0, when it exists and no LED class
	// device was found). The agent writes to it only if it is that
	// driver's character device.
	// +kubebuilder:validation:Pattern=`^(/dev/)?leds[0-9]{1,3}$`
	// +optional
	Stream string `json:"stream,omitempty"`
}

// SimulatedHardwareConfig shapes the simulated blade.
type SimulatedHardwareConfig struct {
	// Load is the simulated CPU load in hundredths (100 = all cores busy).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	LoadPercent int32 `json:"loadPercent,omitempty"`
	// FanUnit is the simulated fan unit.
	// +kubebuilder:validation:Enum=standard;smart
	// +optional
	FanUnit string `json:"fanUnit,omitempty"`
}

// GRPCConfig configures the gRPC API.
type GRPCConfig struct {
	// SocketPath is the local unix socket (default /run/kubeblade/agent.sock).
	// +optional
	SocketPath string `json:"socketPath,omitempty"`
	// Remote enables the mutual-TLS TCP listener.
	// +optional
	Remote RemoteGRPCConfig `json:"remote,omitempty"`
}

// RemoteGRPCConfig configures remote gRPC access. TCP is always mutual TLS.
type RemoteGRPCConfig struct {
	// Enabled opens the TCP listener.
	// +optional
	Enabled bool `json:"enabled,omitempty"`
	// Port is the TCP port (default 8081).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`
	// BindAddress is the IP address the TCP listener binds (IPv4 or IPv6,
	// no port); empty binds every interface.
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="self == '' || isIP(self)",message="bindAddress must be an IP address (no port, no host name)"
	// +optional
	BindAddress string `json:"bindAddress,omitempty"`
	// ExtraSANs are additional DNS names or IPs for the serving certificate.
	// +optional
	ExtraSANs []string `json:"extraSANs,omitempty"`
}

// MetricsConfig configures the Prometheus endpoint.
type MetricsConfig struct {
	// BindAddress serves /metrics, /healthz and /readyz: host:port with
	// the host empty (every interface), an IPv4 address, a bracketed IPv6
	// address or a host name, and the port 0–65535 (0: any free port, for
	// tests). Default :9666; "0" disables the endpoint (not in a
	// BladeConfig: the agent DaemonSet's probes use it).
	// +kubebuilder:validation:MaxLength=261
	// +kubebuilder:validation:XValidation:rule="self == '0' || self.matches(r'^(\\[[0-9A-Fa-f:.]+\\]|[0-9A-Za-z.-]*):([0-9]{1,4}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])$')",message="bindAddress must be host:port (e.g. \":9666\", \"127.0.0.1:9666\" or \"[::1]:9666\", port 0–65535) or \"0\" to disable"
	// +optional
	BindAddress string `json:"bindAddress,omitempty"`
}

// StartOnly are the sections of an AgentConfig an agent reads only when it
// starts: its hardware backend, its gRPC listeners and its metrics address.
// Everything else it applies live, without a restart. The operator rolls
// the agent pods of a BladeConfig when these change.
// +kubebuilder:object:generate=false
type StartOnly struct {
	Hardware HardwareConfig `json:"hardware"`
	GRPC     GRPCConfig     `json:"grpc"`
	Metrics  MetricsConfig  `json:"metrics"`
}

// StartOnly returns the sections of c that take effect only at start.
func (c *AgentConfig) StartOnly() StartOnly {
	return StartOnly{Hardware: c.Hardware, GRPC: c.GRPC, Metrics: c.Metrics}
}
