package nodeenv

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kubeblade/kubeblade/internal/testwait"
)

// The host side of the node: fixed names and addresses, so that a run can
// find and undo what an earlier, killed run left behind.
const (
	// StateDir holds everything the node writes that must persist while it
	// runs: etcd's data, certificates, the kubelet's and containerd's roots,
	// pod logs, component logs, and the host ledger.
	StateDir = "/var/lib/kubeblade-e2e"
	// RunDir holds sockets and containerd's state (its netns mounts too).
	RunDir = "/run/kubeblade-e2e"
	// Bridge is the pods' bridge; the API server listens on its address.
	Bridge = "kubeblade0"
	// NodeName is the real node's name.
	NodeName = "kubeblade-e2e"
	// PodCIDR is the bridge's subnet; Gateway is the host's address on it,
	// which is also the node IP and the API server's address.
	PodCIDR = "10.244.0.0/24"
	Gateway = "10.244.0.1"
	// ServiceCIDR and ServiceIP: the `kubernetes` Service. No kube-proxy
	// runs; one DNAT rule sends ServiceIP:443 to the API server.
	ServiceCIDR = "10.96.0.0/24"
	ServiceIP   = "10.96.0.1"
	// chainPrefix names the iptables chains the suite creates itself.
	chainPrefix = "KUBEBLADE-E2E-"
)

// FixedPorts are the ports the node's components listen on: etcd
// (2379–2381), kube-apiserver (6443), kubelet (10248 healthz, 10250),
// kube-controller-manager (10257), kube-scheduler (10259).
var FixedPorts = []int{2379, 2380, 2381, 6443, 10248, 10250, 10257, 10259}

// watchedPaths are host paths a kubelet, containerd, the CNI plugins or the
// agent DaemonSet may create outside StateDir and RunDir (defaults the
// suite overrides where it can, hard-coded ones where it cannot, and the
// DaemonSet's hostPaths). Those absent before a run are removed after it.
var watchedPaths = []string{
	"/var/lib/kubeblade", "/run/kubeblade", // the agent's hostPaths
	"/var/log/containers", "/var/log/pods", // the kubelet's log links (hard-coded) and default pod logs
	"/var/lib/kubelet", "/etc/kubernetes", // kubelet defaults
	"/var/lib/cni", "/etc/cni", "/opt/cni", "/run/cni", // CNI defaults
	"/var/lib/containerd", "/run/containerd", "/etc/containerd", // containerd defaults
	"/var/run/netns", // netns mounts, if not under containerd's state
}

// sysctls the kubelet (vm.overcommit_memory, vm.panic_on_oom, kernel.panic,
// kernel.panic_on_oops, kernel.keys.*) and the bridge plugin (forwarding)
// change; their values before the run are restored after it.
var sysctls = []string{
	"vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
	"kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes",
	"net.ipv4.ip_forward", "net.ipv4.conf.all.forwarding", "net.ipv4.conf.default.forwarding",
	"net.ipv6.conf.all.forwarding", "net.ipv6.conf.default.forwarding",
	"net.bridge.bridge-nf-call-iptables", "net.bridge.bridge-nf-call-ip6tables",
}

// ledger records the host's state before a run: what Cleanup must restore
// and what it may remove. It is written before anything changes, so that a
// run killed at any point leaves enough behind for the next run (or
// hack/node-cleanup) to undo it.
type ledger struct {
	Begun   time.Time         `json:"begun"`
	Sysctls map[string]string `json:"sysctls"`
	Absent  []string          `json:"absent"`  // watchedPaths absent before the run
	Cgroups []string          `json:"cgroups"` // kubepods cgroup directories absent before the run
	// NodeBinaries are executables only the node runs (kubelet,
	// containerd, its runc shim): every process of theirs is the run's.
	NodeBinaries []string `json:"nodeBinaries"`
	// Started are the processes the run started itself. The control-plane
	// binaries are shared with every envtest on the machine, so those
	// processes are told apart by PID and start time, never by executable.
	Started []started `json:"started"`
}

// started identifies one process across PID reuse.
type started struct {
	PID       int    `json:"pid"`
	StartTime string `json:"startTime"` // /proc/<pid>/stat field 22
	Name      string `json:"name"`
}

// procStartTime reads a process's start time in clock ticks since boot.
func procStartTime(pid int) string {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return ""
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19] // field 22 overall: fields after ")" start at field 3
}

