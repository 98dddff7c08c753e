package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// stopGrace is how long a process gets between SIGTERM and SIGKILL.
const stopGrace = 10 * time.Second

// process is one running control-plane binary whose output goes to a log
// file under the work directory.
type process struct {
	name    string
	path    string
	args    []string
	logPath string

	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
}

// newProcess describes a binary to run; it does not start it.
func newProcess(name, path, logDir string, args []string) *process {
	return &process{
		name:    name,
		path:    path,
		args:    args,
		logPath: filepath.Join(logDir, name+".log"),
	}
}

// start launches the process in its own process group. The process gets
// SIGKILL when the OS thread that started it dies; the Go runtime only ends
// threads when the whole program exits (no goroutine here locks its thread),
// so the process does not outlive the test binary or command. ctx's end
// does not stop it: only stop does.
func (p *process) start(ctx context.Context) error {
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open log of %s: %w", p.name, err)
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "==== %s starting: %s %q\n", time.Now().Format(time.RFC3339), p.path, p.args)

	cmd := exec.CommandContext(context.WithoutCancel(ctx), p.path, p.args...) //nolint:gosec // G204: a binary of the bin directory, with arguments built in this package
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = os.Environ()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	p.cmd = cmd
	p.done = make(chan struct{})
	p.waitErr = nil
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return nil
}

// exited reports whether the process has ended, and if so how.
func (p *process) exited() (bool, error) {
	if p.done == nil {
		return true, nil
	}
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// exitError describes an unexpected exit together with the end of the log.
func (p *process) exitError() error {
	_, werr := p.exited()
	if werr == nil {
		werr = errors.New("exit status 0")
	}
	return fmt.Errorf("%s exited unexpectedly (%w); log %s ends with:\n%s", p.name, werr, p.logPath, p.logTail())
}

// stop sends SIGTERM to the process group, then SIGKILL after stopGrace.
// It is a no-op for a process that was never started or already ended.
func (p *process) stop() error {
	if p.cmd == nil || p.done == nil {
		return nil
	}
	if done, _ := p.exited(); done {
		return nil
	}
	pgid := p.cmd.Process.Pid
	if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("send SIGTERM to %s: %w", p.name, err)
	}
	timer := time.NewTimer(stopGrace)
	defer timer.Stop()
	select {
	case <-p.done:
		// Reap anything left in the group (children of the process).
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		return nil
	case <-timer.C:
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("send SIGKILL to %s: %w", p.name, err)
	}
	<-p.done
	return nil
}

// Terminate ends a child process of the harness's own (the daemon, the
// bench's reference) as Kubernetes ends a container: SIGTERM, then SIGKILL
// once grace has passed. done is closed once the process has been waited
// for; Terminate returns when it is.
func Terminate(p *os.Process, done <-chan struct{}, grace time.Duration) {
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(grace):
		_ = p.Kill()
		<-done
	}
}

// Exited reports whether done is closed: whether the process it stands for
// has ended and been waited for.
func Exited(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// logTail returns the last lines of the process log.
func (p *process) logTail() string {
	return tailFile(p.logPath, 40, 8192)
}

// tailFile returns at most maxLines lines from the last maxBytes bytes of a
// file, or a note saying why it could not be read.
func tailFile(path string, maxLines int, maxBytes int64) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(cannot stat %s: %v)", path, err)
	}
	off := max(st.Size()-maxBytes, 0)
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return fmt.Sprintf("(cannot seek %s: %v)", path, err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	data = bytes.TrimRight(data, "\n")
	lines := bytes.Split(data, []byte("\n"))
	if off > 0 && len(lines) > 1 {
		lines = lines[1:] // first line is probably cut
	}
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
