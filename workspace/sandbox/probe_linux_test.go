package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/workspace/sandbox/helper"
	"github.com/cellbox-dev/cellbox/workspace/sandbox/sandboxtest"
)

// The probes re-execute this test binary as their helpers.
func TestMain(m *testing.M) {
	if Main() {
		return
	}
	// The sandboxes start from the lean helper, as the daemon's do.
	UseHelper(helper.Binary)
	os.Exit(m.Run())
}

// expectedHere are the layers this project's development and CI machines
// (Linux 6.x, unprivileged user namespaces allowed) provide. cgroups are
// not delegated there; set CELLBOX_TEST_CGROUPS=delegated on a host where
// they are.
func expectedHere() map[string]bool {
	return map[string]bool{
		LayerUserNamespaces:   true,
		LayerMountNamespace:   true,
		LayerOverlay:          true,
		LayerPidNamespace:     true,
		LayerNetworkNamespace: true,
		LayerSeccomp:          true,
		LayerLandlock:         true,
		LayerCgroups:          os.Getenv("CELLBOX_TEST_CGROUPS") == "delegated",
	}
}

func logReport(t *testing.T, r Report) {
	t.Helper()
	t.Logf("probe took %v, scratch dir %s (%s), landlock ABI %d", r.Took, r.ScratchDir, r.ScratchFS, r.LandlockABI)
	for _, l := range r.Layers {
		if l.Available {
			t.Logf("  %-17s ok       %s", l.Name, l.Detail)
		} else {
			t.Logf("  %-17s MISSING  %s (fix: %s)", l.Name, l.Reason, l.Fix)
		}
	}
}

// checkWellFormed: one layer per name, in order, and a reason for every
// unavailable layer.
func checkWellFormed(t *testing.T, r Report) {
	t.Helper()
	names := LayerNames()
	if len(r.Layers) != len(names) {
		t.Fatalf("report has %d layers, want %d", len(r.Layers), len(names))
	}
	for i, l := range r.Layers {
		if l.Name != names[i] {
			t.Errorf("layer %d is %q, want %q", i, l.Name, names[i])
		}
		if !l.Available && strings.TrimSpace(l.Reason) == "" {
			t.Errorf("layer %s is unavailable without a reason", l.Name)
		}
	}
}

func TestProbeTellsTheTruth(t *testing.T) {
	r := Probe(context.Background(), ProbeOptions{StateDir: t.TempDir()})
	logReport(t, r)
	checkWellFormed(t, r)
	for name, want := range expectedHere() {
		l, _ := r.Layer(name)
		if l.Available != want {
			t.Errorf("%s: available = %v, want %v; reason: %s; fix: %s", name, l.Available, want, l.Reason, l.Fix)
		}
	}
	if r.Available(LayerLandlock) && r.LandlockABI < 1 {
		t.Errorf("landlock available with ABI %d", r.LandlockABI)
	}
	s := r.Summary()
	if s.UserNamespaces != r.Available(LayerUserNamespaces) || s.Cgroups != r.Available(LayerCgroups) {
		t.Errorf("summary %+v disagrees with the layers", s)
	}
	if !s.Cgroups && !strings.Contains(s.Reason, "cgroups: ") {
		t.Errorf("summary reason %q does not explain cgroups", s.Reason)
	}
	if got := r.Missing(DefaultRequired()...); len(got) != 0 {
		t.Errorf("layers the default sandbox needs are missing: %+v", got)
	}
	// The scratch directory is cleaned up.
	if ents, _ := filepath.Glob(filepath.Join(r.ScratchDir, ".cellbox-probe-*")); len(ents) != 0 {
		t.Errorf("probe left %v behind", ents)
	}
}

func TestProbeUsesStateDir(t *testing.T) {
	dir := t.TempDir()
	r := Probe(context.Background(), ProbeOptions{StateDir: dir})
	if r.ScratchDir != dir {
		t.Errorf("scratch dir = %q, want the state dir %q", r.ScratchDir, dir)
	}
	missing := filepath.Join(dir, "does-not-exist")
	r = Probe(context.Background(), ProbeOptions{StateDir: missing})
	if r.ScratchDir != os.TempDir() {
		t.Errorf("scratch dir for a missing state dir = %q, want %q", r.ScratchDir, os.TempDir())
	}
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("probe created the state dir")
	}
}