// addStarted records a started process in the ledger before anything
// else happens, so a killed run's next start can stop it.
func (l *ledger) addStarted(pid int, name string) error {
	l.Started = append(l.Started, started{PID: pid, StartTime: procStartTime(pid), Name: name})
	return l.write()
}

func (l *ledger) write() error {
	raw, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	tmp := ledgerPath() + ".tmp"
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, ledgerPath())
}

func ledgerPath() string { return filepath.Join(StateDir, "host-ledger.json") }

// LeftOver reports whether an earlier run left its ledger behind, i.e. did
// not finish its cleanup.
func LeftOver() bool {
	_, err := os.Stat(ledgerPath())
	return err == nil
}

func sysctlPath(name string) string {
	return filepath.Join("/proc/sys", strings.ReplaceAll(name, ".", "/"))
}

func readSysctl(name string) (string, bool) {
	b, err := os.ReadFile(sysctlPath(name))
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

func kubepodsCgroups() []string {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	if d := "/sys/fs/cgroup/kubepods"; exists(d) {
		dirs = append(dirs, d)
	}
	return dirs
}

func allCgroupHierarchies() []string {
	var out []string
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, filepath.Join("/sys/fs/cgroup", e.Name(), "kubepods"))
		}
	}
	return append(out, "/sys/fs/cgroup/kubepods")
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// recordHost writes the ledger; nodeBinaries are the executables whose
// processes all belong to the run.
func recordHost(nodeBinaries []string) (*ledger, error) {
	l := &ledger{Begun: time.Now(), Sysctls: map[string]string{}}
	for _, s := range sysctls {
		if v, ok := readSysctl(s); ok {
			l.Sysctls[s] = v
		}
	}
	for _, p := range watchedPaths {
		if !exists(p) {
			l.Absent = append(l.Absent, p)
		}
	}
	for _, c := range allCgroupHierarchies() {
		if !exists(c) {
			l.Cgroups = append(l.Cgroups, c)
		}
	}
	for _, b := range nodeBinaries {
		if r, err := filepath.EvalSymlinks(b); err == nil {
			l.NodeBinaries = append(l.NodeBinaries, r)
		}
	}
	if err := os.MkdirAll(StateDir, 0o700); err != nil {
		return nil, err
	}
	return l, l.write()
}

// HostConflicts reports what on this host would be changed by or would
// break a run: a Kubernetes node already set up here (kubepods cgroups,
// KUBE-/CNI- iptables chains, the bridge), unless an earlier run's ledger
// says they are its own leftovers.
func HostConflicts() []string {
	if LeftOver() {
		return nil
	}
	var out []string
	for _, c := range kubepodsCgroups() {
		out = append(out, "cgroup "+c+" exists (another kubelet runs or ran here)")
	}
	for _, ipt := range []string{"iptables", "ip6tables"} {
		chains, err := chains(ipt)
		if err != nil {
			continue
		}
		for _, c := range chains {
			if strings.HasPrefix(c.name, "KUBE-") || strings.HasPrefix(c.name, "CNI-") {
				out = append(out, fmt.Sprintf("%s chain %s in table %s exists (Kubernetes networking runs or ran here)", ipt, c.name, c.table))
			}
		}
	}
	if exists("/sys/class/net/" + Bridge) {
		out = append(out, "network interface "+Bridge+" exists")
	}
	return out
}

