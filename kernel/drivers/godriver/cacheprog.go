package godriver

import (
	"bufio"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

// CacheEntry is the re-exec entry of the build cache program (GOCACHEPROG)
// the go command runs in a sandbox: two layers in the go command's own
// cache layout, a shared one read-only (the user's, which the daemon fills
// on the host: SharedCache) and the workspace's, writable, in the
// sandbox's /tmp. A get looks in the workspace's layer, then the shared
// one; a put writes the workspace's.
const CacheEntry = "go-cache"

func init() {
	sandbox.Register(CacheEntry, cacheMain)
}

// cacheRequest and cacheResponse are the go command's protocol
// (cmd/go/internal/cacheprog).
type cacheRequest struct {
	ID       int64
	Command  string
	ActionID []byte `json:",omitempty"`
	OutputID []byte `json:",omitempty"`
	BodySize int64  `json:",omitempty"`
}

type cacheResponse struct {
	ID            int64
	Err           string     `json:",omitempty"`
	KnownCommands []string   `json:",omitempty"`
	Miss          bool       `json:",omitempty"`
	OutputID      []byte     `json:",omitempty"`
	Size          int64      `json:",omitempty"`
	Time          *time.Time `json:",omitempty"`
	DiskPath      string     `json:",omitempty"`
}

// hashSize is the size of an action or output ID (SHA-256).
const hashSize = 32

// maxCacheBody bounds one object put into the cache.
const maxCacheBody = 1 << 30

// cacheMain serves the protocol on stdin and stdout: args are the shared
// layer (may be empty) and the writable one.
func cacheMain(args []string) int {
	if len(args) != 2 || args[1] == "" {
		fmt.Fprintln(os.Stderr, "go cache: want two arguments, the shared and the writable directory")
		return 2
	}
	c := &layers{shared: args[0], own: args[1]}
	if err := os.MkdirAll(c.own, 0o700); err != nil {
		fmt.Fprintf(os.Stderr, "go cache: %v\n", err)
		return 1
	}
	if err := c.serve(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "go cache: %v\n", err)
		return 1
	}
	return 0
}

type layers struct{ shared, own string }

func (c *layers) serve(in io.Reader, out io.Writer) error {
	r := bufio.NewReaderSize(in, 64<<10)
	w := bufio.NewWriter(out)
	enc := json.NewEncoder(w)
	send := func(res cacheResponse) error {
		if err := enc.Encode(res); err != nil {
			return err
		}
		return w.Flush()
	}
	if err := send(cacheResponse{KnownCommands: []string{"get", "put", "close"}}); err != nil {
		return err
	}
	dec := json.NewDecoder(r)
	for {
		var req cacheRequest
		if err := dec.Decode(&req); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read a request: %w", err)
		}
		var res cacheResponse
		switch req.Command {
		case "get":
			res = c.get(req.ActionID)
		case "put":
			var body []byte
			if req.BodySize > 0 {
				if req.BodySize > maxCacheBody {
					return fmt.Errorf("a put of %d bytes", req.BodySize)
				}
				var s string
				if err := dec.Decode(&s); err != nil {
					return fmt.Errorf("read a put's body: %w", err)
				}
				b, err := base64.StdEncoding.DecodeString(s)
				if err != nil || int64(len(b)) != req.BodySize {
					return fmt.Errorf("a put's body is not %d bytes of base64", req.BodySize)
				}
				body = b
			}
			res = c.put(req.ActionID, req.OutputID, body)
		case "close":
			return send(cacheResponse{ID: req.ID})
		default:
			res.Err = "unknown command " + req.Command
		}
		res.ID = req.ID
		if err := send(res); err != nil {
			return err
		}
	}
}

// file is the go command's name for an ID's file in a cache directory:
// xx/hex-a for an action's entry, xx/hex-d for an output.
func file(dir string, id []byte, kind string) string {
	h := hex.EncodeToString(id)
	return filepath.Join(dir, h[:2], h+"-"+kind)
}

// get finds an action's entry in the own layer, then the shared one.
func (c *layers) get(action []byte) cacheResponse {
	if len(action) != hashSize {
		return cacheResponse{Miss: true}
	}
	for _, dir := range []string{c.own, c.shared} {
		if dir == "" {
			continue
		}
		out, size, tm, ok := readEntry(file(dir, action, "a"), action)
		if !ok {
			continue
		}
		p := file(dir, out, "d")
		if fi, err := os.Stat(p); err != nil || fi.Size() != size {
			continue
		}
		t := time.Unix(0, tm)
		return cacheResponse{OutputID: out, Size: size, Time: &t, DiskPath: p}
	}
	return cacheResponse{Miss: true}
}

// entry is "v1 <hex action> <hex output> <size, 20 wide> <unixnano, 20 wide>\n".
const entrySize = 2 + 1 + 2*hashSize + 1 + 2*hashSize + 1 + 20 + 1 + 20 + 1

func readEntry(p string, action []byte) (out []byte, size, tm int64, ok bool) {
	b, err := os.ReadFile(p)
	if err != nil || len(b) != entrySize || !strings.HasPrefix(string(b), "v1 ") || b[entrySize-1] != '\n' {
		return nil, 0, 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 5 || f[1] != hex.EncodeToString(action) {
		return nil, 0, 0, false
	}
	out, err = hex.DecodeString(f[2])
	if err != nil || len(out) != hashSize {
		return nil, 0, 0, false
	}
	size, err1 := strconv.ParseInt(f[3], 10, 64)
	tm, err2 := strconv.ParseInt(f[4], 10, 64)
	if err1 != nil || err2 != nil || size < 0 {
		return nil, 0, 0, false
	}
	return out, size, tm, true
}

// put writes an output and its action's entry to the own layer.
func (c *layers) put(action, output, body []byte) cacheResponse {
	if len(action) != hashSize || len(output) != hashSize {
		return cacheResponse{Err: "bad action or output id"}
	}
	p := file(c.own, output, "d")
	if err := writeAtomic(p, body); err != nil {
		return cacheResponse{Err: err.Error()}
	}
	entry := fmt.Sprintf("v1 %x %x %20d %20d\n", action, output, len(body), time.Now().UnixNano())
	if err := writeAtomic(file(c.own, action, "a"), []byte(entry)); err != nil {
		return cacheResponse{Err: err.Error()}
	}
	return cacheResponse{DiskPath: p}
}

func writeAtomic(p string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".tmp-")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(0o644) // as the go command's own cache files
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), p)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