func TestProbeTimeoutNeverPanics(t *testing.T) {
	r := Probe(context.Background(), ProbeOptions{Timeout: time.Nanosecond})
	logReport(t, r)
	checkWellFormed(t, r)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	checkWellFormed(t, Probe(ctx, ProbeOptions{}))
}

func TestUnknownHelperEntry(t *testing.T) {
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = []string{ReexecEnv + "=no-such-entry"}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !bytes.Contains(out, []byte(`unknown helper entry "no-such-entry"`)) {
		t.Errorf("unknown entry: err %v, output %q; want exit 2 naming the entry", err, out)
	}
}

func TestHelperNotHandledDoesNotRecurse(t *testing.T) {
	// A process that carries ReexecEnv but did not run Main must not
	// re-execute itself again.
	t.Setenv(ReexecEnv, "probe-userns")
	r := Probe(context.Background(), ProbeOptions{})
	l, _ := r.Layer(LayerUserNamespaces)
	if l.Available || !strings.Contains(l.Reason, "Main was not called") {
		t.Errorf("user namespaces = %+v, want unavailable because Main was not called", l)
	}
}

func TestParseMountinfo(t *testing.T) {
	in := `22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:5 master:1 - cgroup2 cgroup2 rw
50 22 0:5 /null /proc/kcore rw,nosuid - devtmpfs udev rw
51 22 0:40 / /proc/sys ro,relatime - proc proc rw
60 27 0:41 /sub /mnt/with\040space rw - tmpfs tmpfs rw
`
	got, err := parseMountinfo(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []mountEntry{
		{root: "/", point: "/proc", options: "rw,relatime", fstype: "proc", source: "proc", superOptions: "rw"},
		{root: "/", point: "/", options: "rw,relatime", fstype: "ext4", source: "/dev/vda", superOptions: "rw,discard"},
		{root: "/", point: "/sys/fs/cgroup/unified", options: "rw,relatime", fstype: "cgroup2", source: "cgroup2", superOptions: "rw"},
		{root: "/null", point: "/proc/kcore", options: "rw,nosuid", fstype: "devtmpfs", source: "udev", superOptions: "rw"},
		{root: "/", point: "/proc/sys", options: "ro,relatime", fstype: "proc", source: "proc", superOptions: "rw"},
		{root: "/sub", point: "/mnt/with space", options: "rw", fstype: "tmpfs", source: "tmpfs", superOptions: "rw"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d entries, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if _, err := parseMountinfo(strings.NewReader("1 2 3\n")); err == nil {
		t.Error("malformed line: no error")
	}
}

func TestParseProcCgroup(t *testing.T) {
	tests := []struct {
		in   string
		want string
		ok   bool
	}{
		{"0::/user.slice/user-1000.slice/session-2.scope\n", "/user.slice/user-1000.slice/session-2.scope", true},
		{"9:name=systemd:/\n4:memory:/x\n0::/\n", "/", true},
		{"4:memory:/x\n1:cpu:/\n", "", false},
	}
	for _, tt := range tests {
		got, ok := parseProcCgroup([]byte(tt.in))
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseProcCgroup(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestParseProbeAll(t *testing.T) {
	got := parseProbeAll("userNamespaces\tok\noverlay\tmount overlay: operation not permitted (EPERM)\ngarbage\n")
	if r := got[LayerUserNamespaces]; !r.ran || !r.ok {
		t.Errorf("userNamespaces = %+v, want ok", r)
	}
	if r := got[LayerOverlay]; !r.ran || r.ok || r.msg != "mount overlay: operation not permitted (EPERM)" {
		t.Errorf("overlay = %+v, want the error", r)
	}
	if len(got) != 2 {
		t.Errorf("got %d results, want 2", len(got))
	}
}

func TestDiagnoseClone(t *testing.T) {
	limits := func(user, net int) map[string]int {
		return map[string]int{"user.max_user_namespaces": user, "user.max_mnt_namespaces": 100, "user.max_pid_namespaces": 100, "user.max_net_namespaces": net}
	}
	user := uintptr(syscall.CLONE_NEWUSER)
	tests := []struct {
		name        string
		flags       uintptr
		errno       syscall.Errno
		h           hostInfo
		reason, fix string
	}{
		{"max_user_namespaces=0", user, syscall.ENOSPC, hostInfo{nsLimit: limits(0, 100)},
			"user namespaces are disabled: user.max_user_namespaces = 0", "sysctl -w user.max_user_namespaces=15000"},
		{"limit reached", user, syscall.ENOSPC, hostInfo{nsLimit: limits(5, 100)},
			"limit is reached (user.max_user_namespaces = 5)", "raise the limit"},
		{"max_net_namespaces=0", user | syscall.CLONE_NEWNET, syscall.ENOSPC, hostInfo{nsLimit: limits(100, 0)},
			"user.max_net_namespaces = 0", "sysctl -w user.max_net_namespaces=15000"},
		{"debian sysctl", user, syscall.EPERM, hostInfo{nsLimit: limits(100, 100), unprivUsernsClone: 0, apparmorRestrict: -1, uid: 1000},
			"kernel.unprivileged_userns_clone = 0", "sysctl -w kernel.unprivileged_userns_clone=1"},
		{"debian sysctl as root", user, syscall.EPERM, hostInfo{nsLimit: limits(100, 100), unprivUsernsClone: 0, apparmorRestrict: -1, capSysAdmin: true},
			"an LSM (SELinux, AppArmor) or seccomp policy denies it", "audit log"},
		{"ubuntu apparmor", user, syscall.EPERM, hostInfo{nsLimit: limits(100, 100), unprivUsernsClone: -1, apparmorRestrict: 1, uid: 1000},
			"kernel.apparmor_restrict_unprivileged_userns = 1", "AppArmor profile granting userns"},
		{"docker seccomp", user, syscall.EPERM, hostInfo{nsLimit: limits(100, 100), unprivUsernsClone: -1, apparmorRestrict: -1, container: "docker (/.dockerenv exists)", seccompMode: 2},
			"inside docker (/.dockerenv exists), whose seccomp profile", "--security-opt seccomp=unconfined"},
		{"unknown container filter", user, syscall.EPERM, hostInfo{nsLimit: limits(100, 100), unprivUsernsClone: -1, apparmorRestrict: -1, seccompMode: 2},
			"under a seccomp filter", "seccomp=unconfined"},
		{"masked /proc/sys", user, syscall.EPERM, hostInfo{nsLimit: limits(-1, -1), unprivUsernsClone: -1, apparmorRestrict: -1, procSysReadOnly: true},
			"/proc/sys is read-only or masked", "run cellbox on the host"},
		{"no CONFIG_NET_NS", user | syscall.CLONE_NEWNET, syscall.EINVAL, hostInfo{nsLimit: limits(100, 100)},
			"CONFIG_NET_NS", "CONFIG_NET_NS=y"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reason, fix := diagnoseClone(tt.flags, tt.errno, tt.h)
			if !strings.Contains(reason, tt.reason) || !strings.Contains(fix, tt.fix) {
				t.Errorf("diagnoseClone = %q, %q; want reason containing %q, fix containing %q", reason, fix, tt.reason, tt.fix)
			}
		})
	}
}

func TestInterpretOverlayOnOverlayfs(t *testing.T) {
	c := nsChecks[slices.IndexFunc(nsChecks, func(c nsCheck) bool { return c.layer == LayerOverlay })]
	l := interpretHelper(c, helperResult{ran: true, ok: true}, hostInfo{}, &scratch{parent: "/state", dir: "/state/x", fs: "overlay"})
	if l.Available || !strings.Contains(l.Reason, "/state is on overlayfs") || !strings.Contains(l.Fix, "--state-dir") {
		t.Errorf("overlay upper on overlayfs = %+v, want unavailable naming the dir and a fix", l)
	}
}

func TestInterpretAppArmorCapabilities(t *testing.T) {
	// Ubuntu 23.10+: the user namespace is created, but has no capabilities.
	h := hostInfo{uid: 1000, apparmorRestrict: 1, unprivUsernsClone: -1}
	layers := map[string]Layer{
		LayerUserNamespaces:   {Name: LayerUserNamespaces, Available: true},
		LayerMountNamespace:   {Name: LayerMountNamespace, Reason: "make / private: operation not permitted (EPERM)"},
		LayerOverlay:          {Name: LayerOverlay, Reason: "make / private: operation not permitted (EPERM)"},
		LayerPidNamespace:     {Name: LayerPidNamespace, Reason: "make / private: operation not permitted (EPERM)"},
		LayerNetworkNamespace: {Name: LayerNetworkNamespace, Reason: "bring lo up: operation not permitted (EPERM)"},
	}
	interpretDependents(layers, h, false)
	for name, l := range layers {
		if l.Available || !strings.Contains(l.Reason, "kernel.apparmor_restrict_unprivileged_userns = 1") || !strings.Contains(l.Fix, "userns") {
			t.Errorf("%s = %+v, want unavailable naming the AppArmor restriction", name, l)
		}
	}
}

func TestHelperEntriesOneByOne(t *testing.T) {
	// The fallback path: each namespace check in its own helper.
	sc, err := makeScratch(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer sc.remove()
	for _, c := range nsChecks {
		if res := runHelper(context.Background(), c.entry, c.flags, sc.dir); !res.ok {
			t.Errorf("%s: %+v", c.entry, res)
		}
	}
}

// TestProbeAsUnprivilegedUser runs the probe as the user CELLBOX_TEST_USER
// names and compares it with the probe as root. Run as root:
//
//	useradd -m cellboxtest   # once
//	CELLBOX_TEST_USER=cellboxtest go test ./workspace/sandbox/ -run AsUnprivileged -v
//
// The test binary is copied to a world-readable temporary directory and
// run as that user (uid, gid and supplementary groups) in TestDumpProbe
// mode, which prints the report as JSON.
func TestProbeAsUnprivilegedUser(t *testing.T) {
	name := os.Getenv("CELLBOX_TEST_USER")
	cmd := sandboxtest.UserCommand(t, "-test.run", "^TestDumpProbe$", "-test.v")
	cmd.Env = append(cmd.Env, "CELLBOX_TEST_DUMP_PROBE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("probe as %s: %v\n%s", name, err, out)
	}
	uid := cmd.SysProcAttr.Credential.Uid
	asUser := decodeDump(t, out)
	t.Logf("as %s (uid %d):", name, uid)
	logReport(t, asUser)
	checkWellFormed(t, asUser)

	asRoot := Probe(context.Background(), ProbeOptions{})
	for _, n := range LayerNames() {
		if n == LayerIDMappedMounts {
			continue // needs CAP_SYS_ADMIN on the host: differs by design
		}
		if a, b := asRoot.Available(n), asUser.Available(n); a != b {
			l, _ := asUser.Layer(n)
			t.Errorf("%s: as root %v, as %s %v (reason: %s)", n, a, name, b, l.Reason)
		}
	}
	for n, want := range expectedHere() {
		if got := asUser.Available(n); got != want {
			l, _ := asUser.Layer(n)
			t.Errorf("as %s: %s available = %v, want %v; reason: %s", name, n, got, want, l.Reason)
		}
	}
}

// TestProbeDiagnosesHostPolicies runs the probe inside a user namespace
// where a host policy blocks a layer, and checks the report names it.
// Namespace limits are per user namespace, so setting one to 0 there is what
// `sysctl -w user.max_..._namespaces=0` does on a host; a read-only bind
// mount of /proc/sys is how container runtimes mask /proc.
func TestProbeDiagnosesHostPolicies(t *testing.T) {
	if !Probe(context.Background(), ProbeOptions{}).Available(LayerUserNamespaces) {
		t.Skip("needs user namespaces")
	}
	tests := []struct {
		name      string
		env       string
		unavail   []string
		reason    string
		fix       string
		available []string
	}{
		{
			name:    "max_user_namespaces=0",
			env:     "CELLBOX_TEST_SYSCTL=user/max_user_namespaces=0",
			unavail: []string{LayerUserNamespaces, LayerMountNamespace, LayerOverlay, LayerPidNamespace, LayerNetworkNamespace},
			reason:  "user namespaces are disabled: user.max_user_namespaces = 0",
			fix:     "sysctl -w user.max_user_namespaces=15000",
		},
		{
			name:      "max_net_namespaces=0",
			env:       "CELLBOX_TEST_SYSCTL=user/max_net_namespaces=0",
			unavail:   []string{LayerNetworkNamespace},
			reason:    "user.max_net_namespaces = 0",
			fix:       "sysctl -w user.max_net_namespaces=15000",
			available: []string{LayerUserNamespaces, LayerMountNamespace, LayerOverlay, LayerPidNamespace},
		},
		{
			name:      "max_mnt_namespaces=0",
			env:       "CELLBOX_TEST_SYSCTL=user/max_mnt_namespaces=0",
			unavail:   []string{LayerMountNamespace, LayerOverlay, LayerPidNamespace},
			reason:    "user.max_mnt_namespaces = 0",
			fix:       "sysctl -w user.max_mnt_namespaces=15000",
			available: []string{LayerUserNamespaces, LayerNetworkNamespace},
		},
		{
			name:      "masked /proc",
			env:       "CELLBOX_TEST_MASK_PROC=1",
			unavail:   []string{LayerPidNamespace},
			reason:    "/proc is masked",
			fix:       "systempaths=unconfined",
			available: []string{LayerUserNamespaces, LayerMountNamespace, LayerOverlay, LayerNetworkNamespace},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := dumpProbeInUserNS(t, tt.env)
			logReport(t, r)
			checkWellFormed(t, r)
			for _, n := range tt.unavail {
				l, _ := r.Layer(n)
				if l.Available || !strings.Contains(l.Reason, tt.reason) || !strings.Contains(l.Fix, tt.fix) {
					t.Errorf("%s = %+v; want unavailable, reason containing %q, fix containing %q", n, l, tt.reason, tt.fix)
				}
			}
			for _, n := range tt.available {
				if l, _ := r.Layer(n); !l.Available {
					t.Errorf("%s unavailable (%s), want available", n, l.Reason)
				}
			}
		})
	}
}

// dumpProbeInUserNS runs TestDumpProbe in new user and mount namespaces
// with the extra environment variable env and returns its report.
func dumpProbeInUserNS(t *testing.T, env string) Report {
	t.Helper()
	cmd := exec.Command("/proc/self/exe", "-test.run", "^TestDumpProbe$", "-test.v")
	cmd.Env = []string{"CELLBOX_TEST_DUMP_PROBE=1", env, "TMPDIR=" + os.TempDir(), "GORACE=atexit_sleep_ms=0"}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("probe in a user namespace: %v\n%s", err, out)
	}
	return decodeDump(t, out)
}

func decodeDump(t *testing.T, out []byte) Report {
	t.Helper()
	_, js, ok := bytes.Cut(out, []byte("PROBE-JSON: "))
	if !ok {
		t.Fatalf("no report in the output:\n%s", out)
	}
	js, _, _ = bytes.Cut(js, []byte("\n"))
	var r Report
	if err := json.Unmarshal(js, &r); err != nil {
		t.Fatalf("decode report: %v\n%s", err, js)
	}
	return r
}

// TestDumpProbe prints the report as JSON for the tests that probe as
// another user or under a host policy; CELLBOX_TEST_SYSCTL=name=value
// first sets a sysctl, CELLBOX_TEST_MASK_PROC=1 first makes /proc/sys a read-only bind mount.
func TestDumpProbe(t *testing.T) {
	if os.Getenv("CELLBOX_TEST_DUMP_PROBE") != "1" {
		t.Skip("helper of TestProbeAsUnprivilegedUser and TestProbeDiagnosesHostPolicies")
	}
	if kv := os.Getenv("CELLBOX_TEST_SYSCTL"); kv != "" {
		name, value, _ := strings.Cut(kv, "=")
		if err := os.WriteFile("/proc/sys/"+name, []byte(value), 0); err != nil {
			t.Fatalf("set sysctl: %v", err)
		}
	}
	if os.Getenv("CELLBOX_TEST_MASK_PROC") == "1" {
		if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
			t.Fatalf("make / private: %v", err)
		}
		// As docker does: /proc/sys read-only.
		if err := syscall.Mount("/proc/sys", "/proc/sys", "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
			t.Fatalf("bind /proc/sys: %v", err)
		}
		if err := syscall.Mount("", "/proc/sys", "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
			t.Fatalf("remount /proc/sys read-only: %v", err)
		}
	}
	// A state dir of its own, so that t's cleanup fails if the probe left
	// anything it cannot remove (as another user).
	r := Probe(context.Background(), ProbeOptions{StateDir: t.TempDir()})
	if left, _ := filepath.Glob(filepath.Join(r.ScratchDir, ".cellbox-probe-*")); len(left) != 0 {
		t.Errorf("probe left %v behind", left)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout.Write(append(append([]byte("PROBE-JSON: "), b...), '\n'))
}

func BenchmarkProbe(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	for b.Loop() {
		Probe(ctx, ProbeOptions{StateDir: dir})
	}
}