// setUpNetwork creates the bridge with the gateway address (so the API
// server can listen on it before the first pod exists), routes the Service
// range into it, sends ServiceIP:443 to the API server for host-network
// pods (OUTPUT) and pod-network pods (PREROUTING), and drops anything the
// pods would forward off the host: nothing they send leaves the machine.
func setUpNetwork() error {
	steps := [][]string{
		{"ip", "link", "add", Bridge, "type", "bridge"},
		{"ip", "addr", "add", Gateway + "/24", "dev", Bridge},
		{"ip", "link", "set", Bridge, "up"},
		{"ip", "route", "add", ServiceCIDR, "dev", Bridge},
		{"iptables", "-t", "nat", "-N", chainPrefix + "SERVICES"},
		{"iptables", "-t", "nat", "-A", chainPrefix + "SERVICES", "-d", ServiceIP, "-p", "tcp", "--dport", "443",
			"-j", "DNAT", "--to-destination", Gateway + ":6443"},
		{"iptables", "-t", "nat", "-I", "OUTPUT", "-j", chainPrefix + "SERVICES"},
		{"iptables", "-t", "nat", "-I", "PREROUTING", "-j", chainPrefix + "SERVICES"},
		{"iptables", "-t", "filter", "-N", chainPrefix + "FORWARD"},
		{"iptables", "-t", "filter", "-A", chainPrefix + "FORWARD", "-s", PodCIDR, "!", "-d", PodCIDR, "-j", "DROP"},
		{"iptables", "-t", "filter", "-I", "FORWARD", "-j", chainPrefix + "FORWARD"},
	}
	for _, s := range steps {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(s, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// Cleanup undoes what a run changed on the host, as its ledger records:
// it kills the run's processes and containers, unmounts what they mounted,
// removes iptables chains (KUBE-*, CNI-*, the suite's own), the bridge,
// cgroups and paths that did not exist before, restores sysctls, and
// removes StateDir and RunDir. It carries on past errors and returns them
// all. Without a ledger it does nothing.
func Cleanup() error {
	raw, err := os.ReadFile(ledgerPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var l ledger
	if err := json.Unmarshal(raw, &l); err != nil {
		return fmt.Errorf("host ledger %s: %w", ledgerPath(), err)
	}
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	add(killProcesses(&l))
	add(unmountUnder(StateDir, RunDir))
	add(removeChains())
	if exists("/sys/class/net/" + Bridge) {
		add(run("ip", "link", "del", Bridge))
	}
	for _, c := range l.Cgroups {
		add(removeCgroup(c))
	}
	for name, v := range l.Sysctls {
		if cur, ok := readSysctl(name); ok && cur != v {
			add(os.WriteFile(sysctlPath(name), []byte(v), 0o644))
		}
	}
	for _, p := range l.Absent {
		if exists(p) {
			add(os.RemoveAll(p))
		}
	}
	add(os.RemoveAll(RunDir))
	// The ledger goes last, with StateDir: a cleanup that failed above
	// leaves it for the next attempt.
	if len(errs) == 0 {
		add(os.RemoveAll(StateDir))
	}
	return errors.Join(errs...)
}

// HostDiff compares the host with the ledger's record and lists what the run
// changed and Cleanup did not restore. It runs after Cleanup, from a copy
// of the ledger taken before.
func hostDiff(l *ledger) []string {
	var out []string
	for name, v := range l.Sysctls {
		if cur, ok := readSysctl(name); ok && cur != v {
			out = append(out, fmt.Sprintf("sysctl %s = %s, was %s", name, cur, v))
		}
	}
	for _, p := range l.Absent {
		if exists(p) {
			out = append(out, p+" remains")
		}
	}
	for _, c := range l.Cgroups {
		if exists(c) {
			out = append(out, "cgroup "+c+" remains")
		}
	}
	for _, p := range []string{StateDir, RunDir, "/sys/class/net/" + Bridge} {
		if exists(p) {
			out = append(out, p+" remains")
		}
	}
	for _, ipt := range []string{"iptables", "ip6tables"} {
		cs, _ := chains(ipt)
		for _, c := range cs {
			if ours(c.name) {
				out = append(out, fmt.Sprintf("%s chain %s/%s remains", ipt, c.table, c.name))
			}
		}
	}
	for _, p := range processesOf(l) {
		out = append(out, fmt.Sprintf("process %d (%s) still runs", p.pid, p.exe))
	}
	return out
}

func run(name string, args ...string) error {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

type proc struct {
	pid int
	exe string
}

// processesOf lists the run's processes: those it started (by PID and
// start time), those running a node-only binary, and those in a kubepods
// cgroup (the pods' containers and their pause processes).
func processesOf(l *ledger) []proc {
	want := map[string]bool{}
	for _, b := range l.NodeBinaries {
		want[b] = true
	}
	mine := map[int]bool{}
	for _, s := range l.Started {
		if st := procStartTime(s.PID); st != "" && st == s.StartTime && alive(s.PID) {
			mine[s.PID] = true
		}
	}
	var out []proc
	entries, _ := os.ReadDir("/proc")
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self || !alive(pid) {
			continue
		}
		exe, _ := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		exe = strings.TrimSuffix(exe, " (deleted)")
		if mine[pid] || want[exe] {
			out = append(out, proc{pid, exe})
			continue
		}
		cg, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if strings.Contains(string(cg), "/kubepods") {
			out = append(out, proc{pid, exe})
		}
	}
	return out
}

// killProcesses stops the kubelet first (so it restarts nothing), then
// everything else of the run, with SIGKILL: a node torn down in a test
// needs no graceful exit.
func killProcesses(l *ledger) error {
	for _, p := range processesOf(l) {
		if filepath.Base(p.exe) == "kubelet" {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
	}
	// The kernel reaps them in its own time: nothing to poll but /proc.
	err := testwait.Poll(context.Background(), 30*time.Second, func(context.Context) (bool, string) {
		left := processesOf(l)
		for _, p := range left {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
		return len(left) == 0, fmt.Sprint(left)
	})
	if err != nil {
		return fmt.Errorf("processes survive SIGKILL: %w", err)
	}
	return nil
}

// alive reports whether pid exists and is not a zombie (a zombie is dead;
// its parent reaps it).
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// splitRule splits an iptables-save line into words, keeping quoted
// strings (comments) whole and unquoted, as iptables wants them back.
func splitRule(line string) []string {
	var out []string
	var b strings.Builder
	inWord, quoted := false, false
	for _, r := range line {
		switch {
		case r == '"':
			quoted = !quoted
			inWord = true
		case r == ' ' && !quoted:
			if inWord {
				out = append(out, b.String())
				b.Reset()
				inWord = false
			}
		default:
			b.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		out = append(out, b.String())
	}
	return out
}

// unmountUnder detaches every mount below the given directories, deepest
// first (overlay rootfs, shm, netns, projected and secret volumes).
func unmountUnder(dirs ...string) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	var mounts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		for _, d := range dirs {
			if mp == d || strings.HasPrefix(mp, d+"/") {
				mounts = append(mounts, mp)
			}
		}
	}
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i]) > len(mounts[j]) })
	var errs []error
	for _, m := range mounts {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
		}
	}
	return errors.Join(errs...)
}

