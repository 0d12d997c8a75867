package workspace

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sort"
	"time"

	"golang.org/x/sys/unix"
)

// The upper layer by stat: what incremental checkpoints and the automatic
// ring's "nothing changed" test compare, read without a file's content.
//
// A file's stat identity (inode, size, mtime, ctime) names its content: a
// write, a chmod, a truncate or a utimensat changes the ctime, which code
// cannot set back, and a rename over the path brings another inode. One
// hole stays: a filesystem stamps times from a coarse clock, so a write in
// the same tick as the stat that recorded a file leaves its identity as
// it was. settle closes it: before any content is read, it waits until the
// filesystem's clock (the ctime a change gets now, read from a probe file
// on the same filesystem) has passed every ctime the walk recorded. A
// change made after that gets a later ctime; one made before is in the
// content read after it. Where the clock does not pass in time (a file
// stamped in the future), those files get no identity and the state no
// sum: they are copied again, and nothing is taken for unchanged.

// statID is the stat identity of an upper-layer file or symlink.
type statID struct {
	Ino     uint64 `json:"ino"`
	Size    int64  `json:"size"`
	MtimeNs int64  `json:"mtimeNs"`
	CtimeNs int64  `json:"ctimeNs"`
}

// upperState is the upper layer as one walk by stat saw it.
type upperState struct {
	// ids are the identities of its regular files and symlinks, by
	// workspace path.
	ids map[string]statID
	// sum hashes every entry of the upper layer (type, mode, identity,
	// opaque directories) and the project's entry at each file's path: the
	// same sum, the same changes. "": not settled, equal to nothing.
	sum string
	// maxCtime is the latest ctime the walk met (ns).
	maxCtime int64
}

// settleMax bounds how long settle waits for the filesystem's clock (a
// variable for a test).
var settleMax = 1500 * time.Millisecond

// readUpper walks the upper layer and the project beside it by stat. The
// caller holds the file-operation lock.
func (w *Workspace) readUpper(ctx context.Context) (*upperState, error) {
	var us *upperState
	var err error
	for range quotaRetries {
		if us, err = w.walkUpperState(ctx); !errors.Is(err, errTreeChanged) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("stat the upper layer of workspace %s: %w", w.id, err)
	}
	return us, nil
}

// upperStateOrNil is readUpper for a checkpoint: a walk that fails (a
// directory code made unreadable) costs the checkpoint its sharing and
// its sum, not its existence. Only the end of ctx is an error.
func (w *Workspace) upperStateOrNil(ctx context.Context) (*upperState, error) {
	us, err := w.readUpper(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		w.m.log.Warn("checkpoint without sharing: the upper layer could not be read by stat", "workspace", w.id, "err", err)
		return nil, nil
	}
	return us, nil
}

