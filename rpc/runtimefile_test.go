package rpc

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestRuntimeDir(t *testing.T) {
	state := t.TempDir()
	xdg := t.TempDir()
	file := filepath.Join(xdg, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, xdg, want string
	}{
		{"xdg dir", xdg, filepath.Join(xdg, "cellbox")},
		{"xdg missing", filepath.Join(xdg, "missing"), filepath.Join(state, "run")},
		{"xdg is a file", file, filepath.Join(state, "run")},
		{"xdg unset", "", filepath.Join(state, "run")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("XDG_RUNTIME_DIR", tt.xdg)
			if got := RuntimeDir(state); got != tt.want {
				t.Errorf("RuntimeDir = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestWriteRuntimeFilePerms(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, dir string)
	}{
		{"new dir", func(*testing.T, string) {}},
		{"existing wide dir", func(t *testing.T, dir string) {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state", "run")
			tt.prepare(t, dir)
			want := RuntimeInfo{PID: os.Getpid(), URL: "http://127.0.0.1:1234/?token=abc", Token: "abc", StartedAt: time.Now().UTC()}
			path, err := WriteRuntimeFile(dir, want)
			if err != nil {
				t.Fatal(err)
			}
			if path != filepath.Join(dir, "server-"+strconv.Itoa(os.Getpid())+".json") {
				t.Errorf("path = %q", path)
			}
			assertMode(t, dir, 0o700|os.ModeDir)
			assertMode(t, path, 0o600)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var got RuntimeInfo
			if err := json.Unmarshal(data, &got); err != nil {
				t.Fatalf("runtime file is not JSON: %v\n%s", err, data)
			}
			if got.PID != want.PID || got.URL != want.URL || got.Token != want.Token || !got.StartedAt.Equal(want.StartedAt) {
				t.Errorf("read back %+v, want %+v", got, want)
			}
			var fields map[string]any
			json.Unmarshal(data, &fields)
			for _, k := range []string{"pid", "url", "token", "startedAt"} {
				if _, ok := fields[k]; !ok {
					t.Errorf("runtime file lacks %q: %s", k, data)
				}
			}
		})
	}
}

// TestWriteRuntimeFileAtomic checks that a rewrite replaces the file (a new
// inode, no temporary left behind) and that a concurrent reader always sees
// one complete version.
func TestWriteRuntimeFileAtomic(t *testing.T) {
	dir := t.TempDir()
	info := RuntimeInfo{PID: os.Getpid(), URL: "http://127.0.0.1:1/?token=a", Token: "a", StartedAt: time.Now()}
	path, err := WriteRuntimeFile(dir, info)
	if err != nil {
		t.Fatal(err)
	}
	// Held open so that its inode number cannot be reused.
	orig, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	before, err := orig.Stat()
	if err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("read during rewrite: %v", err)
				return
			}
			var got RuntimeInfo
			if err := json.Unmarshal(data, &got); err != nil {
				t.Errorf("reader saw a partial file: %v: %q", err, data)
				return
			}
		}
	}()
	for i := range 200 {
		info.Token = strconv.Itoa(i) + strings.Repeat("x", i%7*100) // varying sizes
		if _, err := WriteRuntimeFile(dir, info); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()

	after, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if os.SameFile(before, after) {
		t.Error("rewrite reused the inode: not a rename")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("dir holds %v, want only %s", names, filepath.Base(path))
	}
}

func TestWriteRuntimeFileRefusesForeignDir(t *testing.T) {
	needRoot(t)
	dir := filepath.Join(t.TempDir(), "run")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 12345, 12345); err != nil {
		t.Fatal(err)
	}
	_, err := WriteRuntimeFile(dir, RuntimeInfo{PID: os.Getpid()})
	if err == nil {
		t.Fatal("WriteRuntimeFile into another user's dir succeeded")
	}
	t.Log(err)
}

func TestFindServers(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Now().Add(-time.Hour)
	live := RuntimeInfo{PID: os.Getpid(), URL: "http://127.0.0.1:1/", Token: "self", StartedAt: t0}
	newer := RuntimeInfo{PID: os.Getppid(), URL: "http://127.0.0.1:2/", Token: "parent", StartedAt: t0.Add(time.Minute)}
	for _, info := range []RuntimeInfo{live, newer} {
		if _, err := WriteRuntimeFile(dir, info); err != nil {
			t.Fatal(err)
		}
	}
	deadPID := exitedPID(t)
	deadPath, err := WriteRuntimeFile(dir, RuntimeInfo{PID: deadPID, Token: "dead", StartedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}

	// Files that must be skipped but left alone. They name a live pid, so
	// only their mode, owner or type is wrong.
	planted := RuntimeInfo{PID: os.Getpid(), URL: "http://127.0.0.1:3/", Token: "planted", StartedAt: time.Now()}
	plantedJSON, _ := json.Marshal(planted)
	writeMode := func(name string, data []byte, mode os.FileMode) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	skipped := []string{
		writeMode("server-world.json", plantedJSON, 0o644),
		writeMode("server-group.json", plantedJSON, 0o640),
		writeMode("server-garbage.json", []byte("{not json"), 0o600),
		writeMode("server-nopid.json", []byte(`{"url":"http://127.0.0.1:4/"}`), 0o600),
	}
	link := filepath.Join(dir, "server-link.json")
	if err := os.Symlink(filepath.Join(dir, RuntimeFileName(live.PID)), link); err != nil {
		t.Fatal(err)
	}
	skipped = append(skipped, link)
	if os.Geteuid() == 0 {
		p := writeMode("server-foreign.json", plantedJSON, 0o600)
		if err := os.Chown(p, 12345, 12345); err != nil {
			t.Fatal(err)
		}
		skipped = append(skipped, p)
	} else {
		t.Log("not root: the foreign-owner case needs chown and is not checked")
	}
	writeMode(".server-123.tmp", plantedJSON, 0o600)

	got, err := FindServers(dir)
	if err != nil {
		t.Fatal(err)
	}
	var tokens []string
	for _, info := range got {
		tokens = append(tokens, info.Token)
	}
	if want := []string{"parent", "self"}; !slices.Equal(tokens, want) {
		t.Errorf("FindServers tokens = %q, want %q (newest first)", tokens, want)
	}
	if _, err := os.Lstat(deadPath); !os.IsNotExist(err) {
		t.Errorf("runtime file of dead pid %d was not removed (err %v)", deadPID, err)
	}
	for _, p := range skipped {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("skipped file %s was touched: %v", filepath.Base(p), err)
		}
	}
}

func TestFindServersMissingDir(t *testing.T) {
	got, err := FindServers(filepath.Join(t.TempDir(), "missing"))
	if err != nil || got != nil {
		t.Errorf("FindServers(missing) = %v, %v; want nil, nil", got, err)
	}
}

// exitedPID returns the pid of a process that has exited and been reaped.
func exitedPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "exit 0")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

func assertMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode() & (os.ModePerm | os.ModeDir); got != want {
		t.Errorf("mode of %s = %v, want %v", path, got, want)
	}
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown a file to another user")
	}
}
