//go:build linux

package benchutil

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Jupyter is bench/kernel/jupyter_side.py running: one JSON command a line
// in, one JSON answer a line out; it starts ipykernels through Debian's
// jupyter_client.
type Jupyter struct {
	// Kernel is the kernelspec of the commands that name none; empty: the
	// side's own default, python3. bench/kernel sets it to measure another
	// Python kernelspec bare.
	Kernel string

	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr *TailBuffer
	closed bool
}

// StartJupyter runs script (jupyter_side.py's text) with python; its
// connection files, IPython profile and Jupyter data stay below dir.
func StartJupyter(python, script, dir string) (*Jupyter, error) {
	cmd := exec.Command(python, "-c", script)
	dirs := map[string]string{
		"JUPYTER_RUNTIME_DIR": filepath.Join(dir, "runtime"),
		"JUPYTER_CONFIG_DIR":  filepath.Join(dir, "config"),
		"JUPYTER_DATA_DIR":    filepath.Join(dir, "data"),
		"IPYTHONDIR":          filepath.Join(dir, "ipython"),
		"MPLCONFIGDIR":        filepath.Join(dir, "mpl"),
		"TMPDIR":              filepath.Join(dir, "tmp"), // the connection files
	}
	for k, d := range dirs {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
		cmd.Env = append(cmd.Env, k+"="+d)
	}
	cmd.Env = append(cmd.Env, "PYDEVD_DISABLE_FILE_VALIDATION=1")
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		// PYTHON* (PYTHONUNBUFFERED and the like) would change the kernels.
		if _, ours := dirs[k]; !ours && !strings.HasPrefix(k, "PYTHON") && k != "PYDEVD_DISABLE_FILE_VALIDATION" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	j := &Jupyter{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20), stderr: &TailBuffer{Max: 8 << 10}}
	cmd.Stderr = j.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", python, err)
	}
	return j, nil
}

// Do sends one command and decodes its answer into ans (nil: ignored).
func (j *Jupyter) Do(cmd map[string]any, ans any) error {
	if _, ok := cmd["kernel"]; !ok && j.Kernel != "" {
		cmd["kernel"] = j.Kernel
	}
	b, err := json.Marshal(cmd)
	if err != nil {
		return err
	}
	if _, err := j.in.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("jupyter side: %s: %w%s", cmd["op"], err, j.stderr.Show())
	}
	line, err := j.out.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("jupyter side: %s: %w%s", cmd["op"], err, j.stderr.Show())
	}
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(line, &e) == nil && e.Error != "" {
		return fmt.Errorf("jupyter side: %s: %s%s", cmd["op"], e.Error, j.stderr.Show())
	}
	if ans != nil {
		if err := json.Unmarshal(line, ans); err != nil {
			return fmt.Errorf("jupyter side: %s: %w in %q", cmd["op"], err, line)
		}
	}
	return nil
}

// PID is the jupyter side's own process id (its kernels are its children).
func (j *Jupyter) PID() int { return j.cmd.Process.Pid }

// Close asks the side to quit, which shuts its kernels down, and waits.
// Calls after the first do nothing.
func (j *Jupyter) Close() {
	if j.closed {
		return
	}
	j.closed = true
	_, _ = j.in.Write([]byte(`{"op":"quit"}` + "\n")) // answers nothing: EOF
	j.in.Close()
	done := make(chan struct{})
	go func() { _ = j.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = j.cmd.Process.Kill()
		<-done
	}
}
