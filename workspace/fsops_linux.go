package workspace

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/cellbox-dev/cellbox/protocol"
)

// File operations of PROTOCOL.md §3 (fs/read, fs/write, fs/list, fs/stat,
// fs/delete, fs/rename, fs/mkdir), all through the live mount of the
// workspace's sandbox (ARCHITECTURE.md constraint 1). See README.md, "File
// operations", for the rules.

// fsErr adds the operation and path to err and classifies it with this
// package's sentinels. A missing file stays fs.ErrNotExist (rpc answers
// it with -32001 NotFound).
func (w *Workspace) fsErr(op, rel string, err error) error {
	if err == nil {
		return nil
	}
	where := fmt.Sprintf("%s %q in workspace %s", op, rel, w.id)
	var errno unix.Errno
	if errors.As(err, &errno) {
		switch errno {
		case unix.EEXIST, unix.ENOTEMPTY, unix.EISDIR, unix.ENOTDIR, unix.EACCES, unix.EPERM, unix.EROFS,
			unix.ENAMETOOLONG, unix.EINVAL, unix.ELOOP, unix.EBUSY, unix.ETXTBSY, unix.EXDEV, unix.EOVERFLOW:
			return fmt.Errorf("%s: %w: %w", where, ErrInvalid, err)
		case unix.ENOSPC, unix.EDQUOT, unix.EFBIG, unix.EMFILE, unix.ENFILE:
			return fmt.Errorf("%s: %w: %w", where, ErrLimit, err)
		}
	}
	return fmt.Errorf("%s: %w", where, err)
}

// entry describes rel from its lstat.
func entry(rel string, st *unix.Stat_t) protocol.FileEntry {
	e := protocol.FileEntry{
		Path:  wireName(rel),
		Type:  protocol.FileTypeFile,
		Size:  st.Size,
		Mtime: time.Unix(st.Mtim.Unix()).UTC(),
		Mode:  st.Mode & 0o7777,
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		e.Type, e.Size = protocol.FileTypeDir, 0
	case unix.S_IFLNK:
		e.Type = protocol.FileTypeSymlink
	case unix.S_IFREG:
	default:
		// FIFOs, sockets and devices are listed as files of size 0;
		// fs/read refuses them.
		e.Size = 0
	}
	return e
}

func typeName(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFIFO:
		return "a named pipe"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFCHR, unix.S_IFBLK:
		return "a device"
	case unix.S_IFLNK:
		return "a symlink"
	}
	return "not a regular file"
}

// readFile reads rel (following symlinks inside the workspace), at most
// limit bytes; only regular files are read.
func (v *view) readFile(rel string, limit int64) ([]byte, *unix.Stat_t, error) {
	fd, err := v.open(rel, 0)
	if err != nil {
		return nil, nil, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, nil, fmt.Errorf("%w: it is %s; only regular files are read", ErrInvalid, typeName(st.Mode))
	}
	if st.Size > limit {
		return nil, nil, fmt.Errorf("%w: the file has %d bytes, over the limit of %d", ErrLimit, st.Size, limit)
	}
	f, err := reopen(fd, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, nil, err
	}
	if int64(len(b)) > limit {
		return nil, nil, fmt.Errorf("%w: the file grew over the limit of %d bytes while read", ErrLimit, limit)
	}
	return b, &st, nil
}

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
	fd, err := openat2(root, rel, unix.O_RDONLY|unix.O_NOCTTY|unix.O_NONBLOCK, inRoot)
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

