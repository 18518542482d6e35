package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/operator"
)

// measureStale starts the operator, kills the first n agents at once and
// returns the longest time until their Blades were marked stale, counted
// from the kill and from each Blade's last heartbeat.
func measureStale(ctx context.Context, cfg *rest.Config, admin client.Client, blades *bladeWatch, names []string,
	stops []func(), n int, heartbeat, timeout time.Duration) (afterKill, afterHeartbeat float64, err error) {
	if heartbeat <= 0 {
		heartbeat = time.Duration(kbv1.DefaultHeartbeatPeriodSeconds) * time.Second
	}
	o := operator.DefaultOptions()
	o.DaemonSet.Image = "ghcr.io/kubeblade/kubeblade:bench"
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.Namespace}}); err != nil {
		return 0, 0, err
	}
	opCfg := rest.CopyConfig(cfg)
	opCfg.QPS, opCfg.Burst = 50, 100
	mgr, err := ctrl.NewManager(opCfg, operator.ManagerOptions(o, ctrl.Options{
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
	}))
	if err != nil {
		return 0, 0, err
	}
	if err := operator.Setup(ctx, mgr, o); err != nil {
		return 0, 0, err
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Println("operator:", err)
		}
	}()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return 0, 0, fmt.Errorf("operator cache did not sync")
	}
	// No Blade is stale while every agent reports.
	if c := blades.unknown(names); c != 0 {
		return 0, 0, fmt.Errorf("%d Blades are Unknown before any agent was killed", c)
	}
	killed := names[:n]
	start := time.Now()
	for i := range killed {
		stops[i]()
	}
	fmt.Printf("killed %d agents in %s; the operator marks a Blade stale %s (3 × %s) after its last heartbeat\n",
		n, time.Since(start).Round(time.Millisecond), kbv1.StaleHeartbeats*heartbeat, heartbeat)
	d, err := waitFor(ctx, 3*heartbeat+timeout, func() bool { return blades.unknown(killed) == n })
	if err != nil {
		return 0, 0, fmt.Errorf("only %d of %d killed agents' Blades marked Unknown: %w", blades.unknown(killed), n, err)
	}
	worst := blades.worstMarkDelay(killed)
	fmt.Printf("stale detection: all %d killed agents' Blades Unknown %s after the kill (target <= 3 × %s + 10 s = %s); "+
		"worst mark %s after a Blade's last heartbeat\n", n, d.Round(100*time.Millisecond), heartbeat,
		kbv1.StaleHeartbeats*heartbeat+10*time.Second, worst.Round(100*time.Millisecond))
	if others := blades.unknown(names[n:]); others != 0 {
		return 0, 0, fmt.Errorf("%d Blades of live agents were marked Unknown", others)
	}
	return d.Seconds(), worst.Seconds(), nil
}
