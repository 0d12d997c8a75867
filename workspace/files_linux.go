package workspace

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// maxReadFileBytes bounds ReadFile.
const maxReadFileBytes = 64 << 20

// ReadFile reads a file of the workspace, path relative to /workspace,
// through the live mount of its sandbox (ARCHITECTURE.md constraint 1).
// Symlinks that code in the sandbox made are resolved inside /workspace
// (openat2 RESOLVE_IN_ROOT, no magic links), so a link to /etc/shadow or
// ../../etc/passwd cannot make the daemon read a host file. Only regular
// files are read (a FIFO would block the daemon).
func (w *Workspace) ReadFile(name string) ([]byte, error) {
	rel, err := relPath(name)
	if err != nil {
		return nil, err
	}
	root, err := w.openView()
	if err != nil {
		return nil, err
	}
	defer unix.Close(root)
	fd, err := openat2(root, rel, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOCTTY | unix.O_NONBLOCK,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return nil, fmt.Errorf("open %s in workspace %s: %w", rel, w.id, &os.PathError{Op: "openat2", Path: rel, Err: err})
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat %s in workspace %s: %w", rel, w.id, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read %s in workspace %s: %w: not a regular file (%v)", rel, w.id, ErrInvalid, fi.Mode().Type())
	}
	if fi.Size() > maxReadFileBytes {
		return nil, fmt.Errorf("read %s in workspace %s: %w: %d bytes, over %d", rel, w.id, ErrLimit, fi.Size(), maxReadFileBytes)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxReadFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s in workspace %s: %w", rel, w.id, err)
	}
	if len(b) > maxReadFileBytes {
		return nil, fmt.Errorf("read %s in workspace %s: %w: over %d bytes", rel, w.id, ErrLimit, maxReadFileBytes)
	}
	return b, nil
}

// relPath is the name a client's workspace-relative path means (fromWire:
// a quoted name unquoted), checked by checkRel.
func relPath(p string) (string, error) { return checkRel(fromWire(p)) }

// checkRel checks a workspace-relative name: not absolute, no ".." that
// climbs above /workspace. "" and "." are /workspace itself.
func checkRel(name string) (string, error) {
	if strings.HasPrefix(name, "/") {
		return "", fmt.Errorf("%w: %q is absolute; paths are relative to /workspace", ErrPathOutside, name)
	}
	if strings.ContainsRune(name, 0) {
		return "", fmt.Errorf("%w: %q holds a NUL byte", ErrInvalid, name)
	}
	clean := path.Clean(name)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("%w: %q climbs out of /workspace", ErrPathOutside, name)
	}
	return clean, nil
}

// openView opens the workspace's /workspace as its sandbox sees it
// (/proc/INITPID/root/workspace), starting the sandbox if it is not running.
func (w *Workspace) openView() (int, error) {
	w.mu.Lock()
	network := w.network
	w.mu.Unlock()
	sb, err := w.ensureSandbox(context.Background(), network)
	if err != nil {
		return -1, err
	}
	proc := "/proc/" + strconv.Itoa(sb.InitPID()) + "/root"
	root, err := unix.Open(proc, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open the root of workspace %s's sandbox: %w", w.id, err)
	}
	defer unix.Close(root)
	// The init is not reaped while the sandbox runs, so its pid was not
	// reused if the sandbox still runs now.
	if sb.Err() != nil {
		return -1, fmt.Errorf("workspace %s: %w", w.id, ErrClosed)
	}
	// The sandbox's / is read-only: /workspace is its mount point, not a
	// link code could plant.
	fd, err := openat2(root, "workspace", &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return -1, fmt.Errorf("open /workspace of workspace %s's sandbox: %w", w.id, err)
	}
	return fd, nil
}

// openat2 is unix.Openat2, tried again on EAGAIN: with RESOLVE_IN_ROOT or
// RESOLVE_BENEATH, the kernel answers EAGAIN when a rename or a mount
// anywhere on the host raced with resolving "..", which a busy machine does
// all the time.
func openat2(dirfd int, path string, how *unix.OpenHow) (int, error) {
	for i := 0; ; i++ {
		fd, err := unix.Openat2(dirfd, path, how)
		if err != unix.EAGAIN || i == 63 {
			return fd, err
		}
	}
}
