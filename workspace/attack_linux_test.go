package workspace

// The attack and fault suite of issue 3: each test tries an attack for
// real, from inside a workspace's sandbox, and checks the outcome the
// defence promises, precisely enough that the test fails if that defence
// is removed (each case's defence field says which defence it checks and
// what removing it would show instead; cases marked control also run on
// the host, outside any sandbox, to prove it).
//
// This file holds the isolation attacks; attack_process_linux_test.go,
// attack_limits_linux_test.go and attack_tree_linux_test.go the others,
// attack_helpers_linux_test.go their helpers.
//
// Run as root and as an unprivileged user:
//
//	CGO_ENABLED=0 go test ./workspace/ -run Attack -v
//	CELLBOX_TEST_USER=cellboxtest CGO_ENABLED=0 go test ./workspace/ -run Attack -v   # as root

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace/sandbox"
	"github.com/cellbox-dev/cellbox/workspace/sandbox/sandboxtest"
)

func TestAttackIdentityAndLayers(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "identity")
	r := runIn(t, w, protocol.Limits{}, "/bin/sh", "-c", `id; hostname; grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status`)
	out := string(r.Stdout)
	t.Logf("%s", out)
	if r.Status.Code != 0 {
		t.Fatalf("%s\n%s", outcome(r), stderrTail(r))
	}
	for _, want := range []string{
		"uid=1000(cellbox) gid=1000(cellbox) groups=1000(cellbox)", "\ncellbox\n",
		"CapInh:\t0000000000000000", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000",
		"CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000",
		"NoNewPrivs:\t1", "Seccomp:\t2",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the sandbox user's identity lacks %q", want)
		}
	}
	sb := w.Sandbox()
	if sb == nil {
		t.Fatal("no sandbox after a run")
	}
	l := sb.Layers()
	t.Logf("layers: %+v", l)
	if !l.UserNamespaces || !l.Overlay || !l.PidNamespace || !l.NetworkNamespace || !l.Seccomp || !l.Landlock || l.Network != sandbox.NetworkNone {
		t.Errorf("layers in force = %+v; want user, pid and network namespaces, overlay, seccomp and landlock", l)
	}
}

