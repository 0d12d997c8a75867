package sqldriver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// `%connect postgres` starts a throwaway PostgreSQL server inside the
// sandbox, as the sandbox's user (uid 1000 of its user namespace, never
// root, so postgres agrees to run whoever runs the daemon). It listens on
// a unix socket only (listen_addresses is empty), in a private directory
// of the sandbox's /tmp:
//
//	/tmp/.cellbox-postgres/               0700, the sandbox's, for its life
//	  template-VERSION/                   initdb's data directory, made once
//	  server-PID-N/{data,sock,server.log} one per %connect, removed at its end
//
// The template is made by initdb once per sandbox (the lock file
// /tmp/.cellbox-postgres/lock serializes kernels of the workspace) and copied for each server, which is
// much faster than initdb. A server's directory is locked (flock) by its
// driver for the server's life, so a later %connect removes the
// directories of drivers that were killed.

// pgBase is where the servers and the template live.
const pgBase = "/tmp/.cellbox-postgres"

// pgUser is the server's superuser, made by initdb.
const pgUser = "cellbox"

// pgStartTimeout bounds initdb and a server's start.
const pgStartTimeout = 2 * time.Minute

// errNoPostgres is `%connect postgres` where PostgreSQL is not installed.
var errNoPostgres = errors.New("PostgreSQL is not installed: postgres and initdb were found neither on the PATH nor in /usr/lib/postgresql/*/bin (install the postgresql package)")

// pgInstall is an installation of PostgreSQL: the directory of its
// postgres and initdb, and its version.
type pgInstall struct {
	bin     string
	version string // "15.18"
	nums    []int
}

var pgVersionRE = regexp.MustCompile(`\(PostgreSQL\) ([0-9]+(?:\.[0-9]+)*)`)

// findPostgres finds the newest PostgreSQL: postgres (with initdb beside
// it, symbolic links resolved) on the PATH, or in
// /usr/lib/postgresql/*/bin, where Debian's packages put them.
func findPostgres(ctx context.Context) (*pgInstall, error) {
	return findPostgresIn(ctx, os.Getenv("PATH"), "/usr/lib/postgresql/*/bin")
}

// findPostgresIn finds the newest PostgreSQL on path (a PATH list) and in
// the directories glob matches.
func findPostgresIn(ctx context.Context, path, glob string) (*pgInstall, error) {
	var dirs []string
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		if real, err := filepath.EvalSymlinks(filepath.Join(dir, "postgres")); err == nil {
			dirs = append(dirs, filepath.Dir(real))
			break
		}
	}
	if m, _ := filepath.Glob(glob); m != nil {
		dirs = append(dirs, m...)
	}
	var best *pgInstall
	seen := map[string]bool{}
	for _, dir := range dirs {
		if seen[dir] {
			continue
		}
		seen[dir] = true
		if !executable(filepath.Join(dir, "postgres")) || !executable(filepath.Join(dir, "initdb")) {
			continue
		}
		vctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		out, err := exec.CommandContext(vctx, filepath.Join(dir, "postgres"), "--version").Output()
		cancel()
		if err != nil {
			continue
		}
		m := pgVersionRE.FindSubmatch(out)
		if m == nil {
			continue
		}
		in := &pgInstall{bin: dir, version: string(m[1])}
		for _, f := range strings.Split(in.version, ".") {
			n, _ := strconv.Atoi(f)
			in.nums = append(in.nums, n)
		}
		if best == nil || newer(in.nums, best.nums) {
			best = in
		}
	}
	if best == nil {
		return nil, errNoPostgres
	}
	return best, nil
}

func newer(a, b []int) bool {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return a[i] > b[i]
		}
	}
	return len(a) > len(b)
}

func executable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// pgServer is a running server of this driver.
type pgServer struct {
	dir    string // its directory under pgBase
	sock   string // the socket's directory
	cmd    *exec.Cmd
	exited chan struct{}
	lock   *os.File // flock held for the server's life
	// Timings, for the benchmark and `%connect`: how long the template
	// took (0 when it was there), the copy, and the start.
	initdb, copy, start time.Duration
}

// startPostgres makes the template if need be, copies it and starts a
// server on it; the server is ready to accept connections when it
// returns.
func startPostgres(ctx context.Context, in *pgInstall) (*pgServer, error) {
	ctx, cancel := context.WithTimeout(ctx, pgStartTimeout)
	defer cancel()
	if err := os.MkdirAll(pgBase, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", pgBase, err)
	}
	s := &pgServer{exited: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			s.stop()
		}
	}()
	// Under the sandbox's lock: sweeping dead drivers' servers, the
	// template, and a new server's directory with its own lock taken, so
	// that a sweep never finds a directory being made.
	unlock, err := lockBase(ctx)
	if err != nil {
		return nil, err
	}
	sweepServers()
	t0 := time.Now()
	tpl, made, err := pgTemplate(ctx, in)
	if err == nil {
		if made {
			s.initdb = time.Since(t0)
		}
		err = s.makeDir()
	}
	unlock()
	if err != nil {
		return nil, err
	}
	t1 := time.Now()
	data := filepath.Join(s.dir, "data")
	if err := copyTree(tpl, data); err != nil {
		return nil, fmt.Errorf("copy the template data directory: %w", err)
	}
	s.copy = time.Since(t1)
	s.sock = filepath.Join(s.dir, "sock")
	if err := os.Mkdir(s.sock, 0o700); err != nil {
		return nil, fmt.Errorf("create the socket directory: %w", err)
	}
	logf, err := os.OpenFile(filepath.Join(s.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create the server's log: %w", err)
	}
	defer logf.Close()
	t2 := time.Now()
	// A throwaway server: nothing is synced to disk, no TCP, small
	// memory. Dynamic shared memory is files of the data directory, gone
	// with it.
	s.cmd = exec.Command(filepath.Join(in.bin, "postgres"), "-D", data,
		"-c", "listen_addresses=",
		"-c", "unix_socket_directories="+s.sock,
		"-c", "unix_socket_permissions=0700",
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "shared_buffers=32MB",
		"-c", "max_connections=20",
		"-c", "dynamic_shared_memory_type=mmap",
		"-c", "max_wal_size=64MB",
		"-c", "logging_collector=off",
	)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.Env = append(os.Environ(), "LC_ALL=C")
	// Its own session, so that the kernel's interrupt (a SIGINT to the
	// driver's process group), which would be a fast shutdown, does not
	// reach it; killed if the driver dies.
	s.cmd.SysProcAttr = serverProcAttr()
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.exited)
	}()
	sockFile := filepath.Join(s.sock, ".s.PGSQL.5432")
	for {
		// The socket appears before the server accepts connections; the
		// caller's connect retries until it does.
		if _, err := os.Stat(sockFile); err == nil && s.ready(ctx) {
			break
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("postgres exited as it started: %s", s.logTail())
		case <-ctx.Done():
			return nil, fmt.Errorf("postgres did not start: %w: %s", ctx.Err(), s.logTail())
		case <-time.After(10 * time.Millisecond):
		}
	}
	s.start = time.Since(t2)
	ok = true
	return s, nil
}

