package workspace

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Confined *at helpers: how the daemon reaches a path below a directory it
// holds open (the view, the project, the upper layer, a watched tree)
// without a symlink, "..", or a path of any length leading it elsewhere.
// Every such open goes through openat2, the one place that spells the
// resolve flags; callers choose a mode.

// resolveMode is how openat2 resolves a path.
type resolveMode uint64

const (
	// inRoot resolves as code in the sandbox would, with dirfd as "/":
	// symlinks are followed, but never above dirfd (RESOLVE_IN_ROOT), and
	// /proc magic links are refused.
	inRoot resolveMode = unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS
	// beneath follows no symlink anywhere on the path and never leaves
	// dirfd.
	beneath resolveMode = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS
)

// openat2 opens path below dirfd with flags (O_CLOEXEC added), resolved
// as mode says. It is tried again on EAGAIN: with RESOLVE_IN_ROOT or
// RESOLVE_BENEATH, the kernel answers EAGAIN when a rename or a mount
// anywhere on the host raced with resolving "..", which a busy machine
// does all the time.
func openat2(dirfd int, path string, flags int, mode resolveMode) (int, error) {
	how := &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: uint64(mode)}
	for i := 0; ; i++ {
		fd, err := unix.Openat2(dirfd, path, how)
		if err != unix.EAGAIN || i == 63 {
			return fd, err
		}
	}
}

// openBeneath opens rel below root with no symlink followed anywhere
// (O_NOFOLLOW: with O_PATH, a symlink at the end is opened itself).
func openBeneath(root int, rel string, flags int) (int, error) {
	return openat2(root, rel, flags|unix.O_NOFOLLOW, beneath)
}

// beneathChunk is how much of a path one openat2 resolves: code in the
// sandbox can make paths of any length, and the kernel takes at most
// PATH_MAX (4096) at a time.
const beneathChunk = 2048