func TestAttackFilesystem(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "fs")
	home, _ := os.UserHomeDir()
	cwd, _ := os.Getwd()
	probe := func(p string) string {
		return fmt.Sprintf(`
p = %q
try:
    ents = os.listdir(p) if os.path.isdir(p) else None
    if not os.path.lexists(p):
        print("absent")
    elif ents == []:
        print("empty")
    else:
        print("present", ents)
except OSError as e:
    print("errno=" + errno.errorcode[e.errno])
`, p)
	}
	cases := []attackCase{
		{name: "read /etc/shadow", script: `try_(lambda: open("/etc/shadow").read())`, want: []string{"errno=ENOENT"},
			defence: "the sandbox's /etc is generated and holds no shadow; EACCES would mean the host's /etc is bound, guarded only by file modes"},
		{name: "read /etc/shadow through /proc/1/root", script: `try_(lambda: open("/proc/1/root/etc/shadow").read())`, want: []string{"errno=EACCES", "errno=ENOENT"},
			defence: "the init's root is not the host's, and code is not privileged over the init"},
		{name: "list /proc/1/root", script: `try_(os.listdir, "/proc/1/root")`, want: []string{"errno=EACCES"},
			defence: "code runs in a user namespace nested below the init's, so ptrace-mode access to pid 1 is refused"},
		{name: "read /proc/1/cwd", script: `try_(os.listdir, "/proc/1/cwd")`, want: []string{"errno=EACCES"},
			defence: "as /proc/1/root"},
		{name: "state dir absent", script: probe(e.state), want: []string{"absent"}, defence: "pivot_root into a minimal root"},
		{name: "workspace dir absent", script: probe(w.dir), want: []string{"absent"}, defence: "the overlay's layers are unmounted after the overlay is built"},
		{name: "project host path absent", script: probe(e.project), want: []string{"absent"}, defence: "pivot_root into a minimal root"},
		{name: "host home absent or empty", script: probe(home), want: []string{"absent", "empty"}, defence: "pivot_root into a minimal root"},
		{name: "/root empty", script: probe("/root"), want: []string{"absent", "empty"}, defence: "pivot_root into a minimal root"},
		{name: "mountinfo names no host path", script: fmt.Sprintf(`
info = open("/proc/self/mountinfo").read()
print("leaks" if any(p in info for p in (%q, %q, %q)) else "clean")`, e.state, e.project, w.dir), want: []string{"clean"},
			defence: "the overlay's layers are staged inside the sandbox root, never named by host path"},
		{name: "no inherited descriptors", script: `
open_fds = []
for f in os.listdir("/proc/self/fd"):
    try:
        open_fds.append((int(f), os.readlink("/proc/self/fd/" + f)))
    except FileNotFoundError:  # listdir's own, closed since
        pass
print(sorted(x for x in open_fds if x[0] > 2))`,
			want: []string{"[]"}, defence: "the spawner marks every descriptor beyond stdio close-on-exec"},
		{name: "/home holds only the sandbox user", script: `print(sorted(os.listdir("/home")))`, want: []string{"['cellbox']"}, defence: "pivot_root into a minimal root"},
		{name: "create in /usr", script: `try_(lambda: open("/usr/cellbox-attack", "w"))`, want: []string{"errno=EROFS"},
			defence: "/usr is a read-only bind (without it: EACCES from file modes or landlock)"},
		{name: "mkdir in /usr/lib", script: `try_(os.mkdir, "/usr/lib/cellbox-attack")`, want: []string{"errno=EROFS"}, defence: "/usr is a read-only bind"},
		{name: "create in /etc", script: `try_(lambda: open("/etc/cellbox-attack", "w"))`, want: []string{"errno=EROFS"},
			defence: "the sandbox root (owned by the sandbox user) is remounted read-only"},
		{name: "append to /etc/passwd", script: `try_(lambda: open("/etc/passwd", "a").write("evil::0:0::/:/bin/sh\n"))`, want: []string{"errno=EROFS"},
			defence: "the generated /etc/passwd belongs to the sandbox user; only the read-only root stops the write"},
		{name: "create in /", script: `try_(lambda: open("/cellbox-attack", "w"))`, want: []string{"errno=EROFS"}, defence: "the sandbox root is read-only"},
		{name: "open /proc/1/exe", script: `try_(lambda: open("/proc/1/exe", "rb").read(4))`, want: []string{"errno=EACCES"},
			defence: "no ptrace-mode access to the init (without it: the host's cellbox binary)"},
		{name: "write /proc/1/exe", script: `try_(lambda: open("/proc/1/exe", "r+b"))`, want: []string{"errno=EACCES"},
			defence: "no ptrace-mode access to the init (without it: ETXTBSY, or the daemon's binary overwritten)"},
		{name: "readlink /proc/1/exe", script: `try_(os.readlink, "/proc/1/exe")`, want: []string{"errno=EACCES"}, defence: "as /proc/1/exe"},
		{name: "read /proc/1/environ", script: `try_(lambda: open("/proc/1/environ", "rb").read())`, want: []string{"errno=EACCES"}, defence: "as /proc/1/exe"},
	}
	// The test's directory (the package's, under go test), unless it is
	// one the sandbox has too.
	if cwd != "/" && !strings.HasPrefix(cwd+"/", "/usr/") {
		cases = append(cases, attackCase{name: "test cwd absent or empty", script: probe(cwd), want: []string{"absent", "empty"}, defence: "pivot_root into a minimal root"})
	}
	runCases(t, w, cases)
}

// TestAttackWorkspaceWrites: writes to /workspace land in the upper layer;
// the project is unchanged.
func TestAttackWorkspaceWrites(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "writes")
	r := runIn(t, w, protocol.Limits{}, "/bin/sh", "-c",
		`set -e; echo changed >> hello.txt; echo new > new.txt; rm gone.txt; mkdir -p deep/er; echo x > deep/er/f; echo more >> sub/data.txt`)
	if r.Status.Code != 0 {
		t.Fatalf("%s\n%s", outcome(r), stderrTail(r))
	}
	for name, content := range projectFiles {
		b, err := os.ReadFile(filepath.Join(e.project, name))
		if err != nil || string(b) != content {
			t.Errorf("project file %s changed: %q, %v", name, b, err)
		}
	}
	for _, name := range []string{"new.txt", "deep"} {
		if _, err := os.Lstat(filepath.Join(e.project, name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s appeared in the project: %v", name, err)
		}
	}
	upper := w.UpperDir()
	for name, want := range map[string]string{"hello.txt": "hello\nchanged\n", "new.txt": "new\n", "deep/er/f": "x\n", "sub/data.txt": "data\nmore\n"} {
		b, err := os.ReadFile(filepath.Join(upper, name))
		if err != nil || string(b) != want {
			t.Errorf("upper layer %s = %q, %v; want %q", name, b, err, want)
		}
	}
	// The deletion is a whiteout in the upper layer.
	fi, err := os.Lstat(filepath.Join(upper, "gone.txt"))
	if err != nil || fi.Mode()&fs.ModeCharDevice == 0 {
		t.Errorf("upper layer gone.txt = %v, %v; want a whiteout (character device 0/0)", fi, err)
	}
	// And the daemon's view agrees.
	if b, err := w.ReadFile("hello.txt"); err != nil || string(b) != "hello\nchanged\n" {
		t.Errorf("ReadFile hello.txt = %q, %v", b, err)
	}
	if _, err := w.ReadFile("gone.txt"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile of the deleted gone.txt: %v, want not exist", err)
	}
}

