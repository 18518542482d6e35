package localcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Process is one child process whose output goes to a log file.
type Process struct {
	Name string
	// Log is the file holding its stdout and stderr.
	Log  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	// anyExit: the process's exit status after SIGTERM means nothing
	// (kube-scheduler exits 1 when told to stop).
	anyExit bool
}

// startProcess runs bin with args and env (added to this process's) in the
// working directory wd (empty: this process's), logging to logDir/name.log. Children get their own process group, so a
// Ctrl-C in the terminal reaches only the parent, which stops them in
// order; if the parent dies anyway they get SIGTERM from the kernel.
func startProcess(name, logDir, wd, bin string, args, env []string) (*Process, error) {
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	logPath := filepath.Join(logDir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = wd
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Process{Name: name, Log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is the exit status once Done is closed.
func (p *Process) Err() error { <-p.done; return p.err }

// Running reports whether the process has not exited yet.
func (p *Process) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Stop sends SIGTERM and waits up to grace for the exit, then kills. It
// returns the exit error of a process that did not exit cleanly on
// SIGTERM, nil otherwise.
func (p *Process) Stop(grace time.Duration) error {
	if !p.Running() {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if p.anyExit {
			return nil
		}
		return p.exitErr()
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not exit within %s of SIGTERM; killed", p.Name, grace)
	}
}

// Kill sends SIGKILL and waits for the exit.
func (p *Process) Kill() {
	if p.Running() {
		_ = p.cmd.Process.Kill()
	}
	<-p.done
}

func (p *Process) exitErr() error {
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM {
			return nil // servers that do not trap SIGTERM
		}
	}
	if p.err != nil {
		return fmt.Errorf("%s: %w (log: %s)", p.Name, p.err, p.Log)
	}
	return nil
}
