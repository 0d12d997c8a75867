package pty

import (
	"bufio"
	"fmt"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace"
)

// MaxCols and MaxRows bound a terminal's size; 0 and anything larger are
// refused (-32602 naming the field).
const (
	MaxCols = 1000
	MaxRows = 1000
)

// checkSize checks a terminal size.
func checkSize(cols, rows int) error {
	if cols < 1 || cols > MaxCols {
		return fmt.Errorf("%w: field \"cols\" must be 1..%d, got %d", ErrInvalid, MaxCols, cols)
	}
	if rows < 1 || rows > MaxRows {
		return fmt.Errorf("%w: field \"rows\" must be 1..%d, got %d", ErrInvalid, MaxRows, rows)
	}
	return nil
}

// Term is the TERM a terminal's program gets (the client may override it
// with env).
const Term = "xterm-256color"

// buildEnv is the sandbox's default environment, TERM, then extra (which
// overrides any of them), in a stable order.
func buildEnv(extra map[string]string) ([]string, error) {
	env := append(workspace.DefaultEnv(), "TERM="+Term)
	keys := make([]string, 0, len(extra))
	for k, v := range extra {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return nil, fmt.Errorf("%w: field \"env\" has %q, which is not a valid environment variable", ErrInvalid, k)
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, k+"=") })
		env = append(env, k+"="+extra[k])
	}
	return env, nil
}

// workDir is the program's directory in the sandbox: cwd relative to
// /workspace (absolute paths and ".." that leave it are refused, as for
// files).
func workDir(cwd string) (string, error) {
	if cwd == "" {
		return "/workspace", nil
	}
	if path.IsAbs(cwd) || strings.ContainsRune(cwd, 0) {
		return "", fmt.Errorf("%w: cwd %q must be relative to the workspace", workspace.ErrPathOutside, cwd)
	}
	dir := path.Join("/workspace", cwd)
	if dir != "/workspace" && !strings.HasPrefix(dir, "/workspace/") {
		return "", fmt.Errorf("%w: cwd %q leaves the workspace", workspace.ErrPathOutside, cwd)
	}
	return dir, nil
}

// command is what the terminal runs: the client's command, or the default
// shell.
func (m *Manager) command(cmd []string) ([]string, error) {
	if len(cmd) == 0 {
		return m.defaultShell(), nil
	}
	for i, a := range cmd {
		if strings.ContainsRune(a, 0) || (i == 0 && a == "") {
			return nil, fmt.Errorf("%w: field \"command\" has an empty program or a NUL byte", ErrInvalid)
		}
	}
	return cmd, nil
}

// defaultShell runs, inside the sandbox, the first of the daemon user's
// login shell, /bin/bash and /bin/sh that exists there (the sandbox shows
// only part of the host), with SHELL set to it. The check must happen in
// the sandbox's own mount namespace, hence the small sh script; exec keeps
// the shell the terminal's session leader.
func (m *Manager) defaultShell() []string {
	const script = `for s in "$@"; do if [ -x "$s" ]; then SHELL=$s; export SHELL; exec "$s"; fi; done; echo "cellbox: no shell in the sandbox ($*)" >&2; exit 127`
	var cands []string
	for _, s := range []string{m.opts.Shell, "/bin/bash", "/bin/sh"} {
		if s != "" && !slices.Contains(cands, s) {
			cands = append(cands, s)
		}
	}
	return append([]string{"/bin/sh", "-c", script, "sh"}, cands...)
}

// LoginShell is the shell of the user running the daemon, from the host's
// passwd file ("" when it has none).
func LoginShell() string {
	f, err := os.Open("/etc/passwd")
	if err != nil {
		return ""
	}
	defer f.Close()
	uid := strconv.Itoa(os.Getuid())
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) != 7 || fields[2] != uid {
			continue
		}
		switch sh := fields[6]; path.Base(sh) {
		case "nologin", "false": // a service account: no shell to offer
			return ""
		default:
			if path.IsAbs(sh) {
				return sh
			}
			return ""
		}
	}
	return ""
}

// checkEncoding checks pty/open's encoding and returns it ("" is utf8).
func checkEncoding(enc protocol.Encoding) (protocol.Encoding, error) {
	switch enc {
	case "", protocol.EncodingUTF8:
		return protocol.EncodingUTF8, nil
	case protocol.EncodingBase64:
		return enc, nil
	}
	return "", fmt.Errorf("%w: field \"encoding\" must be \"utf8\" or \"base64\", got %q", ErrInvalid, enc)
}