// TestAttackSymlinkDaemonRead: symlinks made in the sandbox cannot make
// the daemon's file access read a host file.
func TestAttackSymlinkDaemonRead(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "symlinks")
	r := runIn(t, w, protocol.Limits{}, "/bin/sh", "-c", strings.Join([]string{
		"set -e",
		"ln -s /etc/shadow shadow",
		"ln -s /etc/passwd passwd",
		"ln -s ../../../../etc/passwd up-passwd",
		"ln -s ../../../../etc/shadow up-shadow",
		"ln -s / rootlink",
		"ln -s /proc/self/root/etc/shadow magic",
		"ln -s " + e.project + "/hello.txt hostpath",
		"mkdir -p etc && echo sandbox-made > etc/passwd",
		"mkfifo fifo",
	}, "; "))
	if r.Status.Code != 0 {
		t.Fatalf("%s\n%s", outcome(r), stderrTail(r))
	}
	hostShadow, _ := os.ReadFile("/etc/shadow")
	hostPasswd, _ := os.ReadFile("/etc/passwd")
	isHost := func(b []byte) bool {
		return len(b) > 0 && (bytes.Equal(b, hostShadow) || bytes.Equal(b, hostPasswd))
	}
	tests := []struct {
		path string
		// want: the error it must fail with (nil: must read wantBody).
		want     error
		wantBody string
	}{
		{"shadow", fs.ErrNotExist, ""},              // resolved in /workspace: no etc/shadow there
		{"up-shadow", fs.ErrNotExist, ""},           // ".." stops at /workspace
		{"magic", fs.ErrNotExist, ""},               // /proc/self/root is /workspace/proc/..., absent
		{"rootlink/etc/shadow", fs.ErrNotExist, ""}, // a link to / is /workspace
		{"hostpath", fs.ErrNotExist, ""},            // the host path of the project, inside /workspace
		{"passwd", nil, "sandbox-made\n"},           // /etc/passwd is /workspace/etc/passwd
		{"up-passwd", nil, "sandbox-made\n"},
		{"fifo", ErrInvalid, ""}, // not read (would block the daemon)
		{"/etc/passwd", ErrPathOutside, ""},
		{"/etc/shadow", ErrPathOutside, ""},
		{"../../../../etc/passwd", ErrPathOutside, ""},
		{"sub/../../etc/passwd", ErrPathOutside, ""},
		{"..", ErrPathOutside, ""},
		{"hello.txt", nil, "hello\n"}, // control: an ordinary read works
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			done := make(chan struct{})
			var b []byte
			var err error
			go func() { b, err = w.ReadFile(tt.path); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("ReadFile(%q) blocked", tt.path)
			}
			t.Logf("ReadFile(%q) = %q, %v", tt.path, b, err)
			if isHost(b) {
				t.Fatalf("ReadFile(%q) read the host's file", tt.path)
			}
			if tt.want != nil {
				if !errors.Is(err, tt.want) {
					t.Fatalf("ReadFile(%q) = %q, %v; want an error wrapping %v", tt.path, b, err, tt.want)
				}
				return
			}
			if err != nil || string(b) != tt.wantBody {
				t.Fatalf("ReadFile(%q) = %q, %v; want %q", tt.path, b, err, tt.wantBody)
			}
		})
	}
}

func TestAttackProcVisibility(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "proc")
	r := py(t, w, protocol.Limits{}, `
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
for p in pids:
    try:
        cmd = open("/proc/%d/cmdline" % p, "rb").read().split(b"\0")[0].decode()
    except OSError as e:
        cmd = "errno=" + errno.errorcode[e.errno]
    print(p, cmd)`)
	out := strings.TrimSpace(string(r.Stdout))
	t.Logf("%s\n%s", outcome(r), out)
	if r.Status.Code != 0 {
		t.Fatal(stderrTail(r))
	}
	lines := strings.Split(out, "\n")
	if len(lines) > 4 {
		t.Errorf("the sandbox sees %d processes, want its init, its spawner and this one", len(lines))
	}
	if !strings.HasPrefix(lines[0], "1 cellbox-sandbox:") {
		t.Errorf("pid 1 is %q, want the sandbox's own init or spawner", lines[0])
	}
	for _, l := range lines {
		_, cmd, _ := strings.Cut(l, " ")
		if !strings.HasPrefix(cmd, "cellbox-sandbox:") && filepath.Base(cmd) != "python3" {
			t.Errorf("the sandbox sees a foreign process: %q", l)
		}
	}
}