// FsRead is §3 fs/read. Without an encoding, valid UTF-8 is answered as
// utf8 and anything else as base64; asked for utf8, content that is not
// valid UTF-8 is ErrInvalid (read it as base64).
func (w *Workspace) FsRead(p protocol.FsReadParams) (*protocol.FsReadResult, error) {
	rel, err := relPath(p.Path)
	if err != nil {
		return nil, err
	}
	if err := checkEncoding(p.Encoding); err != nil {
		return nil, err
	}
	var (
		b  []byte
		st *unix.Stat_t
	)
	err = w.readView(func(v *view) error {
		b, st, err = v.readFile(rel, MaxFileBytes)
		return err
	})
	if err != nil {
		return nil, w.fsErr("fs/read", rel, err)
	}
	enc := p.Encoding
	if enc == "" {
		enc = protocol.EncodingUTF8
		if !utf8.Valid(b) {
			enc = protocol.EncodingBase64
		}
	}
	res := &protocol.FsReadResult{Encoding: enc, Size: int64(len(b)), Mtime: time.Unix(st.Mtim.Unix()).UTC()}
	switch enc {
	case protocol.EncodingUTF8:
		if !utf8.Valid(b) {
			return nil, fmt.Errorf("fs/read %q in workspace %s: %w: the content is not valid UTF-8; read it with encoding \"base64\"", rel, w.id, ErrInvalid)
		}
		res.Content = string(b)
	case protocol.EncodingBase64:
		res.Content = base64.StdEncoding.EncodeToString(b)
	}
	return res, nil
}

func checkEncoding(e protocol.Encoding) error {
	switch e {
	case "", protocol.EncodingUTF8, protocol.EncodingBase64:
		return nil
	}
	return fmt.Errorf("%w: field \"encoding\" must be \"utf8\" or \"base64\", got %q", ErrInvalid, e)
}

// FsWrite is §3 fs/write: the file is created (mode 0644 less the umask)
// or truncated and rewritten in place, as an editor saves; a symlink
// inside the workspace is written through. It is written as the sandbox's
// root (see inView).
func (w *Workspace) FsWrite(p protocol.FsWriteParams) (*protocol.FsWriteResult, error) {
	rel, err := relPath(p.Path)
	if err != nil {
		return nil, err
	}
	var b []byte
	switch p.Encoding {
	case "", protocol.EncodingUTF8:
		b = []byte(p.Content)
	case protocol.EncodingBase64:
		if b, err = base64.StdEncoding.DecodeString(p.Content); err != nil {
			return nil, fmt.Errorf("%w: field \"content\" is not valid base64: %v", ErrInvalid, err)
		}
	default:
		return nil, checkEncoding(p.Encoding)
	}
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("fs/write %q in workspace %s: %w: %d bytes, over the limit of %d", rel, w.id, ErrLimit, len(b), MaxFileBytes)
	}
	var res protocol.FsWriteResult
	err = w.writeView(func(v *view) error {
		if p.CreateParents {
			if err := v.mkdirAll(path.Dir(rel)); err != nil {
				return err
			}
		}
		f, err := v.openForWrite(rel, int64(len(b)))
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := f.Write(b); err != nil {
			return err
		}
		if err := f.Truncate(int64(len(b))); err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &st); err != nil {
			return err
		}
		res = protocol.FsWriteResult{Size: st.Size, Mtime: time.Unix(st.Mtim.Unix()).UTC()}
		return f.Close()
	})
	if errors.Is(err, unix.ENOENT) && !p.CreateParents {
		return nil, w.fsErr("fs/write", rel, fmt.Errorf("%w (its directory does not exist; pass createParents: true to create it)", err))
	}
	return &res, w.fsErr("fs/write", rel, err)
}

// openForWrite opens rel for writing size bytes from its start, creating
// it if missing. The space is reserved first, so a full filesystem fails
// here and leaves the file as it was (and no new file behind); the caller
// writes, then truncates to size.
func (v *view) openForWrite(rel string, size int64) (*os.File, error) {
	fd, err := v.open(rel, 0)
	if err == nil {
		defer unix.Close(fd)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return nil, err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			return nil, fmt.Errorf("%w: it is %s; only regular files are written", ErrInvalid, typeName(st.Mode))
		}
		f, err := reopen(fd, unix.O_WRONLY)
		if err != nil {
			return nil, err
		}
		if err := reserve(f, size); err != nil {
			f.Close()
			return nil, err
		}
		return f, nil
	}
	if !errors.Is(err, unix.ENOENT) {
		return nil, err
	}
	dir, base, err := v.parent(rel)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dir)
	// O_EXCL: a dangling symlink at rel is not followed.
	nfd, err := unix.Openat(dir, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NOCTTY, 0o644)
	if err == unix.EEXIST {
		return nil, fmt.Errorf("%w: it is a symlink to a file that does not exist", ErrInvalid)
	}
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(nfd), rel)
	if err := reserve(f, size); err != nil {
		f.Close()
		_ = unix.Unlinkat(dir, base, 0)
		return nil, err
	}
	return f, nil
}

