package bladectl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeblade/kubeblade/internal/doctor"
)

// hostFacts is what doctor needs to know about the machine besides the
// agent's report: its OS and kernel.
type hostFacts struct {
	os            doctor.OS
	osName        string
	kernelRelease string
}

// hostFacter is a client that can tell its blade's OS (the Kubernetes mode,
// from the Node).
type hostFacter interface {
	hostFacts(ctx context.Context) (hostFacts, error)
}

func newDoctorCmd(o *options) *cobra.Command {
	var osFlag, hostRoot string
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Say what to change so the agent can drive every part of the blade",
		Long: `doctor reads the agent's capability report (what it drives, what is missing
and why) and prints, for the board (CM4, CM5, Radxa CM5), the OS (Talos,
Raspberry Pi OS) and the fan unit (standard, smart) it runs on, exactly what to
change: the Image Factory schematic and Talos machine-config patch, or the
config.txt lines; the module or system extension to install; and the commands
that prove it worked.

On this blade it asks the agent over its socket and reads the OS from
/etc/os-release and the kernel release (--host-root when the host's / is
mounted elsewhere, e.g. in a pod). With --node NAME it works through the
cluster: the Blade object's report and the Node's OS image and kernel version.
--os overrides what was detected. -o json gives the same for scripts.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var forced doctor.OS
			if osFlag != "" {
				var err error
				if forced, err = doctor.ParseOS(osFlag); err != nil {
					return usageError{err}
				}
			}
			results, err := o.forEach(cmd.Context(), false, func(ctx context.Context, blade string, c bladeClient) (result, error) {
				st, err := c.Status(ctx)
				if err != nil {
					return result{}, err
				}
				hw := st.GetHardware()
				if hw == nil || hw.GetBackend() == "" {
					return result{}, errors.New("the agent sent no capability report (compute-blade-agent's API has none): doctor needs kubeblade's agent")
				}
				var facts hostFacts
				if hf, ok := c.(hostFacter); ok {
					if facts, err = hf.hostFacts(ctx); err != nil {
						return result{}, err
					}
				} else if strings.HasPrefix(c.Address(), "unix:") {
					facts = localHostFacts(hostRoot)
				}
				if forced != "" {
					facts.os = forced
				}
				node := ""
				if o.kubeMode() {
					node = blade
				}
				rep := doctor.Diagnose(doctor.Input{Node: node, Backend: hw.GetBackend(), IsBlade: hw.GetIsBlade(),
					SoC: hw.GetSoc(), FanUnit: hw.GetFanUnit(), Detail: hw.GetDetail(),
					Capabilities: hw.GetCapabilities(), Missing: hw.GetMissingCapabilities(),
					OS: facts.os, OSName: facts.osName, KernelRelease: facts.kernelRelease})
				return result{Doctor: &rep}, nil
			})
			if err != nil {
				return err
			}
			for i := range results {
				if results[i].Error != "" {
					results[i].Error += " (doctor needs the agent's capability report: run it on the blade, or use --node NAME through the cluster)"
				}
			}
			if err := o.printResults(results, func(p printer, rs []result) error { return printDoctor(p.out, rs) }); err != nil {
				return err
			}
			return o.finish(results)
		},
	}
	cmd.Flags().StringVar(&osFlag, "os", "", "the blade's OS, talos or raspios (default: detected)")
	cmd.Flags().StringVar(&hostRoot, "host-root", "/", "where the blade's root file system is mounted, for /etc/os-release")
	_ = cmd.RegisterFlagCompletionFunc("os", cobra.FixedCompletions([]string{"talos", "raspios"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// localHostFacts reads os-release(5) (/etc/os-release, else
// /usr/lib/os-release) and the kernel release under root.
func localHostFacts(root string) hostFacts {
	var osRelease []byte
	for _, p := range []string{"etc/os-release", "usr/lib/os-release"} {
		if b, err := os.ReadFile(filepath.Join(root, p)); err == nil {
			osRelease = b
			break
		}
	}
	// A container shares the host's kernel: its own /proc serves when the
	// host's is not mounted under root.
	kernel, err := os.ReadFile(filepath.Join(root, "proc/sys/kernel/osrelease"))
	if err != nil {
		kernel, _ = os.ReadFile("/proc/sys/kernel/osrelease")
	}
	k := strings.TrimSpace(string(kernel))
	name := ""
	for _, l := range strings.Split(string(osRelease), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "PRETTY_NAME="); ok {
			name = strings.Trim(v, `"'`)
		}
	}
	return hostFacts{os: doctor.OSFromRelease(string(osRelease), k), osName: name, kernelRelease: k}
}

// hostFacts reads the Node's status.nodeInfo, which the kubelet fills
// from the host's os-release and kernel.
func (n *nodeClient) hostFacts(ctx context.Context) (hostFacts, error) {
	rctx, cancel := n.k.request(ctx)
	defer cancel()
	node := &corev1.Node{}
	err := n.k.c.Get(rctx, client.ObjectKey{Name: n.node}, node)
	if apierrors.IsNotFound(err) {
		return hostFacts{}, nodeNotFound(n.node)
	}
	if err != nil {
		return hostFacts{}, n.k.explain(ctx, err)
	}
	ni := node.Status.NodeInfo
	return hostFacts{os: doctor.OSFromNodeInfo(ni.OSImage, ni.KernelVersion), osName: ni.OSImage, kernelRelease: ni.KernelVersion}, nil
}

// printDoctor prints each blade's report as a short text.
func printDoctor(w io.Writer, results []result) error {
	first := true
	for _, r := range results {
		if r.Doctor == nil {
			continue
		}
		if !first {
			fmt.Fprintln(w)
		}
		first = false
		d := r.Doctor
		osName := string(d.OS)
		if d.OSName != "" {
			osName += " (" + d.OSName + ")"
		}
		fmt.Fprintf(w, "%s: board %s, OS %s, kernel %s, fan unit %s, backend %s\n", r.Blade, d.Board, osName,
			orDash(d.KernelRelease), orDash(d.FanUnit), orDash(d.Backend))
		if len(d.Missing) > 0 {
			fmt.Fprintf(w, "missing: %s\n", strings.Join(d.Missing, ", "))
		}
		fmt.Fprintf(w, "%s\n", d.Summary)
		for _, f := range d.Fixes {
			fmt.Fprintf(w, "\n== %s\n%s\n", f.Capability, f.Why)
			block := func(title, text string) {
				if text == "" {
					return
				}
				fmt.Fprintf(w, "%s\n", title)
				for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
					fmt.Fprintf(w, "    %s\n", l)
				}
			}
			block("Image Factory schematic (schematic.yaml):", f.Schematic)
			block("Talos machine config patch:", f.TalosPatch)
			block("add to /boot/firmware/config.txt:", strings.Join(f.ConfigTxt, "\n"))
			block("remove from config.txt / configTxtAppend if present:", strings.Join(f.RemoveConfigTxt, "\n"))
			block("install:", strings.Join(f.Install, "\n"))
			block("apply:", strings.Join(f.Apply, "\n"))
			block("check:", strings.Join(f.Verify, "\n"))
			if f.Note != "" {
				fmt.Fprintf(w, "note: %s\n", f.Note)
			}
		}
	}
	return nil
}
