package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// copyUpper copies the upper layer src into the empty directory dst, as
// the overlay reads it: directories (with their user.* extended
// attributes, so opaque directories stay opaque), files (cloned with
// FICLONE where the filesystem shares blocks, else copied by the kernel),
// symlinks, whiteouts (character devices 0:0, which overlayfs lets an
// unprivileged user make), FIFOs and sockets, hard links between them, and
// every entry's owner, mode and times. Both trees are walked by
// descriptors (dirChain), so no symlink leads elsewhere and no depth is
// too deep. An entry removed while it is copied is left out. touched (may
// be nil) is called with every file, symlink and whiteout and its birth
// time (ns; the ctime where the filesystem keeps none). It returns the
// bytes of the files copied.
func copyUpper(ctx context.Context, src, dst string, touched func(p string, btime int64)) (int64, error) {
	sfd, err := unix.Open(src, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", src, err)
	}
	dfd, err := unix.Open(dst, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(sfd)
		return 0, fmt.Errorf("open %s: %w", dst, err)
	}
	droot, err := unix.Dup(dfd) // for hard links, which name paths from the top
	if err != nil {
		unix.Close(sfd)
		unix.Close(dfd)
		return 0, err
	}
	defer unix.Close(droot)
	c := &treeCopy{ctx: ctx, droot: droot, touched: touched, links: make(map[[2]uint64]string)}
	defer c.src.closeAll()
	defer c.dst.closeAll()
	if err := c.src.push(sfd); err != nil {
		unix.Close(dfd)
		return 0, err
	}
	if err := c.dst.push(dfd); err != nil {
		return 0, err
	}
	var rst unix.Statx_t
	if err := unix.Statx(sfd, "", unix.AT_EMPTY_PATH, unix.STATX_BASIC_STATS, &rst); err != nil {
		return 0, fmt.Errorf("stat %s: %w", src, err)
	}
	if err := c.run(&rst); err != nil {
		return c.bytes, err
	}
	return c.bytes, nil
}

// treeCopy is one copyUpper.
type treeCopy struct {
	ctx      context.Context
	src, dst dirChain
	droot    int // the destination's top
	touched  func(p string, btime int64)
	// links maps the (dev, ino) of a source file with more than one link
	// to the destination path of its first copy.
	links map[[2]uint64]string
	bytes int64
	// noClone, noRange: the filesystem said it cannot clone, or
	// copy_file_range: not tried again.
	noClone, noRange bool

	path   []byte // the current directory's path
	frames []copyFrame
}

// copyFrame is a directory of the walk.
type copyFrame struct {
	parentLen int
	names     []string     // entries still to copy
	st        unix.Statx_t // the source directory, applied when it is done
}

func (c *treeCopy) rel(name string) string { return joinRel(string(c.path), name) }

func (c *treeCopy) run(root *unix.Statx_t) error {
	names, err := readNames(c.src.top())
	if err != nil {
		return fmt.Errorf("read . of the upper layer: %w", err)
	}
	sort.Strings(names) // the same copy every time (the first of hard links wins)
	c.frames = append(c.frames, copyFrame{names: names, st: *root})
	for n := 0; len(c.frames) > 0; n++ {
		if n%256 == 0 {
			if err := c.ctx.Err(); err != nil {
				return err
			}
		}
		f := &c.frames[len(c.frames)-1]
		if len(f.names) > 0 {
			name := f.names[0]
			f.names = f.names[1:]
			if err := c.entry(name); err != nil {
				return err
			}
			continue
		}
		// The directory is whole: its attributes, owner, mode and times
		// now (a read-only mode would have refused its entries, and each
		// entry made changed its mtime).
		if err := applyMeta(c.src.top(), c.dst.top(), "", &f.st); err != nil {
			return fmt.Errorf("copy %s: %w", orDot(string(c.path)), err)
		}
		parentLen := f.parentLen
		c.frames = c.frames[:len(c.frames)-1]
		if err := c.src.pop(); err != nil {
			return err
		}
		if err := c.dst.pop(); err != nil {
			return err
		}
		c.path = c.path[:parentLen]
	}
	return nil
}