// reserve allocates size bytes for f (fallocate), so that writing them
// cannot fail for want of space. A filesystem without fallocate is
// written without the reservation.
func reserve(f *os.File, size int64) error {
	if size == 0 {
		return nil
	}
	err := unix.Fallocate(int(f.Fd()), 0, 0, size)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		return nil
	}
	return err
}

// mkdirAll makes rel and its missing parents (0755 less the umask).
func (v *view) mkdirAll(rel string) error {
	if rel == "." {
		return nil
	}
	fd, err := v.open(rel, unix.O_DIRECTORY)
	if err == nil {
		unix.Close(fd)
		return nil
	}
	if !errors.Is(err, unix.ENOENT) {
		return err
	}
	if err := v.mkdirAll(path.Dir(rel)); err != nil {
		return err
	}
	dir, base, err := v.parent(rel)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	if err := unix.Mkdirat(dir, base, 0o755); err != nil && err != unix.EEXIST {
		return err
	}
	fd, err = v.open(rel, unix.O_DIRECTORY)
	if err != nil {
		return err
	}
	unix.Close(fd)
	return nil
}

// FsList is §3 fs/list: the entries of a directory (following a symlink
// to a directory inside the workspace), sorted by name, or with recursive
// the whole tree below it, depth first (symlinks are listed, not
// followed). Paths are relative to the workspace.
func (w *Workspace) FsList(p protocol.FsListParams) (*protocol.FsListResult, error) {
	rel, err := relPath(p.Path)
	if err != nil {
		return nil, err
	}
	entries := []protocol.FileEntry{}
	err = w.readView(func(v *view) error {
		fd, err := v.open(rel, unix.O_DIRECTORY)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		f, err := reopen(fd, unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			return err
		}
		return listDir(f, rel, p.Recursive, &entries)
	})
	if err != nil {
		return nil, w.fsErr("fs/list", rel, err)
	}
	return &protocol.FsListResult{Entries: entries}, nil
}

// listDir appends dir's entries to out; it closes dir.
func listDir(dir *os.File, rel string, recursive bool, out *[]protocol.FileEntry) error {
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return err
	}
	slices.Sort(names)
	fd := int(dir.Fd())
	for _, name := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // removed since the directory was read
		}
		if len(*out) >= MaxListEntries {
			return fmt.Errorf("%w: more than %d entries; list the directories one at a time", ErrLimit, MaxListEntries)
		}
		child := joinRel(rel, name)
		*out = append(*out, entry(child, &st))
		if !recursive || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		sub, err := openDirAt(fd, name)
		if err != nil {
			continue // unreadable or gone: listed, not descended
		}
		if err := listDir(os.NewFile(uintptr(sub), child), child, true, out); err != nil {
			return err
		}
	}
	return nil
}

func joinRel(dir, name string) string {
	if dir == "." || dir == "" {
		return name
	}
	return dir + "/" + name
}

// FsStat is §3 fs/stat: rel's entry; a symlink is described, not followed.
func (w *Workspace) FsStat(p protocol.FsStatParams) (*protocol.FileEntry, error) {
	rel, err := relPath(p.Path)
	if err != nil {
		return nil, err
	}
	var e protocol.FileEntry
	err = w.readView(func(v *view) error {
		fd, err := v.open(rel, unix.O_NOFOLLOW)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return err
		}
		e = entry(rel, &st)
		return nil
	})
	if err != nil {
		return nil, w.fsErr("fs/stat", rel, err)
	}
	return &e, nil
}