// lockBase takes the lock of pgBase, waiting for another kernel of the
// sandbox (its initdb) as long as ctx lets it.
func lockBase(ctx context.Context) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(pgBase, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", pgBase, err)
	}
	for unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("wait for another kernel's PostgreSQL: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return func() { f.Close() }, nil
}

// makeDir makes the server's directory and takes its lock.
func (s *pgServer) makeDir() error {
	for n := 0; ; n++ {
		dir := filepath.Join(pgBase, fmt.Sprintf("server-%d-%d", os.Getpid(), n))
		if err := os.Mkdir(dir, 0o700); err == nil {
			s.dir = dir
			break
		} else if !errors.Is(err, fs.ErrExist) || n > 1000 {
			return fmt.Errorf("create a server directory: %w", err)
		}
	}
	lock, err := os.OpenFile(filepath.Join(s.dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("lock the server directory: %w", err)
	}
	s.lock = lock
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return fmt.Errorf("lock the server directory: %w", err)
	}
	return nil
}

// ready says whether postmaster.pid says the server accepts connections
// (its status line, the 8th, is "ready").
func (s *pgServer) ready(context.Context) bool {
	b, err := os.ReadFile(filepath.Join(s.dir, "data", "postmaster.pid"))
	if err != nil {
		return false
	}
	lines := strings.Split(string(b), "\n")
	return len(lines) > 7 && strings.TrimSpace(lines[7]) == "ready"
}

// logTail is the end of the server's log, for an error.
func (s *pgServer) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return "(its log is empty)"
	}
	return string(bytes.TrimSpace(b))
}

// alive: the server runs.
func (s *pgServer) alive() bool {
	select {
	case <-s.exited:
		return false
	default:
		return s.cmd != nil
	}
}

// stop ends the server (an immediate shutdown: its data is thrown away)
// and removes its directory.
func (s *pgServer) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-s.exited:
		case <-time.After(5 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
	if s.lock != nil {
		s.lock.Close()
	}
}

// sweepServers removes the directories of servers whose driver is gone
// (killed: its flock is released). It runs under lockBase.
func sweepServers() {
	entries, _ := os.ReadDir(pgBase)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "server-") {
			continue
		}
		dir := filepath.Join(pgBase, e.Name())
		f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR, 0)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				_ = os.RemoveAll(dir) // its driver died making it
			}
			continue
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
			_ = os.RemoveAll(dir)
		}
		f.Close()
	}
}

// pgTemplate is the template data directory for in, made by initdb if it
// is not there yet (made says so). It runs under lockBase.
func pgTemplate(ctx context.Context, in *pgInstall) (dir string, made bool, err error) {
	dir = filepath.Join(pgBase, "template-"+in.version)
	if _, err := os.Stat(filepath.Join(dir, "PG_VERSION")); err == nil {
		return dir, false, nil
	}
	tmp := dir + ".new"
	_ = os.RemoveAll(tmp)
	args := []string{"-D", tmp, "--auth=trust", "--username=" + pgUser, "--encoding=UTF8", "--no-locale", "--no-sync"}
	if len(in.nums) > 0 && in.nums[0] >= 11 {
		args = append(args, "--wal-segsize=1") // 1 MB of WAL, not 16, in each copy
	}
	cmd := exec.CommandContext(ctx, filepath.Join(in.bin, "initdb"), args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		_ = os.RemoveAll(tmp)
		msg := strings.TrimSpace(out.String())
		if len(msg) > 2000 {
			msg = msg[len(msg)-2000:]
		}
		return "", false, fmt.Errorf("initdb: %w: %s", err, msg)
	}
	if err := os.Rename(tmp, dir); err != nil {
		_ = os.RemoveAll(tmp)
		return "", false, fmt.Errorf("initdb: %w", err)
	}
	return dir, true, nil
}

// copyTree copies the directory src to dst (which must not exist):
// directories, regular files and symbolic links, with their permissions.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.Mkdir(to, info.Mode().Perm())
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case d.Type().IsRegular():
			return copyFile(path, to, info.Mode().Perm())
		}
		return nil // a socket or fifo: not part of a data directory
	})
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