// TestAttackTmpIsFresh: /tmp, /dev/shm and the home of a new sandbox are
// empty; /workspace keeps its files.
func TestAttackTmpIsFresh(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "tmp")
	r := runIn(t, w, protocol.Limits{}, "/bin/sh", "-c",
		"set -e; echo x > /tmp/leak; mkdir /tmp/d; echo y > /dev/shm/leak; echo z > ~/.leak; echo kept > /workspace/kept; ls -A /tmp /dev/shm ~")
	if r.Status.Code != 0 {
		t.Fatalf("%s %s", outcome(r), stderrTail(r))
	}
	if err := e.m.CloseWorkspace(context.Background(), w.ID(), false); err != nil {
		t.Fatal(err)
	}
	w2 := e.open(t, "tmp")
	if w2.ID() != w.ID() {
		t.Fatalf("reopened as %s, want %s", w2.ID(), w.ID())
	}
	r = runIn(t, w2, protocol.Limits{}, "/bin/sh", "-c", `for d in /tmp /dev/shm ~; do echo "$d:" $(ls -A $d); done; cat /workspace/kept`)
	got := string(r.Stdout)
	t.Logf("after reopening: %q", got)
	if got != "/tmp:\n/dev/shm:\n/home/cellbox:\nkept\n" {
		t.Errorf("the new sandbox shows %q; want empty /tmp, /dev/shm and home, and /workspace/kept", got)
	}
}

// TestAttackTwoWorkspaces: two workspaces over the same project see
// neither each other's files nor processes.
func TestAttackTwoWorkspaces(t *testing.T) {
	e := newAttackEnv(t)
	a := e.open(t, "a")
	b := e.open(t, "b")
	mark := marker(t)
	r := runIn(t, a, protocol.Limits{}, "/bin/sh", "-c", "echo secret > /workspace/secretA; echo tmp > /tmp/secretA; setsid sleep "+mark+" </dev/null >/dev/null 2>&1 & sleep 0.1")
	if r.Status.Code != 0 {
		t.Fatalf("%s %s", outcome(r), stderrTail(r))
	}
	look := `
found = []
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            if open("/proc/%s/cmdline" % p, "rb").read().split(b"\0")[1:2] == [b"` + mark + `"]:
                found.append(p)
        except (OSError, IndexError):
            pass
print("marker", "seen" if found else "unseen")
print("file", "seen" if os.path.exists("/workspace/secretA") else "unseen")
print("tmp", "seen" if os.path.exists("/tmp/secretA") else "unseen")`
	ra := py(t, a, protocol.Limits{}, look)
	rb := py(t, b, protocol.Limits{}, look)
	t.Logf("A sees: %s; B sees: %s", outcome(ra), outcome(rb))
	if got := string(ra.Stdout); got != "marker seen\nfile seen\ntmp seen\n" {
		t.Fatalf("control: workspace A sees %q of its own", got)
	}
	if got := string(rb.Stdout); got != "marker unseen\nfile unseen\ntmp unseen\n" {
		t.Errorf("workspace B sees A's: %q", got)
	}
	if _, err := b.ReadFile("secretA"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("B's ReadFile(secretA): %v, want not exist", err)
	}
}

// TestAttackSuiteAsUnprivilegedUser re-runs the attack suite as the user
// CELLBOX_TEST_USER names (CI creates one). Run as root:
//
//	CELLBOX_TEST_USER=cellboxtest CGO_ENABLED=0 go test ./workspace/ -run Attack -v
func TestAttackSuiteAsUnprivilegedUser(t *testing.T) {
	if sandboxtest.AsTestUser() {
		t.Skip("this is the re-run as the unprivileged user")
	}
	sandboxtest.RunAsTestUser(t, "^TestAttack")
}