// FsDelete is §3 fs/delete: a file or symlink (not its target), an empty
// directory, or with recursive a directory and everything below it. In an
// overlay workspace, deleting a project file leaves a whiteout in the
// upper layer; the project is untouched until commit.
func (w *Workspace) FsDelete(p protocol.FsDeleteParams) error {
	rel, err := relPath(p.Path)
	if err != nil {
		return err
	}
	if rel == "." {
		return fmt.Errorf("%w: fs/delete of the workspace itself; delete its entries instead", ErrInvalid)
	}
	err = w.writeView(func(v *view) error {
		dir, base, err := v.parent(rel)
		if err != nil {
			return err
		}
		defer unix.Close(dir)
		err = unix.Unlinkat(dir, base, 0)
		if err != unix.EISDIR {
			return err
		}
		err = unix.Unlinkat(dir, base, unix.AT_REMOVEDIR)
		if err == unix.ENOTEMPTY || err == unix.EEXIST {
			if !p.Recursive {
				return fmt.Errorf("%w: the directory is not empty; pass recursive: true to delete it with its contents", ErrInvalid)
			}
			return removeTree(dir, base)
		}
		return err
	})
	return w.fsErr("fs/delete", rel, err)
}

// removeTree removes name below dir and everything in it, never following
// a symlink.
func removeTree(dir int, name string) error {
	for try := 0; ; try++ {
		fd, err := openDirAt(dir, name)
		if err != nil {
			if err == unix.ENOTDIR || err == unix.ELOOP {
				return unix.Unlinkat(dir, name, 0)
			}
			return err
		}
		f := os.NewFile(uintptr(fd), name)
		names, err := f.Readdirnames(-1)
		if err != nil {
			f.Close()
			return err
		}
		for _, n := range names {
			err := unix.Unlinkat(fd, n, 0)
			if err == unix.EISDIR {
				err = removeTree(fd, n)
			}
			if err != nil && err != unix.ENOENT {
				f.Close()
				return err
			}
		}
		f.Close()
		err = unix.Unlinkat(dir, name, unix.AT_REMOVEDIR)
		// Something was created meanwhile: go again, a few times.
		if (err != unix.ENOTEMPTY && err != unix.EEXIST) || try == 3 {
			return err
		}
	}
}

// FsRename is §3 fs/rename. Without overwrite an existing target is an
// error (RENAME_NOREPLACE, no race). overlayfs cannot rename a directory
// that comes from the project (EXDEV without redirect_dir, which a user
// namespace's overlay does not have), so such a directory is copied
// (contents, modes, symlinks, times) and the original deleted, as mv(1)
// does.
func (w *Workspace) FsRename(p protocol.FsRenameParams) error {
	from, err := relPath(p.From)
	if err != nil {
		return err
	}
	to, err := relPath(p.To)
	if err != nil {
		return err
	}
	if from == "." || to == "." {
		return fmt.Errorf("%w: fs/rename of or onto the workspace itself", ErrInvalid)
	}
	if to == from {
		return nil
	}
	if len(to) > len(from) && to[:len(from)+1] == from+"/" {
		return fmt.Errorf("%w: fs/rename %q into itself (%q)", ErrInvalid, from, to)
	}
	err = w.writeView(func(v *view) error {
		fdir, fbase, err := v.parent(from)
		if err != nil {
			return err
		}
		defer unix.Close(fdir)
		tdir, tbase, err := v.parent(to)
		if err != nil {
			return err
		}
		defer unix.Close(tdir)
		var flags uint
		if !p.Overwrite {
			flags = unix.RENAME_NOREPLACE
		}
		err = unix.Renameat2(fdir, fbase, tdir, tbase, flags)
		if err == unix.EXDEV {
			err = moveByCopy(fdir, fbase, tdir, tbase, p.Overwrite)
		}
		if err == unix.EEXIST && !p.Overwrite {
			return fmt.Errorf("%w: %q exists; pass overwrite: true to replace it", ErrInvalid, to)
		}
		return err
	})
	return w.fsErr("fs/rename", from, err)
}

