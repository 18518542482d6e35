// Package opmetrics holds the operator's own Prometheus metrics, registered
// on controller-runtime's registry beside its reconcile counters, so one
// /metrics endpoint serves both.
package opmetrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// AssignedNodes is how many Nodes each BladeConfig won.
	AssignedNodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubeblade_operator_assigned_nodes",
		Help: "Nodes assigned to each BladeConfig (label kubeblade.io/config).",
	}, []string{"bladeconfig"})
	// CertificatesSigned counts certificates issued per signer name.
	CertificatesSigned = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubeblade_operator_certificates_signed_total",
		Help: "Certificates signed through the CertificateSigningRequest API, by signer name.",
	}, []string{"signer"})
	// CertificatesDenied counts CSRs the operator denied or failed.
	CertificatesDenied = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubeblade_operator_certificates_refused_total",
		Help: "CertificateSigningRequests the operator denied or failed, by signer name.",
	}, []string{"signer"})
	// CertificateExpiry is when each certificate the operator keeps expires;
	// the chart's PrometheusRule alerts on it.
	CertificateExpiry = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubeblade_certificate_expiry_timestamp_seconds",
		Help: "Expiry time (Unix seconds) of a kubeblade certificate, by certificate.",
	}, []string{"certificate"})
	// NodeLabelWrites counts Node label patches issued by the assignment.
	NodeLabelWrites = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kubeblade_operator_node_label_writes_total",
		Help: "Patches of the kubeblade.io/config Node label.",
	})
)

func init() {
	metrics.Registry.MustRegister(AssignedNodes, CertificatesSigned, CertificatesDenied, CertificateExpiry, NodeLabelWrites)
}