func unescapeMount(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

type chain struct{ table, name string }

func ours(name string) bool {
	return strings.HasPrefix(name, "KUBE-") || strings.HasPrefix(name, "CNI-") || strings.HasPrefix(name, chainPrefix)
}

func chains(ipt string) ([]chain, error) {
	var out []chain
	for _, table := range []string{"filter", "nat", "mangle"} {
		raw, err := exec.Command(ipt+"-save", "-t", table).Output()
		if err != nil {
			return out, fmt.Errorf("%s-save -t %s: %w", ipt, table, err)
		}
		for _, line := range strings.Split(string(raw), "\n") {
			if strings.HasPrefix(line, ":") {
				out = append(out, chain{table, strings.Fields(line[1:])[0]})
			}
		}
	}
	return out, nil
}

// removeChains deletes the rules that jump to the run's chains (KUBE-* of
// the kubelet, CNI-* of the plugins, the suite's own), then the chains.
func removeChains() error {
	var errs []error
	for _, ipt := range []string{"iptables", "ip6tables"} {
		for _, table := range []string{"filter", "nat", "mangle"} {
			raw, err := exec.Command(ipt+"-save", "-t", table).Output()
			if err != nil {
				continue // e.g. no ip6tables support
			}
			var mine []string
			for _, line := range strings.Split(string(raw), "\n") {
				f := splitRule(line)
				switch {
				case strings.HasPrefix(line, ":") && ours(f[0][1:]):
					mine = append(mine, f[0][1:])
				case len(f) > 1 && f[0] == "-A" && !ours(f[1]):
					for i := 2; i+1 < len(f); i++ {
						if (f[i] == "-j" || f[i] == "-g") && ours(f[i+1]) {
							args := append([]string{"-t", table, "-D"}, f[1:]...)
							if err := run(ipt, args...); err != nil {
								errs = append(errs, err)
							}
							break
						}
					}
				}
			}
			for _, c := range mine {
				_ = run(ipt, "-t", table, "-F", c)
			}
			for _, c := range mine {
				if err := run(ipt, "-t", table, "-X", c); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// removeCgroup removes a cgroup directory tree, children first (cgroupfs
// refuses to remove a cgroup with children or processes).
func removeCgroup(dir string) error {
	if !exists(dir) {
		return nil
	}
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	var errs []error
	for _, d := range dirs {
		if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("rmdir %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}