// moveByCopy moves a directory the kernel would not rename: it copies it
// under a temporary name next to the target, renames that into place,
// then removes the original. The original stays whole until the copy is.
func moveByCopy(fdir int, fbase string, tdir int, tbase string, overwrite bool) error {
	var st unix.Stat_t
	if err := unix.Fstatat(tdir, tbase, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
		if !overwrite {
			return unix.EEXIST
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return unix.ENOTDIR
		}
	}
	tmp := fmt.Sprintf(".cellbox-move-%d", time.Now().UnixNano())
	if err := copyTree(fdir, fbase, tdir, tmp); err != nil {
		_ = removeTree(tdir, tmp)
		return err
	}
	// A directory renamed onto an empty directory replaces it; onto a
	// full one it fails (ENOTEMPTY), as rename(2) would.
	if err := unix.Renameat2(tdir, tmp, tdir, tbase, 0); err != nil {
		_ = removeTree(tdir, tmp)
		return err
	}
	return removeTree(fdir, fbase)
}

// copyTree copies sname below sdir to dname below ddir: directories,
// regular files, symlinks and FIFOs, with their permission bits and
// modification times; nothing is followed.
func copyTree(sdir int, sname string, ddir int, dname string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(sdir, sname, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	mode := st.Mode & 0o7777
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		if err := unix.Mkdirat(ddir, dname, 0o700); err != nil {
			return err
		}
		sfd, err := openDirAt(sdir, sname)
		if err != nil {
			return err
		}
		sf := os.NewFile(uintptr(sfd), sname)
		defer sf.Close()
		dfd, err := unix.Openat(ddir, dname, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(dfd)
		names, err := sf.Readdirnames(-1)
		if err != nil {
			return err
		}
		for _, n := range names {
			if err := copyTree(sfd, n, dfd, n); err != nil {
				return err
			}
		}
		if err := unix.Fchmodat(ddir, dname, mode, 0); err != nil {
			return err
		}
	case unix.S_IFREG:
		inf, err := openFileAt(sdir, sname)
		if err != nil {
			return err
		}
		defer inf.Close()
		out, err := unix.Openat(ddir, dname, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return err
		}
		outf := os.NewFile(uintptr(out), dname)
		defer outf.Close()
		if _, err := io.Copy(outf, inf); err != nil {
			return err
		}
		if err := unix.Fchmod(out, mode); err != nil {
			return err
		}
	case unix.S_IFLNK:
		buf := make([]byte, unix.PathMax)
		n, err := unix.Readlinkat(sdir, sname, buf)
		if err != nil {
			return err
		}
		if err := unix.Symlinkat(string(buf[:n]), ddir, dname); err != nil {
			return err
		}
	case unix.S_IFIFO:
		if err := unix.Mkfifoat(ddir, dname, mode); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: %q is %s, which cannot be moved", ErrInvalid, sname, typeName(st.Mode))
	}
	ts := []unix.Timespec{st.Atim, st.Mtim}
	return unix.UtimesNanoAt(ddir, dname, ts, unix.AT_SYMLINK_NOFOLLOW)
}

// FsMkdir is §3 fs/mkdir (0755 less the umask). Without parents, an
// existing path or a missing parent is an error; with it, missing parents
// are made and an existing directory is fine.
func (w *Workspace) FsMkdir(p protocol.FsMkdirParams) error {
	rel, err := relPath(p.Path)
	if err != nil {
		return err
	}
	err = w.writeView(func(v *view) error {
		if p.Parents {
			return v.mkdirAll(rel)
		}
		dir, base, err := v.parent(rel)
		if err != nil {
			return err
		}
		defer unix.Close(dir)
		err = unix.Mkdirat(dir, base, 0o755)
		if err == unix.EEXIST {
			return fmt.Errorf("%w: it exists (pass parents: true to accept an existing directory)", ErrInvalid)
		}
		return err
	})
	if rel == "." && !p.Parents && err != nil {
		err = fmt.Errorf("%w: it is the workspace itself, which exists", ErrInvalid)
	}
	return w.fsErr("fs/mkdir", rel, err)
}