// openDirBeneath opens the directory rel below root with flags (O_RDONLY
// or O_PATH), following no symlink and never leaving root, a chunk of
// components at a time when rel is long.
func openDirBeneath(root int, rel string, flags int) (int, error) {
	if len(rel) <= beneathChunk {
		return openat2(root, rel, flags|unix.O_DIRECTORY, beneath)
	}
	fd := root
	for rel != "" {
		part, last := rel, true
		if len(rel) > beneathChunk {
			i := strings.LastIndexByte(rel[:beneathChunk], '/')
			if i <= 0 {
				if fd != root {
					unix.Close(fd)
				}
				return -1, unix.ENAMETOOLONG
			}
			part, last = rel[:i], false
			rel = rel[i+1:]
		} else {
			rel = ""
		}
		f := unix.O_PATH
		if last {
			f = flags
		}
		next, err := openat2(fd, part, f|unix.O_DIRECTORY, beneath)
		if fd != root {
			unix.Close(fd)
		}
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// openDirAt opens the directory name in dir for reading, not following a
// symlink (ENOTDIR, ELOOP).
func openDirAt(dir int, name string) (int, error) {
	return unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

// openParent opens the directory holding rel below root (O_RDONLY), with
// no symlink followed on the way and no way above root: the project side
// of commit and the view side of every write use it. rel may be longer
// than PATH_MAX (see openDirBeneath).
func openParent(root int, rel string) (int, string, error) {
	dir, name := path.Split(rel)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		dir = "."
	}
	fd, err := openDirBeneath(root, dir, unix.O_RDONLY)
	if err != nil {
		return -1, "", &os.PathError{Op: "openat2", Path: shortForm(dir), Err: err}
	}
	return fd, name, nil
}

// hasDirBeneath: root (the project, the view) holds a real directory at
// rel, reached without following a symlink.
func hasDirBeneath(root int, rel string) bool {
	fd, err := openDirBeneath(root, rel, unix.O_PATH)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// dirDepth is how many of the leading components of the directory path
// rel are real directories below root.
func dirDepth(root int, rel string) int {
	if rel == "" || rel == "." {
		return 0
	}
	n := strings.Count(rel, "/") + 1
	if hasDirBeneath(root, rel) {
		return n
	}
	fd, err := unix.Openat(root, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	depth := 0
	for _, comp := range strings.Split(rel, "/") {
		next, err := openDirBeneath(fd, comp, unix.O_PATH)
		unix.Close(fd)
		if err != nil {
			return depth
		}
		fd = next
		depth++
	}
	unix.Close(fd)
	return depth
}

// mkdirAllBeneath opens the parent directory of rel below root, creating
// the missing directories without following a symlink on the way: each
// with the mode of mirror's directory at its path (0755 where mirror, or
// -1, has none) less mask, owned by owner's answer when owner is not nil;
// replace removes a file or symlink found where a directory goes. mirror
// is walked alongside from the first missing directory, so a path of any
// depth costs a descriptor or two.
func mkdirAllBeneath(root int, rel string, mirror int, mask uint32, owner func(parent int) (int, int, bool), replace bool) (int, string, error) {
	dir, name := path.Split(rel)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		fd, err := unix.Openat(root, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, "", err
		}
		return fd, name, nil
	}
	if fd, err := openDirBeneath(root, dir, unix.O_RDONLY); err == nil {
		return fd, name, nil // all there
	}
	fd, err := unix.Openat(root, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, "", err
	}
	mfd := -2 // mirror's directory at the current path; -2: not opened yet, -1: none
	defer func() {
		if mfd >= 0 {
			unix.Close(mfd)
		}
	}()
	sofar := ""
	for rest := dir; rest != ""; {
		comp := rest
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			comp, rest = rest[:i], rest[i+1:]
		} else {
			rest = ""
		}
		parentPath := sofar
		if sofar == "" {
			sofar = comp
		} else {
			sofar += "/" + comp
		}
		next, err := openDirBeneath(fd, comp, unix.O_RDONLY)
		if replace && (errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP)) {
			// A file or symlink where a directory goes: removed (in the
			// view only; never in the project).
			if uerr := unix.Unlinkat(fd, comp, 0); uerr == nil {
				err = unix.ENOENT
			}
		}
		if errors.Is(err, unix.ENOENT) && mfd == -2 {
			mfd = -1
			if mirror >= 0 {
				p := parentPath
				if p == "" {
					p = "."
				}
				if m, err := openDirBeneath(mirror, p, unix.O_PATH); err == nil {
					mfd = m
				}
			}
		}
		if errors.Is(err, unix.ENOENT) {
			mode := uint32(0o755)
			var mst unix.Stat_t
			if mfd >= 0 && unix.Fstatat(mfd, comp, &mst, unix.AT_SYMLINK_NOFOLLOW) == nil && mst.Mode&unix.S_IFMT == unix.S_IFDIR {
				mode = mst.Mode & 0o7777
			}
			mode = mode &^ mask &^ (unix.S_ISUID | unix.S_ISGID)
			if err := unix.Mkdirat(fd, comp, mode); err != nil && !errors.Is(err, unix.EEXIST) {
				unix.Close(fd)
				return -1, "", &os.PathError{Op: "mkdir", Path: shortForm(sofar), Err: err}
			}
			next, err = openDirBeneath(fd, comp, unix.O_RDONLY)
			if err == nil {
				if owner != nil {
					if uid, gid, ok := owner(fd); ok {
						_ = unix.Fchown(next, uid, gid)
					}
				}
				_ = unix.Fchmod(next, mode) // not cut by the umask
			}
		}
		if mfd >= 0 {
			m, merr := openDirBeneath(mfd, comp, unix.O_PATH)
			unix.Close(mfd)
			mfd = -1
			if merr == nil {
				mfd = m
			}
		}
		unix.Close(fd)
		if err != nil {
			return -1, "", &os.PathError{Op: "openat2", Path: shortForm(sofar), Err: err}
		}
		fd = next
	}
	return fd, name, nil
}

// shortForm cuts a very long path for a message.
func shortForm(p string) string {
	if len(p) <= 200 {
		return p
	}
	return p[:100] + fmt.Sprintf("...(%d bytes)...", len(p)-200) + p[len(p)-100:]
}

// reopen opens an O_PATH descriptor's object for I/O. It goes through
// /proc/self/fd, so it is the same inode, whatever happened to its path.
func reopen(fd, flags int) (*os.File, error) {
	name := "/proc/self/fd/" + strconv.Itoa(fd)
	nfd, err := unix.Open(name, flags|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(nfd), name), nil
}

// openFileAt opens the regular file name in dir for reading. The type is
// checked on the descriptor: code in the sandbox can swap a file for a FIFO
// (renameat2 RENAME_EXCHANGE) between a stat and the open, and a read of a
// FIFO whose writer it holds open would never end.
func openFileAt(dir int, name string) (*os.File, error) {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "fstat", Path: name, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, &os.PathError{Op: "open", Path: name, Err: errNotRegular}
	}
	return os.NewFile(uintptr(fd), name), nil
}

// errNotRegular: a path that was a regular file is something else now.
var errNotRegular = errors.New("not a regular file any more (replaced while cellbox read it)")

// readlinkAt reads the target of the symlink name in dir.
func readlinkAt(dir int, name string) (string, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Readlinkat(dir, name, buf)
		if err != nil {
			return "", &os.PathError{Op: "readlink", Path: name, Err: err}
		}
		if n < len(buf) {
			return string(buf[:n]), nil
		}
		if len(buf) >= 1<<16 {
			return "", &os.PathError{Op: "readlink", Path: name, Err: unix.ENAMETOOLONG}
		}
		buf = make([]byte, 2*len(buf))
	}
}