// TestAttackSystemRoots: a workspace over "/" or a system directory lets
// code read it (/etc/shadow for a root daemon) and a commit write into it
// (as root). Such roots are refused, also through a symlink and as the
// default root, unless the daemon was started to allow them.
func TestAttackSystemRoots(t *testing.T) {
	link := filepath.Join(t.TempDir(), "etc-link")
	if err := os.Symlink("/etc", link); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	m, err := NewManager(Options{StateDir: state, DefaultRoot: "/", NoPool: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	for _, root := range []string{"", "/", "/etc", "/usr/share", "/var/lib", "/home", "/tmp", link, "/etc/../etc/"} {
		w, err := m.Open(context.Background(), protocol.WorkspaceOpenParams{Root: root})
		if err == nil {
			_ = m.CloseWorkspace(context.Background(), w.ID(), true)
			t.Errorf("root %q was opened as %s", root, w.Info().Root)
			continue
		}
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "--allow-system-root") {
			t.Errorf("root %q: %v, want ErrInvalid naming --allow-system-root", root, err)
		}
	}
	// A project below /tmp or /home is a project.
	if _, err := m.Open(context.Background(), protocol.WorkspaceOpenParams{Root: t.TempDir()}); err != nil {
		t.Errorf("a project in a temporary directory: %v", err)
	}
	allowed, err := NewManager(Options{StateDir: t.TempDir(), AllowSystemRoots: true, NoPool: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(allowed.Close)
	w, err := allowed.Open(context.Background(), protocol.WorkspaceOpenParams{Root: "/etc"})
	if err != nil {
		t.Fatalf("/etc with AllowSystemRoots: %v", err)
	}
	_ = allowed.CloseWorkspace(context.Background(), w.ID(), true)
}

// TestAttackStateDirInProject: a daemon started in the home directory with
// the default state dir (~/.local/state/cellbox) opens the home as a
// project: its sandboxes must not read other workspaces' uncommitted files
// or checkpoints in the state dir, nor the token in the runtime dir, also
// when the state dir is named through a symlink.
func TestAttackStateDirInProject(t *testing.T) {
	for _, viaLink := range []bool{false, true} {
		t.Run(fmt.Sprintf("symlink=%v", viaLink), func(t *testing.T) {
			project := t.TempDir()
			if err := os.Chmod(project, 0o755); err != nil {
				t.Fatal(err)
			}
			state := filepath.Join(project, ".local", "state", "cellbox")
			if err := os.MkdirAll(state, 0o700); err != nil {
				t.Fatal(err)
			}
			stateArg := state
			if viaLink {
				stateArg = filepath.Join(t.TempDir(), "state-link")
				if err := os.Symlink(state, stateArg); err != nil {
					t.Fatal(err)
				}
			}
			run := filepath.Join(project, "run", "cellbox")
			if err := os.MkdirAll(run, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(run, "server-1.json"), []byte(`{"token":"TOKEN-SECRET"}`), 0o600); err != nil {
				t.Fatal(err)
			}
			m, err := NewManager(Options{StateDir: stateArg, Hidden: []string{run}, NoPool: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				for _, info := range m.List() {
					_ = m.CloseWorkspace(context.Background(), info.WorkspaceID, true)
				}
				m.Close()
			})
			other, err := m.Open(context.Background(), protocol.WorkspaceOpenParams{Root: project, Name: "other"})
			if err != nil {
				t.Fatal(err)
			}
			if r := runIn(t, other, protocol.Limits{}, "sh", "-c", "echo UNCOMMITTED-SECRET > secret.txt"); r.Status.Code != 0 {
				t.Fatalf("write in the other workspace: %+v", r)
			}
			w, err := m.Open(context.Background(), protocol.WorkspaceOpenParams{Root: project, Name: "attacker"})
			if err != nil {
				t.Fatal(err)
			}
			r := runIn(t, w, protocol.Limits{}, "sh", "-c", `
ls -laR /workspace/.local /workspace/run 2>&1
cat /workspace/.local/state/cellbox/workspaces/*/upper/secret.txt 2>&1
cat /workspace/run/cellbox/server-1.json 2>&1
grep -r SECRET /workspace 2>/dev/null
touch /workspace/.local/state/cellbox/planted 2>&1 || echo write refused`)
			out := string(r.Stdout) + string(r.Stderr)
			t.Logf("in the sandbox (%+v):\n%s", r.Status, out)
			if strings.Contains(out, "UNCOMMITTED-SECRET") || strings.Contains(out, "TOKEN-SECRET") {
				t.Fatal("the sandbox read another workspace's file or the token through the state or runtime dir")
			}
			if strings.Contains(out, "cellbox/workspaces:") || strings.Contains(out, " server-1.json\n") || !strings.Contains(out, "write refused") {
				t.Fatal("the state dir is visible or writable in the sandbox")
			}
			// The project's own files are still there.
			if r := runIn(t, w, protocol.Limits{}, "sh", "-c", "ls /workspace"); !strings.Contains(string(r.Stdout), "run") {
				t.Fatalf("the project's listing: %q", r.Stdout)
			}
		})
	}
}
