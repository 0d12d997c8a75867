//go:build linux

package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

// benchPostgres measures `%connect postgres` in a sql kernel of a fresh
// workspace: the first (initdb makes the sandbox's template) and the
// next ones (the template copied), each after `%connect sqlite`; then the
// round trip of `SELECT 1` on the kernel's server, side by side with a
// persistent psql fed over a pipe against a server of the same settings
// started here, outside any sandbox (not as root: postgres refuses it).
func benchPostgres(d *daemon, o options, base string) error {
	bin := postgresBin()
	if bin == "" {
		fmt.Println("== postgres: not installed (apt-get install postgresql): skipped")
		return nil
	}
	project := filepath.Join(base, "pg-project")
	if err := os.MkdirAll(project, 0o755); err != nil {
		return err
	}
	var ws protocol.WorkspaceInfo
	if err := d.call(protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{Root: project, Name: "pg-bench"}, &ws); err != nil {
		return err
	}
	var k protocol.KernelStartResult
	if err := d.call(protocol.MethodKernelStart, protocol.KernelStartParams{Language: "sql", WorkspaceID: ws.WorkspaceID}, &k); err != nil {
		return err
	}
	first, err := d.execute(k.KernelID, "%connect postgres")
	if err != nil {
		return err
	}
	var again []time.Duration
	for range max(3, o.n/4) {
		if _, err := d.execute(k.KernelID, "%connect sqlite"); err != nil {
			return err
		}
		a, err := d.execute(k.KernelID, "%connect postgres")
		if err != nil {
			return err
		}
		again = append(again, a)
	}

	var peer *psql
	peerNote := ""
	if os.Geteuid() == 0 {
		peerNote = "psql: not measured as root (postgres refuses to run as root)"
	} else if p, err := startPsql(bin, filepath.Join(base, "psql")); err != nil {
		peerNote = "psql: " + err.Error()
	} else {
		peer = p
		defer peer.close()
	}
	var cb, cli []time.Duration
	for i := range 20 + o.rtt {
		a, err := d.execute(k.KernelID, oneQuery)
		if err != nil {
			return err
		}
		if i >= 20 {
			cb = append(cb, a)
		}
		if peer != nil {
			b, err := peer.query(oneQuery)
			if err != nil {
				return err
			}
			if i >= 20 {
				cli = append(cli, b)
			}
		}
	}
	_ = d.call(protocol.MethodKernelShutdown, protocol.KernelIDParams{KernelID: k.KernelID}, nil)

	fmt.Printf("\n== cellbox sql kernel on PostgreSQL vs psql (%s)\n", o.label)
	fmt.Printf("PostgreSQL in %s; cellbox: a throwaway server in the sandbox, pgconn; psql: the same settings, outside\n", bin)
	fmt.Printf("%-46s %12s\n", "%connect postgres, first (initdb)", ms(first))
	fmt.Printf("%-46s %12s\n", fmt.Sprintf("%%connect postgres, next (copy), p50 (n=%d)", len(again)), ms(pct(again, 50)))
	if peer == nil {
		fmt.Printf("%-46s %12s\n", fmt.Sprintf("round trip SELECT 1, p50 (n=%d)", o.rtt), ms(pct(cb, 50)))
		fmt.Printf("%-46s %12s\n", "round trip SELECT 1, p99", ms(pct(cb, 99)))
		fmt.Println(peerNote)
		return nil
	}
	fmt.Printf("%-46s %12s %12s %8s\n", "figure", "cellbox", "psql", "ratio")
	row := func(name string, a, b time.Duration) {
		fmt.Printf("%-46s %12s %12s %7.1fx\n", name, ms(a), ms(b), float64(a)/float64(b))
	}
	row(fmt.Sprintf("round trip SELECT 1, p50 (n=%d)", o.rtt), pct(cb, 50), pct(cli, 50))
	row("round trip SELECT 1, p99", pct(cb, 99), pct(cli, 99))
	fmt.Println("cellbox: kernel/execute over JSON-RPC, the result a rendered table; psql: -At, a line read back.")
	return nil
}

// postgresBin is the directory of the newest postgres: the PATH's, else
// the last of /usr/lib/postgresql/*/bin.
func postgresBin() string {
	if p, err := exec.LookPath("postgres"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Dir(real)
		}
	}
	m, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	if len(m) == 0 {
		return ""
	}
	return m[len(m)-1]
}

// psql is a server of its own and a persistent psql on a pipe.
type psql struct {
	dir    string
	server *exec.Cmd
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
}

func startPsql(bin, dir string) (*psql, error) {
	psqlBin, err := exec.LookPath("psql")
	if err != nil {
		return nil, errors.New("no psql on the PATH")
	}
	data, sock := filepath.Join(dir, "data"), filepath.Join(dir, "sock")
	if err := os.MkdirAll(sock, 0o700); err != nil {
		return nil, err
	}
	if out, err := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "--auth=trust", "--username=cellbox", "--encoding=UTF8", "--no-locale", "--no-sync").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w: %s", err, out)
	}
	p := &psql{dir: dir}
	p.server = exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-c", "listen_addresses=", "-c", "unix_socket_directories="+sock,
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off", "-c", "shared_buffers=32MB", "-c", "max_connections=20")
	p.server.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.server.Start(); err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(filepath.Join(data, "postmaster.pid"))
		if lines := strings.Split(string(b), "\n"); len(lines) > 7 && strings.TrimSpace(lines[7]) == "ready" {
			break
		}
		if time.Now().After(deadline) {
			p.close()
			return nil, errors.New("the server did not start")
		}
	}
	p.cmd = exec.Command(psqlBin, "-X", "-q", "-A", "-t", "-h", sock, "-U", "cellbox", "-d", "postgres")
	if p.in, err = p.cmd.StdinPipe(); err != nil {
		p.close()
		return nil, err
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		p.close()
		return nil, err
	}
	p.out = bufio.NewReader(out)
	p.cmd.Stderr = os.Stderr
	if err := p.cmd.Start(); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// query sends q, whose answer is one line, and reads it.
func (p *psql) query(q string) (time.Duration, error) {
	t0 := time.Now()
	if _, err := io.WriteString(p.in, q+"\n"); err != nil {
		return 0, err
	}
	if _, err := p.out.ReadString('\n'); err != nil {
		return 0, fmt.Errorf("psql %q: %w", q, err)
	}
	return time.Since(t0), nil
}

func (p *psql) close() {
	if p.in != nil {
		p.in.Close()
		_ = p.cmd.Wait()
	}
	if p.server != nil && p.server.Process != nil {
		_ = p.server.Process.Signal(syscall.SIGQUIT)
		_ = p.server.Wait()
	}
	os.RemoveAll(p.dir)
}