func hasXattr(dir int, name, attr string) bool {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	_, err = unix.Fgetxattr(fd, attr, nil)
	return err == nil
}

func xattrIs(fd int, attr, want string) bool {
	buf := make([]byte, 16)
	n, err := unix.Fgetxattr(fd, attr, buf)
	return err == nil && string(buf[:n]) == want
}

// readNames lists a directory given by a descriptor (which stays open).
func readNames(fd int) ([]string, error) {
	dup, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), ".")
	defer f.Close()
	return f.Readdirnames(-1)
}

// dirent is a directory entry and its type (DT_*; a DT_UNKNOWN is
// stat'ed).
type dirent struct {
	name string
	typ  uint8
}

// errTooManyEntries: a directory listed with a bound has more entries.
var errTooManyEntries = errors.New("too many entries")

// readDirents lists the directory open at fd with the entries' types; max
// > 0 bounds the entries (past it: errTooManyEntries, before they are all
// held).
func readDirents(fd, max int) ([]dirent, error) {
	var out []dirent
	buf := make([]byte, 32<<10)
	if _, err := unix.Seek(fd, 0, 0); err != nil {
		return nil, err
	}
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return out, nil
		}
		b := buf[:n]
		for len(b) >= 19 {
			reclen := int(b[16]) | int(b[17])<<8
			if reclen < 19 || reclen > len(b) {
				break
			}
			typ := b[18]
			name := b[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if s := string(name); s != "." && s != ".." {
				if typ == unix.DT_UNKNOWN {
					var st unix.Stat_t
					if unix.Fstatat(fd, s, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
						typ = unix.DT_DIR
					}
				}
				if max > 0 && len(out) >= max {
					return nil, errTooManyEntries
				}
				out = append(out, dirent{name: s, typ: typ})
			}
			b = b[reclen:]
		}
	}
}

// parseDirents returns the names in a buffer of linux_dirent64 records,
// without "." and "..".
func parseDirents(b []byte) []string {
	var names []string
	for len(b) >= 19 {
		reclen := int(b[16]) | int(b[17])<<8
		if reclen < 19 || reclen > len(b) {
			break
		}
		name := b[19:reclen]
		if i := strings.IndexByte(string(name), 0); i >= 0 {
			name = name[:i]
		}
		if s := string(name); s != "." && s != ".." {
			names = append(names, s)
		}
		b = b[reclen:]
	}
	return names
}

// chainOpen bounds the descriptors one side of a walk (the upper layer,
// the project) keeps open, as maxOpenDirs does for walkUsage.
const chainOpen = 32

// dirChain is the line of directories from a walk's root to where it is,
// one side of it (absent where that side has no directory), with at most
// chainOpen descriptors open: deeper, the outermost open one is closed and
// opened again from its child ("..") when the walk comes back up, checked
// to be the same directory (dev, ino). Memory is a few words a level, so
// no depth is too deep for it.
type dirChain struct {
	links []dirLink
	open  int
	first int // the links below first are closed or absent
}

type dirLink struct {
	fd       int // -1: closed, or absent
	absent   bool
	dev, ino uint64
}

// push makes fd (which the chain now owns; -1: absent) the deepest link.
func (c *dirChain) push(fd int) error {
	if fd < 0 {
		c.links = append(c.links, dirLink{fd: -1, absent: true})
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return err
	}
	c.links = append(c.links, dirLink{fd: fd, dev: st.Dev, ino: st.Ino})
	c.open++
	for c.open > chainOpen {
		for c.first < len(c.links)-1 && c.links[c.first].fd < 0 {
			c.first++
		}
		if c.first >= len(c.links)-1 {
			break
		}
		unix.Close(c.links[c.first].fd)
		c.links[c.first].fd = -1
		c.open--
		c.first++
	}
	return nil
}

// top is the deepest link's descriptor (-1: absent). It is always open.
func (c *dirChain) top() int { return c.links[len(c.links)-1].fd }

