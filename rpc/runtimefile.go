package rpc

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The runtime file (PROTOCOL.md §1) tells local clients where the user's
// websocket daemon listens and with which token. It holds a secret, so it is
// written 0600 into a 0700 directory, and a reader trusts only files that the
// current user owns and nobody else can read.

// RuntimeInfo is the content of a runtime file, server-PID.json.
type RuntimeInfo struct {
	PID int `json:"pid"`
	// URL is the browser URL, http://127.0.0.1:PORT/?token=TOKEN.
	URL       string    `json:"url"`
	Token     string    `json:"token"`
	StartedAt time.Time `json:"startedAt"`
}

const (
	runtimeFilePrefix = "server-"
	runtimeFileSuffix = ".json"
	// maxRuntimeFileBytes bounds what FindServers reads of one file.
	maxRuntimeFileBytes = 64 << 10
)

// RuntimeDir is the directory of runtime files: $XDG_RUNTIME_DIR/cellbox when
// XDG_RUNTIME_DIR names an existing directory, else <stateDir>/run.
func RuntimeDir(stateDir string) string {
	if xdg := os.Getenv("XDG_RUNTIME_DIR"); xdg != "" {
		if fi, err := os.Stat(xdg); err == nil && fi.IsDir() {
			return filepath.Join(xdg, "cellbox")
		}
	}
	return filepath.Join(stateDir, "run")
}

// RuntimeFileName is the base name of the runtime file of the daemon with pid.
func RuntimeFileName(pid int) string {
	return runtimeFilePrefix + strconv.Itoa(pid) + runtimeFileSuffix
}

// WriteRuntimeFile writes info to dir/server-PID.json with mode 0600,
// atomically (a temporary file in dir renamed over the final name), creating
// dir with mode 0700 first. It returns the file's path; the daemon removes
// it on a clean exit.
func WriteRuntimeFile(dir string, info RuntimeInfo) (path string, err error) {
	if info.PID <= 0 {
		return "", fmt.Errorf("write runtime file: invalid pid %d", info.PID)
	}
	if err := ensurePrivateDir(dir); err != nil {
		return "", fmt.Errorf("write runtime file: %w", err)
	}
	data, err := json.Marshal(info)
	if err != nil {
		return "", fmt.Errorf("write runtime file: %w", err)
	}
	data = append(data, '\n')
	path = filepath.Join(dir, RuntimeFileName(info.PID))

	// CreateTemp opens with O_EXCL and mode 0600. The temporary name does not
	// match server-*.json, so a reader never sees a half-written file.
	f, err := os.CreateTemp(dir, ".server-*.tmp")
	if err != nil {
		return "", fmt.Errorf("write runtime file: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	// Explicit, in case a future CreateTemp or umask widens it.
	if err := f.Chmod(0o600); err != nil {
		return "", fmt.Errorf("write runtime file: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		return "", fmt.Errorf("write runtime file %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("write runtime file %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("write runtime file %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("write runtime file: %w", err)
	}
	return path, nil
}

// ensurePrivateDir creates dir (and its parents) with mode 0700. An existing
// dir that the current user owns is narrowed to 0700; one that another user
// owns is refused, since whoever owns it can replace the files in it.
func ensurePrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("stat %s: no owner information", dir)
	}
	if int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s is owned by uid %d, not by the current user (uid %d)", dir, st.Uid, os.Geteuid())
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return err
		}
	}
	return nil
}

// FindServers returns the runtime files in dir, newest first. It skips files
// that the current user does not own or that the group or others can read (a
// file someone else planted must not be trusted), and skips and removes files
// whose daemon is gone. A dir that does not exist holds no servers.
func FindServers(dir string) ([]RuntimeInfo, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("find servers: %w", err)
	}
	var infos []RuntimeInfo
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, runtimeFilePrefix) || !strings.HasSuffix(name, runtimeFileSuffix) {
			continue
		}
		path := filepath.Join(dir, name)
		info, ok := readRuntimeFile(path)
		if !ok {
			continue
		}
		if err := unix.Kill(info.PID, 0); errors.Is(err, unix.ESRCH) {
			os.Remove(path)
			continue
		}
		infos = append(infos, info)
	}
	slices.SortStableFunc(infos, func(a, b RuntimeInfo) int {
		if c := b.StartedAt.Compare(a.StartedAt); c != 0 {
			return c
		}
		return b.PID - a.PID
	})
	return infos, nil
}

// readRuntimeFile reads one runtime file and reports whether it can be
// trusted: a regular file, not a symlink, owned by the current user, mode
// without group or other bits, holding valid JSON with a positive pid. The
// checks are made on the open descriptor, so the file cannot be swapped
// between check and read.
func readRuntimeFile(path string) (RuntimeInfo, bool) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return RuntimeInfo{}, false
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return RuntimeInfo{}, false
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || int(st.Uid) != os.Geteuid() || st.Mode&0o077 != 0 {
		return RuntimeInfo{}, false
	}
	data, err := io.ReadAll(io.LimitReader(f, maxRuntimeFileBytes))
	if err != nil {
		return RuntimeInfo{}, false
	}
	var info RuntimeInfo
	if err := json.Unmarshal(data, &info); err != nil || info.PID <= 0 {
		return RuntimeInfo{}, false
	}
	return info, true
}