func (w *Workspace) walkUpperState(ctx context.Context) (*upperState, error) {
	up, err := unix.Open(w.UpperDir(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open the upper layer: %w", err)
	}
	proj, err := w.openProject()
	if err != nil {
		unix.Close(up)
		return nil, err
	}
	var ups, projs dirChain
	defer ups.closeAll()
	defer projs.closeAll()
	if err := ups.push(up); err != nil {
		unix.Close(proj)
		return nil, err
	}
	if err := projs.push(proj); err != nil {
		return nil, err
	}
	type frame struct {
		parentLen int
		names     []string // still to read, sorted backwards (popped from the end)
	}
	sortedNames := func(fd int) ([]string, error) {
		names, err := readNames(fd)
		sort.Sort(sort.Reverse(sort.StringSlice(names)))
		return names, err
	}
	names, err := sortedNames(up)
	if err != nil {
		return nil, fmt.Errorf("read . in the upper layer: %w", err)
	}
	us := &upperState{ids: make(map[string]statID)}
	h := sha256.New()
	var rec []byte
	var pathBuf []byte
	frames := []frame{{names: names}}
	for n := 0; len(frames) > 0; n++ {
		if n%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		f := &frames[len(frames)-1]
		if len(f.names) == 0 {
			pathBuf = pathBuf[:f.parentLen]
			frames = frames[:len(frames)-1]
			if err := ups.pop(); err != nil {
				return nil, err
			}
			if err := projs.pop(); err != nil {
				return nil, err
			}
			continue
		}
		name := f.names[len(f.names)-1]
		f.names = f.names[:len(f.names)-1]
		dir, pdir := ups.top(), projs.top()
		var stx unix.Statx_t
		if err := unix.Statx(dir, name, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, &stx); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // removed by code in the sandbox while we read
			}
			return nil, fmt.Errorf("stat %s in the upper layer: %w", joinRel(string(pathBuf), name), err)
		}
		var pst unix.Stat_t
		pexists := pdir >= 0 && unix.Fstatat(pdir, name, &pst, unix.AT_SYMLINK_NOFOLLOW) == nil
		p := joinRel(string(pathBuf), name)
		typ := uint32(stx.Mode) & unix.S_IFMT
		rec = append(rec[:0], p...)
		rec = append(rec, 0)
		rec = binary.LittleEndian.AppendUint32(rec, uint32(stx.Mode))
		if typ == unix.S_IFDIR {
			cfd, err := openDirAt(dir, name)
			if err != nil {
				if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
					continue
				}
				return nil, fmt.Errorf("open %s in the upper layer: %w", p, err)
			}
			opaque := byte(0)
			if xattrIs(cfd, "user.overlay.opaque", "y") {
				opaque = 1
			}
			ptyp := uint32(0)
			if pexists {
				ptyp = pst.Mode & unix.S_IFMT
			}
			rec = append(rec, opaque)
			rec = binary.LittleEndian.AppendUint32(rec, ptyp)
			h.Write(rec)
			cproj := -1
			if ptyp == unix.S_IFDIR {
				if fd, err := openDirAt(pdir, name); err == nil {
					cproj = fd
				}
			}
			names, err := sortedNames(cfd)
			if err != nil {
				unix.Close(cfd)
				if cproj >= 0 {
					unix.Close(cproj)
				}
				return nil, fmt.Errorf("read %s in the upper layer: %w", p, err)
			}
			perr := ups.push(cfd)
			if err := projs.push(cproj); perr == nil {
				perr = err
			}
			if perr != nil {
				return nil, perr
			}
			frames = append(frames, frame{parentLen: len(pathBuf), names: names})
			if len(pathBuf) > 0 {
				pathBuf = append(pathBuf, '/')
			}
			pathBuf = append(pathBuf, name...)
			continue
		}
		id := statID{Ino: stx.Ino, Size: int64(stx.Size), MtimeNs: statxNs(stx.Mtime), CtimeNs: statxNs(stx.Ctime)}
		us.maxCtime = max(us.maxCtime, id.CtimeNs)
		rec = binary.LittleEndian.AppendUint64(rec, id.Ino)
		rec = binary.LittleEndian.AppendUint64(rec, uint64(id.Size))
		rec = binary.LittleEndian.AppendUint64(rec, uint64(id.MtimeNs))
		rec = binary.LittleEndian.AppendUint64(rec, uint64(id.CtimeNs))
		rec = binary.LittleEndian.AppendUint32(rec, stx.Rdev_major)
		rec = binary.LittleEndian.AppendUint32(rec, stx.Rdev_minor)
		if pexists {
			rec = append(rec, 1)
			rec = binary.LittleEndian.AppendUint32(rec, pst.Mode)
			rec = binary.LittleEndian.AppendUint64(rec, pst.Ino)
			rec = binary.LittleEndian.AppendUint64(rec, uint64(pst.Size))
			rec = binary.LittleEndian.AppendUint64(rec, uint64(pst.Mtim.Nano()))
			rec = binary.LittleEndian.AppendUint64(rec, uint64(pst.Ctim.Nano()))
			us.maxCtime = max(us.maxCtime, pst.Ctim.Nano())
		} else {
			rec = append(rec, 0)
		}
		h.Write(rec)
		if typ == unix.S_IFREG || typ == unix.S_IFLNK {
			us.ids[p] = id
		}
	}
	us.sum = hex.EncodeToString(h.Sum(nil))
	return us, nil
}

func statxNs(t unix.StatxTimestamp) int64 { return t.Sec*1e9 + int64(t.Nsec) }

// settle waits until the filesystem's clock has passed every ctime us
// recorded (see above); past settleMax, the files not passed lose their
// identity and us its sum. us may be nil (nothing to settle).
func (w *Workspace) settle(ctx context.Context, us *upperState) error {
	if us == nil {
		return nil
	}
	deadline := time.Now().Add(settleMax)
	for {
		now, err := w.fsClock()
		if err != nil {
			w.m.log.Warn("checkpoint without sharing: the filesystem's clock could not be read", "workspace", w.id, "err", err)
			us.ids, us.sum = nil, ""
			return nil
		}
		if now > us.maxCtime {
			return nil
		}
		if time.Now().After(deadline) {
			for p, id := range us.ids {
				if id.CtimeNs >= now {
					delete(us.ids, p)
				}
			}
			us.sum = ""
			return nil
		}
		t := time.NewTimer(time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// fsClock is the ctime a change made now gets on the filesystem of the
// workspace's state (that of its upper layer): the ctime of the
// checkpoints directory, just changed by a chmod to its own mode (a chmod
// always changes the ctime).
func (w *Workspace) fsClock() (int64, error) {
	if err := os.MkdirAll(w.checkpointsDir(), 0o700); err != nil {
		return 0, err
	}
	fd, err := unix.Open(w.checkpointsDir(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	if err := unix.Fchmod(fd, 0o700); err != nil {
		return 0, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, err
	}
	return st.Ctim.Nano(), nil
}