// pop closes the deepest link, opening its parent again if it was closed.
func (c *dirChain) pop() error {
	n := len(c.links)
	l := c.links[n-1]
	c.links = c.links[:n-1]
	defer func() {
		if l.fd >= 0 {
			unix.Close(l.fd)
			c.open--
		}
	}()
	if n == 1 {
		return nil
	}
	p := &c.links[n-2]
	if !p.absent && p.fd < 0 {
		if l.fd < 0 {
			return errTreeChanged // cannot be: a closed link has an open child
		}
		fd, err := openDirAt(l.fd, "..")
		if err != nil {
			return fmt.Errorf("open a directory's parent: %w", err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Dev != p.dev || st.Ino != p.ino {
			unix.Close(fd)
			return errTreeChanged
		}
		p.fd = fd
		c.open++
	}
	c.first = min(c.first, n-2)
	return nil
}

func (c *dirChain) closeAll() {
	for _, l := range c.links {
		if l.fd >= 0 {
			unix.Close(l.fd)
		}
	}
	c.links, c.open, c.first = nil, 0, 0
}

// removeTreeAt removes the directory name in dir and everything below it
// by descriptors: down by openat (O_NOFOLLOW), up by ".." checked against
// the device and inode seen on the way down, with two descriptors open at
// most and a name and an inode number a level in memory. A directory code
// made unreadable (its owner's, as the view's writer is) is given 0700
// first.
func removeTreeAt(dir int, name string) error {
	type level struct {
		name     string
		dev, ino uint64
	}
	var dst unix.Stat_t
	if err := unix.Fstat(dir, &dst); err != nil {
		return err
	}
	open := func(parent int, n string) (int, unix.Stat_t, error) {
		var st unix.Stat_t
		if err := unix.Fstatat(parent, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return -1, st, err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return -1, st, unix.ENOTDIR
		}
		if st.Mode&0o700 != 0o700 {
			_ = unix.Fchmodat(parent, n, 0o700, 0)
		}
		fd, err := openDirAt(parent, n)
		if err != nil {
			return -1, st, err
		}
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, st, err
		}
		return fd, st, nil
	}
	cur, st, err := open(dir, name)
	if err != nil {
		return err
	}
	stack := []level{{name: "", dev: dst.Dev, ino: dst.Ino}, {name: name, dev: st.Dev, ino: st.Ino}}
	buf := make([]byte, 32<<10)
	for {
		// Unlink what is not a directory; go down into the first
		// directory met.
		sub := ""
		for sub == "" {
			n, err := unix.Getdents(cur, buf)
			if err != nil {
				unix.Close(cur)
				return fmt.Errorf("read a directory: %w", err)
			}
			if n <= 0 {
				break
			}
			for _, e := range parseDirents(buf[:n]) {
				var est unix.Stat_t
				if unix.Fstatat(cur, e, &est, unix.AT_SYMLINK_NOFOLLOW) != nil {
					continue
				}
				if est.Mode&unix.S_IFMT == unix.S_IFDIR {
					sub = e
					break
				}
				if err := unix.Unlinkat(cur, e, 0); err != nil && !errors.Is(err, unix.ENOENT) {
					unix.Close(cur)
					return fmt.Errorf("unlink %q: %w", e, err)
				}
			}
		}
		if sub != "" {
			next, st, err := open(cur, sub)
			unix.Close(cur)
			if err != nil {
				return fmt.Errorf("open directory %q: %w", sub, err)
			}
			cur = next
			stack = append(stack, level{name: sub, dev: st.Dev, ino: st.Ino})
			continue
		}
		// Empty: up, and remove it.
		top := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		parent, err := openDirAt(cur, "..")
		unix.Close(cur)
		if err != nil {
			return fmt.Errorf("open a directory's parent: %w", err)
		}
		var pst unix.Stat_t
		if err := unix.Fstat(parent, &pst); err != nil || pst.Dev != stack[len(stack)-1].dev || pst.Ino != stack[len(stack)-1].ino {
			unix.Close(parent)
			return errTreeChanged
		}
		if err := unix.Unlinkat(parent, top.name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
			unix.Close(parent)
			return fmt.Errorf("remove directory %q: %w", top.name, err)
		}
		if len(stack) == 1 {
			unix.Close(parent)
			return nil
		}
		cur = parent
	}
}

// pruneUp removes the directory cur (at path d below root) if it is empty,
// then its parent, n directories at most, stopping at the first that is
// not empty and never above root. Each parent is reached by ".." and
// checked to hold cur under the expected name. It closes cur.
func pruneUp(root, cur int, d string, n int) {
	defer func() { unix.Close(cur) }()
	var rst unix.Stat_t
	if unix.Fstat(root, &rst) != nil {
		return
	}
	for ; n > 0 && d != ""; n-- {
		var cst unix.Stat_t
		if unix.Fstat(cur, &cst) != nil || (cst.Dev == rst.Dev && cst.Ino == rst.Ino) {
			return
		}
		name := d
		if i := strings.LastIndexByte(d, '/'); i >= 0 {
			name, d = d[i+1:], d[:i]
		} else {
			d = ""
		}
		parent, err := openDirAt(cur, "..")
		if err != nil {
			return
		}
		var nst unix.Stat_t
		if unix.Fstatat(parent, name, &nst, unix.AT_SYMLINK_NOFOLLOW) != nil || nst.Dev != cst.Dev || nst.Ino != cst.Ino {
			unix.Close(parent)
			return // moved meanwhile: left alone
		}
		unix.Close(cur)
		cur = parent
		if unix.Unlinkat(cur, name, unix.AT_REMOVEDIR) != nil {
			return // not empty: it stays
		}
	}
}