// entry copies the source entry name of the current directory.
func (c *treeCopy) entry(name string) error {
	sdir, ddir := c.src.top(), c.dst.top()
	p := c.rel(name)
	var st unix.Statx_t
	if err := unix.Statx(sdir, name, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS|unix.STATX_BTIME, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("stat %s: %w", p, err)
	}
	typ := uint32(st.Mode) & unix.S_IFMT
	note := func() {
		if c.touched == nil {
			return
		}
		bt := statxBirth(&st)
		if bt == 0 {
			bt = statxNs(st.Ctime)
		}
		c.touched(p, bt)
	}
	switch typ {
	case unix.S_IFDIR:
		sfd, err := openDirAt(sdir, name)
		if err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
				return nil
			}
			return fmt.Errorf("open %s: %w", p, err)
		}
		names, err := readNames(sfd)
		if err != nil {
			unix.Close(sfd)
			return fmt.Errorf("read %s: %w", p, err)
		}
		sort.Strings(names)
		if err := unix.Mkdirat(ddir, name, 0o700); err != nil {
			unix.Close(sfd)
			return fmt.Errorf("create %s: %w", p, err)
		}
		dfd, err := openDirAt(ddir, name)
		if err != nil {
			unix.Close(sfd)
			return fmt.Errorf("open the copy of %s: %w", p, err)
		}
		perr := c.src.push(sfd)
		if err := c.dst.push(dfd); perr == nil {
			perr = err
		}
		if perr != nil {
			return perr
		}
		c.frames = append(c.frames, copyFrame{parentLen: len(c.path), names: names, st: st})
		if len(c.path) > 0 {
			c.path = append(c.path, '/')
		}
		c.path = append(c.path, name...)
		return nil
	case unix.S_IFREG:
		if st.Nlink > 1 {
			key := [2]uint64{uint64(st.Dev_major)<<32 | uint64(st.Dev_minor), st.Ino}
			if first, ok := c.links[key]; ok && c.link(first, ddir, name) {
				note()
				return nil
			}
			c.links[key] = p
		}
		n, err := c.copyFile(sdir, ddir, name, &st)
		if errors.Is(err, unix.ENOENT) || errors.Is(err, errNotRegular) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("copy %s: %w", p, err)
		}
		c.bytes += n
		note()
		return nil
	case unix.S_IFLNK:
		target, err := readlinkAt(sdir, name)
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EINVAL) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("copy %s: %w", p, err)
		}
		if err := unix.Symlinkat(target, ddir, name); err != nil {
			return fmt.Errorf("copy %s: %w", p, err)
		}
	case unix.S_IFCHR:
		if st.Rdev_major != 0 || st.Rdev_minor != 0 {
			return nil // a device: code in a sandbox cannot make one
		}
		if err := unix.Mknodat(ddir, name, unix.S_IFCHR, 0); err != nil {
			return fmt.Errorf("copy the whiteout %s: %w", p, err)
		}
	case unix.S_IFIFO, unix.S_IFSOCK:
		if err := unix.Mknodat(ddir, name, typ|0o600, 0); err != nil {
			return fmt.Errorf("copy %s: %w", p, err)
		}
	default:
		return nil
	}
	if err := applyMeta(-1, ddir, name, &st); err != nil {
		return fmt.Errorf("copy %s: %w", p, err)
	}
	if typ != unix.S_IFIFO && typ != unix.S_IFSOCK {
		note()
	}
	return nil
}

// link makes name in ddir a hard link to the copy at first (a path from
// the destination's top); false if it cannot (a copy then stands in).
func (c *treeCopy) link(first string, ddir int, name string) bool {
	dir, base, err := openParent(c.droot, first)
	if err != nil {
		return false
	}
	defer unix.Close(dir)
	return unix.Linkat(dir, base, ddir, name, 0) == nil
}

// copyFile copies the regular file name of sdir to a new file of ddir
// (FICLONE, else copy_file_range), with its user.* extended attributes,
// owner, mode and times. It works on descriptors, a dozen system calls a
// file: a fork of 100,000 files makes them all.
func (c *treeCopy) copyFile(sdir, ddir int, name string, st *unix.Statx_t) (int64, error) {
	in, err := unix.Openat(sdir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(in)
	// The type on the descriptor: code can swap the file for a FIFO
	// (see openFileAt).
	var ist unix.Stat_t
	if err := unix.Fstat(in, &ist); err != nil {
		return 0, err
	}
	if ist.Mode&unix.S_IFMT != unix.S_IFREG {
		return 0, errNotRegular
	}
	out, err := unix.Openat(ddir, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return 0, err
	}
	defer unix.Close(out)
	n, err := c.copyData(in, out, ist.Size)
	if err != nil {
		return 0, err
	}
	if err := copyXattrs(in, out); err != nil {
		return 0, err
	}
	uid, gid := int(st.Uid), int(st.Gid)
	if os.Geteuid() == 0 || uid != os.Geteuid() || gid != os.Getegid() {
		if err := unix.Fchown(out, uid, gid); err != nil {
			return 0, fmt.Errorf("chown to %d:%d: %w", uid, gid, err)
		}
	}
	if err := unix.Fchmod(out, uint32(st.Mode)&0o7777); err != nil {
		return 0, fmt.Errorf("chmod: %w", err)
	}
	ts := [2]unix.Timespec{
		{Sec: st.Atime.Sec, Nsec: int64(st.Atime.Nsec)},
		{Sec: st.Mtime.Sec, Nsec: int64(st.Mtime.Nsec)},
	}
	// futimens: utimensat with no path acts on the descriptor.
	if _, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(out), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0); e != 0 {
		return 0, fmt.Errorf("set the times: %w", e)
	}
	return n, nil
}

