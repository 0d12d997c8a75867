//go:build linux

package main

import (
	"bufio"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// jupyterSide is the Python half of the benchmark, run by the python
// that has Debian's jupyter_client and ipykernel.
//
//go:embed jupyter_side.py
var jupyterSide string

// jupyter is the running jupyter_side.py: one JSON command a line in, one
// JSON answer a line out.
type jupyter struct {
	kernel string // the kernelspec it starts; empty: python3
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr *tailBuffer
}

func startJupyter(python, base string) (*jupyter, error) {
	cmd := exec.Command(python, "-c", jupyterSide)
	// Connection files, IPython's profile and Jupyter's data of this run
	// stay in its directory, removed at the end (the kernel spec is the
	// system's, python3).
	dirs := map[string]string{
		"JUPYTER_RUNTIME_DIR": filepath.Join(base, "jupyter", "runtime"),
		"JUPYTER_CONFIG_DIR":  filepath.Join(base, "jupyter", "config"),
		"JUPYTER_DATA_DIR":    filepath.Join(base, "jupyter", "data"),
		"IPYTHONDIR":          filepath.Join(base, "jupyter", "ipython"),
		"MPLCONFIGDIR":        filepath.Join(base, "jupyter", "mpl"),
		"TMPDIR":              filepath.Join(base, "jupyter", "tmp"), // the connection files
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
	j := &jupyter{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20), stderr: &tailBuffer{max: 8 << 10}}
	cmd.Stderr = j.stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return j, nil
}

// do sends one command and decodes its answer into ans (nil: ignored).
func (j *jupyter) do(cmd map[string]any, ans any) error {
	if _, ok := cmd["kernel"]; !ok && j.kernel != "" {
		cmd["kernel"] = j.kernel
	}
	b, err := json.Marshal(cmd)
	if err != nil {
		return err
	}
	if _, err := j.in.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("jupyter side: %s: %w%s", cmd["op"], err, j.stderr.show())
	}
	line, err := j.out.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("jupyter side: %s: %w%s", cmd["op"], err, j.stderr.show())
	}
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(line, &e) == nil && e.Error != "" {
		return fmt.Errorf("jupyter side: %s: %s%s", cmd["op"], e.Error, j.stderr.show())
	}
	if ans != nil {
		if err := json.Unmarshal(line, ans); err != nil {
			return fmt.Errorf("jupyter side: %s: %w in %q", cmd["op"], err, line)
		}
	}
	return nil
}

func (j *jupyter) close() {
	_ = j.do(map[string]any{"op": "quit"}, nil) // answers nothing: EOF
	j.in.Close()
	done := make(chan struct{})
	go func() { _ = j.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = j.cmd.Process.Kill()
		<-done
	}
}

// msDur is milliseconds from Python as a duration.
func msDur(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }
