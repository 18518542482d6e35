// Package metrics exposes an agent's state and counters to Prometheus. The
// collector reads a snapshot at scrape time, so an idle agent spends nothing
// on metrics between scrapes, and every agent has its own registry (no
// global state), which lets many agents share one process.
package metrics

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/kubeblade/kubeblade/internal/agent"
	"github.com/kubeblade/kubeblade/internal/core"
	"github.com/kubeblade/kubeblade/internal/hardware"
)

// Source is what the collector reads; *agent.Agent implements it.
type Source interface {
	Status() agent.Status
	Counters() agent.Counters
}

const ns = "kubeblade"

var (
	descTemp       = prometheus.NewDesc(ns+"_soc_temperature_celsius", "SoC temperature.", nil, nil)
	descAirflow    = prometheus.NewDesc(ns+"_airflow_temperature_celsius", "Airflow temperature measured by the smart fan unit.", nil, nil)
	descRPM        = prometheus.NewDesc(ns+"_fan_rpm", "Fan speed from the tachometer.", nil, nil)
	descDuty       = prometheus.NewDesc(ns+"_fan_duty_ratio", "Fan PWM duty, 0 to 1.", nil, nil)
	descFanMode    = prometheus.NewDesc(ns+"_fan_mode", "1 for the fan mode in force (auto, manual, critical).", []string{"mode"}, nil)
	descCritical   = prometheus.NewDesc(ns+"_thermal_critical", "1 while the blade is in critical temperature mode.", nil, nil)
	descCritThresh = prometheus.NewDesc(ns+"_critical_threshold_celsius", "Temperature at which critical mode starts.", nil, nil)
	descIdentify   = prometheus.NewDesc(ns+"_identify_active", "1 while identify is active.", nil, nil)
	descStealth    = prometheus.NewDesc(ns+"_stealth_active", "1 while stealth mode is in effect.", nil, nil)
	descStalled    = prometheus.NewDesc(ns+"_fan_stalled", "1 while the fan is detected as stalled.", nil, nil)
	descPower      = prometheus.NewDesc(ns+"_power_source", "1 for the detected power source.", []string{"source"}, nil)
	descCap        = prometheus.NewDesc(ns+"_capability_available", "1 if the hardware capability is available, 0 if missing.", []string{"capability"}, nil)
	descInfo       = prometheus.NewDesc(ns+"_agent_info", "Agent build and hardware identity; always 1.", []string{"version", "backend", "soc", "fan_unit"}, nil)
	descUp         = prometheus.NewDesc(ns+"_agent_running", "1 while the agent's control loop runs.", nil, nil)
	descEvents     = prometheus.NewDesc(ns+"_events_total", "Blade events raised, by reason.", []string{"reason"}, nil)
	descHWErr      = prometheus.NewDesc(ns+"_hardware_errors_total", "Failed hardware operations, by operation.", []string{"op"}, nil)
	descEdges      = prometheus.NewDesc(ns+"_button_edges_total", "Raw button edges before debouncing.", nil, nil)
	descPresses    = prometheus.NewDesc(ns+"_button_presses_total", "Button presses after debouncing.", nil, nil)
	descSamples    = prometheus.NewDesc(ns+"_sensor_samples_total", "Sensor sampling rounds.", nil, nil)
	descDropped    = prometheus.NewDesc(ns+"_event_subscriber_dropped_total", "Events internal subscribers lost by falling behind.", nil, nil)
)

// Collector implements prometheus.Collector over an agent.
type Collector struct{ src Source }

