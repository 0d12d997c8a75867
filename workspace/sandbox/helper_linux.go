package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// helperPath returns the lean helper as a path to exec ("" when this binary
// is re-executed instead, and why). The helper is copied once into a
// sealed memfd, as runc keeps its own copy: nothing can change it while
// the daemon runs, a new build on disk does not swap it under running
// sandboxes, and no file is left behind. A child execs it by the path
// /proc/self/fd/N, which names the fd it inherited (it is close-on-exec,
// and the exec resolves the path before closing it).
func helperPath() (path, reason string) {
	switch v := os.Getenv(HelperEnv); v {
	case "", "lean":
	case "self":
		return "", HelperEnv + "=self"
	default:
		return "", fmt.Sprintf("%s=%q is neither lean nor self", HelperEnv, v)
	}
	lean.once.Do(func() {
		lean.path, lean.reason = openHelper()
	})
	lean.mu.Lock()
	defer lean.mu.Unlock()
	if lean.refused != "" {
		return "", lean.refused
	}
	return lean.path, lean.reason
}

func openHelper() (string, string) {
	lean.mu.Lock()
	bin := lean.bin
	lean.mu.Unlock()
	if len(bin) == 0 {
		return "", "this build carries no sandbox helper"
	}
	if !bytes.HasPrefix(bin, []byte("\x7fELF")) {
		return "", "the sandbox helper this build carries is not an executable"
	}
	fd, err := memfdExec("cellbox-sandbox")
	if err != nil {
		return "", err.Error()
	}
	// Far above the descriptors a child is given (stdio and ExtraFiles,
	// and the temporaries os/exec moves them through), which would
	// otherwise replace it before the exec.
	high, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, helperFD)
	unix.Close(fd)
	if err != nil {
		return "", fmt.Sprintf("move the sandbox helper's descriptor: %v", err)
	}
	fd = high
	f := os.NewFile(uintptr(fd), "cellbox-sandbox")
	if _, err := f.Write(bin); err != nil {
		f.Close()
		return "", fmt.Sprintf("write the sandbox helper: %v", err)
	}
	seals := unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		f.Close()
		return "", fmt.Sprintf("seal the sandbox helper: %v", err)
	}
	// Kept open for the daemon's life: the fd is the helper.
	lean.file = f
	return "/proc/self/fd/" + strconv.Itoa(fd), ""
}

// helperFD is the lowest descriptor the helper's memfd may take.
const helperFD = 100

// memfdExec creates a memfd that may be executed: MFD_EXEC says so on a
// kernel with vm.memfd_noexec (6.3 and later), and an older kernel, which
// refuses the flag, makes every memfd executable.
func memfdExec(name string) (int, error) {
	flags := unix.MFD_CLOEXEC | unix.MFD_ALLOW_SEALING
	fd, err := unix.MemfdCreate(name, flags|unix.MFD_EXEC)
	if err == unix.EINVAL {
		fd, err = unix.MemfdCreate(name, flags)
	}
	if err != nil {
		return -1, fmt.Errorf("memfd_create for the sandbox helper: %w", err)
	}
	return fd, nil
}

// initExe is what a sandbox's init is started from: the lean helper, or
// this binary.
func initExe() string {
	if path, _ := helperPath(); path != "" {
		return path
	}
	return selfExe
}

// execRefused says whether starting a process failed because its binary
// may not be executed.
func execRefused(err error) bool {
	return errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOEXEC)
}

// helperRefused gives up the lean helper for this process's life after the
// kernel refused to execute it.
func helperRefused(err error) {
	lean.mu.Lock()
	defer lean.mu.Unlock()
	lean.refused = fmt.Sprintf("the kernel refused to execute the sandbox helper: %v", err)
}
