// Package jupyterbridge is the driver of an installed Jupyter kernel
// (language jupyter:NAME, PROTOCOL.md §8): an entry of the cellbox binary
// that the kernel manager starts inside the workspace's sandbox, where the
// binary is at sandbox.SelfPath. It speaks the driver contract
// (kernel/drivers/README.md) to the manager on fds 3 and 4 and 1 and 2, and
// the Jupyter messaging protocol to the kernel it starts from the
// kernelspec, over ipc sockets in a private directory of the sandbox's /tmp.
//
// Everything the kernel sends is untrusted: the kernel runs the user's code,
// which can speak on the kernel's own sockets. Frames are bounded by
// kernel/jupyter, messages are checked before they are used, the bridge
// keeps no queue of its own (a kernel that floods iopub is read only as fast
// as the manager reads the bridge's output), and nothing panics on what it
// reads.
package jupyterbridge

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

// Entry is the bridge's re-exec entry (sandbox.ReexecEnv).
const Entry = "jupyter-bridge"

func init() {
	sandbox.Register(Entry, Main)
}

// Config is what the bridge is started with: a kernelspec.
type Config struct {
	// Name is the kernelspec's name (jupyter:NAME).
	Name string `json:"name"`
	// Argv runs the kernel; {connection_file} and {resource_dir} are
	// replaced as Jupyter does. argv[0] without a slash is looked up on
	// the kernel's PATH.
	Argv []string `json:"argv"`
	// Env is added to the kernel's environment; ${VAR} and $VAR in a
	// value are replaced from the bridge's (Jupyter's Template rules).
	Env map[string]string `json:"env,omitempty"`
	// InterruptMode is "signal" (default) or "message".
	InterruptMode string `json:"interruptMode,omitempty"`
	// ResourceDir is the kernelspec's directory.
	ResourceDir string `json:"resourceDir,omitempty"`
	// StartTimeoutMs bounds the kernel's start, until it answers
	// kernel_info_request (0: DefaultStartTimeout).
	StartTimeoutMs int64 `json:"startTimeoutMs,omitempty"`
}

// maxConfigBytes bounds the config, one argument of the bridge: Linux
// refuses a single argument over 128 KiB (MAX_ARG_STRLEN).
const maxConfigBytes = 120 << 10

// Command is how the manager starts the bridge for cfg in a sandbox: the
// program's argv, and the environment entry that selects the bridge.
func Command(cfg Config) (argv []string, envEntry string, err error) {
	if err := cfg.validate(); err != nil {
		return nil, "", err
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("jupyter kernel %s: %w", cfg.Name, err)
	}
	if len(b) > maxConfigBytes {
		return nil, "", fmt.Errorf("jupyter kernel %s: its kernelspec (argv and env) is %d bytes, more than the %d a sandboxed program can be given", cfg.Name, len(b), maxConfigBytes)
	}
	return []string{sandbox.SelfPath, string(b)}, sandbox.ReexecEnv + "=" + Entry, nil
}

func (cfg *Config) validate() error {
	if len(cfg.Argv) == 0 || cfg.Argv[0] == "" {
		return fmt.Errorf("jupyter kernel %s: the kernelspec's argv is empty", cfg.Name)
	}
	switch cfg.InterruptMode {
	case "", "signal", "message":
	default:
		return fmt.Errorf("jupyter kernel %s: interrupt_mode %q is neither signal nor message", cfg.Name, cfg.InterruptMode)
	}
	return nil
}

// kernelArgv is argv with Jupyter's substitutions (jupyter_client's
// format_kernel_cmd): {connection_file}, {resource_dir}.
func kernelArgv(argv []string, connFile, resourceDir string) []string {
	r := strings.NewReplacer("{connection_file}", connFile, "{resource_dir}", resourceDir)
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = r.Replace(a)
	}
	return out
}

// kernelEnv is env with the kernelspec's env added, each value expanded
// from env as Python's string.Template.safe_substitute does (what
// jupyter_client does): $$ is $, $NAME and ${NAME} are the variable's value,
// anything else (an unknown name, a lone $) stays as written.
func kernelEnv(env []string, extra map[string]string) []string {
	lookup := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			lookup[k] = v
		}
	}
	out := append([]string(nil), env...)
	set := func(k, v string) {
		for i, kv := range out {
			if strings.HasPrefix(kv, k+"=") {
				out[i] = k + "=" + v
				return
			}
		}
		out = append(out, k+"="+v)
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	// Deterministic order (each value expands from the bridge's env only).
	slices.Sort(keys)
	for _, k := range keys {
		set(k, safeSubstitute(extra[k], lookup))
	}
	return out
}

// safeSubstitute is Python's string.Template(s).safe_substitute(vars).
func safeSubstitute(s string, vars map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		if c != '$' || i+1 >= len(s) {
			b.WriteByte(c)
			i++
			continue
		}
		rest := s[i+1:]
		switch {
		case rest[0] == '$':
			b.WriteByte('$')
			i += 2
			continue
		case rest[0] == '{':
			if end := strings.IndexByte(rest, '}'); end > 1 && isIdent(rest[1:end]) {
				if v, ok := vars[rest[1:end]]; ok {
					b.WriteString(v)
					i += 2 + end
					continue
				}
			}
		default:
			n := identLen(rest)
			if n > 0 {
				if v, ok := vars[rest[:n]]; ok {
					b.WriteString(v)
					i += 1 + n
					continue
				}
			}
		}
		b.WriteByte(c)
		i++
	}
	return b.String()
}

func identLen(s string) int {
	n := 0
	for n < len(s) {
		c := s[n]
		if c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || n > 0 && '0' <= c && c <= '9' {
			n++
			continue
		}
		break
	}
	return n
}

func isIdent(s string) bool { return s != "" && identLen(s) == len(s) }

// lookPath finds file on the PATH of env, as the kernel's environment
// names it (what a Jupyter client's subprocess does).
func lookPath(file string, env []string, isExec func(string) bool) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		if p := filepath.Join(dir, file); isExec(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found on the sandbox's PATH (%s)", file, path)
}