// NewCollector returns a collector for src.
func NewCollector(src Source) *Collector { return &Collector{src: src} }

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descTemp, descAirflow, descRPM, descDuty, descFanMode, descCritical, descCritThresh,
		descIdentify, descStealth, descStalled, descPower, descCap, descInfo, descUp, descEvents, descHWErr, descEdges,
		descPresses, descSamples, descDropped} {
		ch <- d
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	st := c.src.Status()
	cn := c.src.Counters()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	if st.TemperatureValid {
		gauge(descTemp, st.TemperatureCelsius)
	}
	if st.AirflowValid {
		gauge(descAirflow, st.AirflowCelsius)
	}
	if st.FanRPMValid {
		gauge(descRPM, st.FanRPM)
	}
	gauge(descDuty, float64(st.FanPercent)/100)
	for _, m := range []core.FanMode{core.FanModeAuto, core.FanModeManual, core.FanModeCritical} {
		gauge(descFanMode, b2f(st.FanMode == m), string(m))
	}
	gauge(descCritical, b2f(st.Critical))
	gauge(descCritThresh, st.Settings.CriticalCelsius)
	gauge(descIdentify, b2f(st.Identify))
	gauge(descStealth, b2f(st.Stealth))
	gauge(descStalled, b2f(st.FanStalled))
	if st.PowerSource != hardware.PowerUnknown {
		for _, p := range []hardware.PowerSource{hardware.PowerPoEPlus, hardware.PowerPoEOrUSBC} {
			gauge(descPower, b2f(st.PowerSource == p), string(p))
		}
	}
	for _, cp := range hardware.AllCapabilities {
		gauge(descCap, b2f(st.Capabilities.Has(cp)), string(cp))
	}
	gauge(descInfo, 1, st.Version, st.Info.Backend, st.Info.SoC, string(st.Info.FanUnit))
	gauge(descUp, b2f(st.Running))
	reasons := make([]string, 0, len(cn.Events))
	for r := range cn.Events {
		reasons = append(reasons, string(r))
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		if core.Reason(r) == core.ReasonStatusChanged {
			continue
		}
		counter(descEvents, cn.Events[core.Reason(r)], r)
	}
	for op, n := range cn.HardwareErrors {
		counter(descHWErr, n, op)
	}
	counter(descEdges, cn.ButtonEdges)
	counter(descPresses, cn.ButtonPresses)
	counter(descSamples, cn.Samples)
	counter(descDropped, cn.BusDropped)
}

// NewRegistry returns a registry with the agent collector, any extra
// collectors, and the Go runtime and process collectors.
func NewRegistry(src Source, extra ...prometheus.Collector) *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(NewCollector(src),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	r.MustRegister(extra...)
	return r
}

// KubeStats are the Kubernetes side's delivery counters. They are a plain
// struct so this package (and a standalone build) needs no Kubernetes client.
type KubeStats struct {
	Connected              bool
	Requests, Writes       uint64
	EventsPending          int
	EventsSent, EventsDrop uint64
}

var (
	descKubeConnected = prometheus.NewDesc(ns+"_kube_api_connected", "1 while the last request to the Kubernetes API server succeeded.", nil, nil)
	descKubeRequests  = prometheus.NewDesc(ns+"_kube_api_requests_total", "Requests to the Kubernetes API server.", nil, nil)
	descKubeWrites    = prometheus.NewDesc(ns+"_kube_api_writes_total", "Mutating requests (POST, PUT, PATCH, DELETE) to the Kubernetes API server.", nil, nil)
	descEvPending     = prometheus.NewDesc(ns+"_kube_events_pending", "Kubernetes Events waiting for the API server.", nil, nil)
	descEvSent        = prometheus.NewDesc(ns+"_kube_events_sent_total", "Kubernetes Event writes that reached the API server.", nil, nil)
	descEvDropped     = prometheus.NewDesc(ns+"_kube_events_dropped_total", "Kubernetes Events lost because the undelivered queue was full (oldest first).", nil, nil)
)

// KubeCollector exposes the Kubernetes side's delivery counters.
type KubeCollector struct{ stats func() KubeStats }

// NewKubeCollector returns a collector reading stats at scrape time.
func NewKubeCollector(stats func() KubeStats) *KubeCollector { return &KubeCollector{stats: stats} }

// Describe implements prometheus.Collector.
func (c *KubeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descKubeConnected, descKubeRequests, descKubeWrites, descEvPending, descEvSent, descEvDropped} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *KubeCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	ch <- prometheus.MustNewConstMetric(descKubeConnected, prometheus.GaugeValue, b2f(s.Connected))
	ch <- prometheus.MustNewConstMetric(descKubeRequests, prometheus.CounterValue, float64(s.Requests))
	ch <- prometheus.MustNewConstMetric(descKubeWrites, prometheus.CounterValue, float64(s.Writes))
	ch <- prometheus.MustNewConstMetric(descEvPending, prometheus.GaugeValue, float64(s.EventsPending))
	ch <- prometheus.MustNewConstMetric(descEvSent, prometheus.CounterValue, float64(s.EventsSent))
	ch <- prometheus.MustNewConstMetric(descEvDropped, prometheus.CounterValue, float64(s.EventsDrop))
}
