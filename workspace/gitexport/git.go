package gitexport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// runner runs git: with a clean environment (nothing of the daemon's GIT_*
// variables), no terminal prompt, pathspecs taken literally, no optional
// locks (so `git status` never rewrites the user's index), and, for a root
// daemon, as the repository's owner.
//
// Running as the owner matters twice over. Objects, reflogs and refs a
// root git writes would belong to root, and the user's own git could then
// no longer add objects to that fan-out directory or append to that log.
// And a repository's config can name programs git runs (core.fsmonitor, a
// filter's clean command): run as root, that is the user's code with
// root's rights. As the owner, git does what the user's own git would do.
type runner struct {
	git  string              // the git executable
	env  []string            // the base environment
	cred *syscall.Credential // the repository's owner, when the daemon is root and the owner is not
	// safe is the repository's top level, passed as safe.directory, when
	// git runs as the owner of its .git (whose work tree may be another's:
	// a checkout in a shared directory). A .git of another user is not
	// trusted: git refuses it, as the user's own git would ("dubious
	// ownership"), and runs none of its configured programs.
	safe string
	// owned: git runs as the owner of the .git (safe may be set).
	owned bool
}

// newRunner finds git and the identity to run it as: the owner of gitPath
// (the repository's .git) when the daemon is root.
func newRunner(gitPath, safe string) (*runner, error) {
	exe, err := exec.LookPath("git")
	if err != nil {
		return nil, fmt.Errorf("%w: git is not installed (not found on PATH): %v", ErrInvalid, err)
	}
	r := &runner{git: exe}
	home := os.Getenv("HOME")
	var st syscall.Stat_t
	if err := syscall.Stat(gitPath, &st); err != nil {
		return nil, fmt.Errorf("stat %s: %w", gitPath, err)
	}
	r.owned = st.Uid == uint32(os.Geteuid()) || os.Geteuid() == 0
	r.setSafe(safe)
	if os.Geteuid() == 0 {
		if st.Uid != 0 {
			r.cred = &syscall.Credential{Uid: st.Uid, Gid: st.Gid, Groups: []uint32{}}
			home = ""
			if u, err := user.LookupId(strconv.Itoa(int(st.Uid))); err == nil {
				home = u.HomeDir
				if gid, err := strconv.Atoi(u.Gid); err == nil {
					r.cred.Gid = uint32(gid)
				}
				if gids, err := u.GroupIds(); err == nil {
					for _, g := range gids {
						if n, err := strconv.Atoi(g); err == nil {
							r.cred.Groups = append(r.cred.Groups, uint32(n))
						}
					}
				}
			}
		}
	}
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	r.env = []string{"PATH=" + path, "LC_ALL=C", "GIT_TERMINAL_PROMPT=0", "GIT_LITERAL_PATHSPECS=1", "GIT_OPTIONAL_LOCKS=0"}
	if home != "" {
		r.env = append(r.env, "HOME="+home)
	}
	if tz, ok := os.LookupEnv("TZ"); ok {
		r.env = append(r.env, "TZ="+tz)
	}
	return r, nil
}

// maxOutput bounds what one git command may print (a patch, a listing).
const maxOutput = 256 << 20

// cmd is one run of git.
type cmd struct {
	dir   string
	args  []string
	env   []string // added to the runner's
	stdin io.Reader
	out   io.Writer // stdout; nil: returned by run (bounded by maxOutput)
}

// runError is a git command that failed: its exit code and stderr.
type runError struct {
	args   []string
	code   int // -1: it did not exit (not started, killed)
	stderr string
	err    error
}

func (e *runError) Error() string {
	what := "git " + e.args[0]
	if e.stderr != "" {
		return what + ": " + e.stderr
	}
	return what + ": " + e.err.Error()
}

func (e *runError) Unwrap() error { return e.err }

// exitCode is the exit code of a failed git command (-1: none).
func exitCode(err error) int {
	var re *runError
	if errors.As(err, &re) {
		return re.code
	}
	return -1
}

// stderrOf is the trimmed stderr of a failed git command.
func stderrOf(err error) string {
	var re *runError
	if errors.As(err, &re) {
		return re.stderr
	}
	return ""
}

// run runs c and returns its stdout (nil when c.out takes it).
func (r *runner) run(ctx context.Context, c cmd) ([]byte, error) {
	args := []string{"-c", "core.quotePath=true", "-c", "core.fsmonitor=false"}
	if r.safe != "" {
		args = append([]string{"-c", "safe.directory=" + r.safe}, args...)
	}
	x := exec.CommandContext(ctx, r.git, append(args, c.args...)...)
	x.Dir = c.dir
	x.Env = append(append([]string(nil), r.env...), c.env...)
	x.Stdin = c.stdin
	x.WaitDelay = 5 * time.Second
	if r.cred != nil {
		x.SysProcAttr = &syscall.SysProcAttr{Credential: r.cred}
	}
	var out bytes.Buffer
	x.Stdout = &capped{buf: &out, max: maxOutput}
	if c.out != nil {
		x.Stdout = c.out
	}
	stderr := capped{buf: &bytes.Buffer{}, max: 8 << 10, drop: true}
	x.Stderr = &stderr
	err := x.Run()
	if err == nil {
		return out.Bytes(), nil
	}
	re := &runError{args: c.args, code: -1, stderr: strings.TrimSpace(stderr.buf.String()), err: err}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		re.code = ee.ExitCode()
	}
	if ctx.Err() != nil {
		re.err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		re.stderr = ""
	}
	return nil, re
}

// output runs git in dir with args and returns its stdout without the
// final newline.
func (r *runner) output(ctx context.Context, dir string, args ...string) (string, error) {
	b, err := r.run(ctx, cmd{dir: dir, args: args})
	return strings.TrimSuffix(string(b), "\n"), err
}

// capped is a buffer that refuses to grow past max: stdout past it fails
// the command (the pipe closes), stderr past it is dropped.
type capped struct {
	buf  *bytes.Buffer
	max  int
	drop bool // past max: drop the rest (else fail)
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); len(p) > room {
		if c.drop {
			c.buf.Write(p[:max(room, 0)])
			return len(p), nil
		}
		return 0, fmt.Errorf("git printed more than %d bytes", c.max)
	}
	return c.buf.Write(p)
}

// privateDir makes a temporary directory for a private index or object
// directory. It stays the daemon's (0755): when git runs as the
// repository's owner, only its subdirectory git/ (the index's, which git
// writes) is given to that owner, so the owner cannot swap anything the
// daemon itself writes below (the private work tree) for a symlink.
func (r *runner) privateDir() (string, error) {
	dir, err := os.MkdirTemp("", "cellbox-git-")
	if err != nil {
		return "", fmt.Errorf("make a private index directory: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("make a private index directory: %w", err)
	}
	if err := r.ownedDir(filepath.Join(dir, "git")); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// ownedDir makes dir, owned by the identity git runs as.
func (r *runner) ownedDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("make %s: %w", dir, err)
	}
	if r.cred != nil {
		if err := os.Chown(dir, int(r.cred.Uid), int(r.cred.Gid)); err != nil {
			return fmt.Errorf("give %s to the repository's owner: %w", dir, err)
		}
	}
	return nil
}

// setSafe passes top as safe.directory when git runs as the .git's owner.
func (r *runner) setSafe(top string) {
	r.safe = ""
	if r.owned {
		r.safe = top
	}
}

// indexFile is the private index of a privateDir.
func indexFile(tmp string) string { return filepath.Join(tmp, "git", "index") }