// copyData copies in to out: a clone (FICLONE) where the filesystem shares
// blocks (tried until it says it cannot), else copy_file_range in the
// kernel, else read and write. size is in's size when opened.
func (c *treeCopy) copyData(in, out int, size int64) (int64, error) {
	if !c.noClone {
		err := unix.IoctlFileClone(out, in)
		if err == nil {
			return size, nil
		}
		if !cannot(err) {
			return 0, fmt.Errorf("clone: %w", err)
		}
		c.noClone = true
	}
	var n int64
	for !c.noRange {
		m, err := unix.CopyFileRange(in, nil, out, nil, 1<<30, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			if n == 0 && cannot(err) {
				c.noRange = true
				break
			}
			return n, fmt.Errorf("copy_file_range: %w", err)
		}
		if m == 0 {
			return n, nil
		}
		n += int64(m)
	}
	buf := make([]byte, 256<<10)
	for {
		m, err := unix.Read(in, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, fmt.Errorf("read: %w", err)
		}
		if m == 0 {
			return n, nil
		}
		for w := buf[:m]; len(w) > 0; {
			k, err := unix.Write(out, w)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return n, fmt.Errorf("write: %w", err)
			}
			w = w[k:]
		}
		n += int64(m)
	}
}

// cannot says err is a filesystem's way of saying it does not do an
// operation (clone, copy_file_range) at all.
func cannot(err error) bool {
	return errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EXDEV) || errors.Is(err, unix.EINVAL) ||
		errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.ENOSYS)
}

// applyMeta gives the destination entry name of ddir ("": ddir itself)
// the source's owner, mode and times, and, when sfd is the source
// directory's descriptor, its user.* extended attributes.
func applyMeta(sfd, ddir int, name string, st *unix.Statx_t) error {
	if sfd >= 0 {
		if err := copyXattrs(sfd, ddir); err != nil {
			return err
		}
	}
	target, flags := name, unix.AT_SYMLINK_NOFOLLOW
	at := ddir
	if name == "" {
		// The directory itself, by its descriptor.
		target, flags, at = "/proc/self/fd/"+strconv.Itoa(ddir), 0, unix.AT_FDCWD
	}
	uid, gid := int(st.Uid), int(st.Gid)
	if os.Geteuid() == 0 || uid != os.Geteuid() || gid != os.Getegid() {
		if err := unix.Fchownat(at, target, uid, gid, flags); err != nil {
			return fmt.Errorf("chown to %d:%d: %w", uid, gid, err)
		}
	}
	if typ := uint32(st.Mode) & unix.S_IFMT; typ != unix.S_IFLNK {
		// fchmodat follows the last component: name is no symlink here.
		if err := unix.Fchmodat(at, target, uint32(st.Mode)&0o7777, 0); err != nil {
			return fmt.Errorf("chmod: %w", err)
		}
	}
	ts := []unix.Timespec{
		{Sec: st.Atime.Sec, Nsec: int64(st.Atime.Nsec)},
		{Sec: st.Mtime.Sec, Nsec: int64(st.Mtime.Nsec)},
	}
	if err := unix.UtimesNanoAt(at, target, ts, flags); err != nil {
		return fmt.Errorf("set the times: %w", err)
	}
	return nil
}

// copyXattrs copies the user.* extended attributes of the file or
// directory sfd to dfd (overlayfs's own, user.overlay.*, among them).
func copyXattrs(sfd, dfd int) error {
	size, err := unix.Flistxattr(sfd, nil)
	if err != nil || size == 0 {
		return nil // none, or a filesystem without them
	}
	buf := make([]byte, size)
	size, err = unix.Flistxattr(sfd, buf)
	if err != nil {
		return fmt.Errorf("list extended attributes: %w", err)
	}
	for _, attr := range strings.Split(strings.TrimRight(string(buf[:size]), "\x00"), "\x00") {
		if !strings.HasPrefix(attr, "user.") {
			continue
		}
		vsize, err := unix.Fgetxattr(sfd, attr, nil)
		if err != nil {
			return fmt.Errorf("read the extended attribute %s: %w", attr, err)
		}
		val := make([]byte, vsize)
		if vsize, err = unix.Fgetxattr(sfd, attr, val); err != nil {
			return fmt.Errorf("read the extended attribute %s: %w", attr, err)
		}
		if err := unix.Fsetxattr(dfd, attr, val[:vsize], 0); err != nil {
			return fmt.Errorf("set the extended attribute %s: %w", attr, err)
		}
	}
	return nil
}
