package jupyter

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
)

func pair(t *testing.T, transport string) (*KernelSockets, *ClientSockets, *ConnectionInfo) {
	t.Helper()
	ci := &ConnectionInfo{Transport: transport, IP: "127.0.0.1", Key: "secret", SignatureScheme: "hmac-sha256"}
	if transport == "ipc" {
		ci.IP = filepath.Join(t.TempDir(), "k")
		ci.ShellPort, ci.IOPubPort, ci.StdinPort, ci.ControlPort, ci.HBPort = 1, 2, 3, 4, 5
	}
	if err := ci.Validate(); err != nil {
		t.Fatal(err)
	}
	signer, err := NewSigner(ci.SignatureScheme, []byte(ci.Key))
	if err != nil {
		t.Fatal(err)
	}
	k, err := Listen(context.Background(), ci, signer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	csigner, _ := NewSigner(ci.SignatureScheme, []byte(ci.Key))
	c, err := Dial(context.Background(), ci, csigner, NewSession("test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return k, c, ci
}

// TestRoundTrip sends a request on shell and control and a reply back, on
// both transports, and pings the heartbeat.
func TestRoundTrip(t *testing.T) {
	for _, tr := range []string{"tcp", "ipc"} {
		t.Run(tr, func(t *testing.T) {
			k, c, _ := pair(t, tr)
			cs := NewSession("client")
			ks := NewSession("kernel")
			for _, ch := range []struct{ client, kernel *Socket }{{c.Shell, k.Shell}, {c.Control, k.Control}} {
				req, _ := cs.New("kernel_info_request", nil, map[string]any{})
				if err := ch.client.Send(req); err != nil {
					t.Fatal(err)
				}
				got, err := ch.kernel.Recv()
				if err != nil {
					t.Fatal(err)
				}
				if got.Header.MsgType != "kernel_info_request" || got.Header.MsgID != req.Header.MsgID || len(got.Identities) != 1 {
					t.Fatalf("kernel got %+v", got)
				}
				rep, _ := ks.New("kernel_info_reply", got, map[string]any{"status": "ok"})
				rep.Identities = got.Identities
				if err := ch.kernel.Send(rep); err != nil {
					t.Fatal(err)
				}
				back, err := ch.client.Recv()
				if err != nil {
					t.Fatal(err)
				}
				if back.ParentHeader().MsgID != req.Header.MsgID || !bytes.Contains(back.Content, []byte(`"ok"`)) {
					t.Fatalf("client got %+v", back)
				}
			}
			ping := [][]byte{[]byte("ping")}
			if err := c.HB.SendMulti(zmqMsg(ping)); err != nil {
				t.Fatal(err)
			}
			pong, err := c.HB.Recv()
			if err != nil || string(pong.Frames[0]) != "ping" {
				t.Fatalf("heartbeat: %v %q", err, pong.Frames)
			}
		})
	}
}

// TestSignatureChecked: a message signed with another key, or sent twice,
// is refused before it is parsed; the socket goes on.
func TestSignatureChecked(t *testing.T) {
	s, _ := NewSigner("hmac-sha256", []byte("k"))
	other, _ := NewSigner("hmac-sha256", []byte("not-k"))
	m, _ := NewSession("u").New("execute_request", nil, map[string]any{"code": "1"})
	bad, _ := other.Encode(m)
	if _, err := s.Decode(bad); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("wrong key: %v", err)
	}
	good, _ := s.Encode(m)
	if _, err := s.Decode(good); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decode(good); !errors.Is(err, ErrReplayed) {
		t.Fatalf("replay: %v", err)
	}
	if _, err := NewSigner("hmac-md5", []byte("k")); err == nil {
		t.Fatal("hmac-md5 accepted")
	}
}

// TestDecodeBad: malformed frames are errors, never panics.
func TestDecodeBad(t *testing.T) {
	s, _ := NewSigner("", nil)
	cases := map[string][][]byte{
		"no delimiter": {[]byte("a"), []byte("b")},
		"short":        {delimiter, nil, []byte("{}")},
		"not object":   {delimiter, nil, []byte("[]"), []byte("{}"), []byte("{}"), []byte("{}")},
		"no msg_type":  {delimiter, nil, []byte(`{"msg_id":"x"}`), []byte("{}"), []byte("{}"), []byte("{}")},
		"bad json":     {delimiter, nil, []byte(`{"msg_type":`), []byte("{}"), []byte("{}"), []byte("{}")},
	}
	for name, frames := range cases {
		if _, err := s.Decode(frames); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzDecode(f *testing.F) {
	s, _ := NewSigner("", nil)
	m, _ := NewSession("u").New("execute_request", nil, map[string]any{"code": "1"})
	frames, _ := s.Encode(m)
	f.Add(bytes.Join(frames, []byte{0}))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = s.Decode(bytes.Split(b, []byte{0}))
	})
}

func FuzzFrameGuard(f *testing.F) {
	f.Add(append(make([]byte, 64), 0x04, 5, 'R', 'E', 'A', 'D', 'Y'))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 0 {
			b[0] = 0xff
		}
		g := frameGuard{maxMessage: 1 << 10, maxFrames: 8}
		// Fed whole or byte by byte, the guard decides the same.
		err1 := g.feed(b)
		g2 := frameGuard{maxMessage: 1 << 10, maxFrames: 8}
		var err2 error
		for i := range b {
			if err2 = g2.feed(b[i : i+1]); err2 != nil {
				break
			}
		}
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("whole: %v, byte by byte: %v", err1, err2)
		}
	})
}

// TestHugeFrameRefused: a peer that claims a frame of 2^62 bytes is cut
// off before anything is allocated; the kernel's socket serves the next
// client.
func TestHugeFrameRefused(t *testing.T) {
	k, _, ci := pair(t, "tcp")
	conn, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", itoa(ci.ShellPort)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	greeting := make([]byte, 64)
	greeting[0], greeting[9], greeting[10] = 0xff, 0x7f, 3
	copy(greeting[12:], "NULL")
	var hdr [9]byte
	hdr[0] = flagLong
	binary.BigEndian.PutUint64(hdr[1:], 1<<62)
	if _, err := conn.Write(append(greeting, hdr[:]...)); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 4096)
	for {
		if _, err := conn.Read(buf); err != nil {
			break // the kernel closed the connection
		}
	}
	// Another client still gets through.
	signer, _ := NewSigner(ci.SignatureScheme, []byte(ci.Key))
	c2, err := Dial(context.Background(), ci, signer, NewSession("second"))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	req, _ := NewSession("second").New("kernel_info_request", nil, map[string]any{})
	if err := c2.Shell.Send(req); err != nil {
		t.Fatal(err)
	}
	got, err := k.Shell.Recv()
	if err != nil || got.Header.MsgID != req.Header.MsgID {
		t.Fatalf("after the huge frame: %v %+v", err, got)
	}
}

// TestSilentPeerIsDropped: a connection that never greets is closed after
// the handshake timeout (the library completes handshakes one at a time,
// so it would otherwise hold up every later client), and a client connects
// after it.
func TestSilentPeerIsDropped(t *testing.T) {
	old := handshakeTimeout.Load()
	handshakeTimeout.Store(int64(300 * time.Millisecond))
	defer handshakeTimeout.Store(old)
	k, _, ci := pair(t, "tcp")
	silent, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", itoa(ci.ControlPort)))
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	_ = silent.SetReadDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 4096)
	for {
		if _, err := silent.Read(buf); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("the silent connection was not closed by the kernel")
			}
			break
		}
	}
	handshakeTimeout.Store(old)
	signer, _ := NewSigner(ci.SignatureScheme, []byte(ci.Key))
	c2, err := Dial(context.Background(), ci, signer, NewSession("second"))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	req, _ := NewSession("second").New("shutdown_request", nil, json.RawMessage(`{"restart":false}`))
	if err := c2.Control.Send(req); err != nil {
		t.Fatal(err)
	}
	got, err := k.Control.Recv()
	if err != nil || got.Header.MsgType != "shutdown_request" {
		t.Fatalf("%v %+v", err, got)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func zmqMsg(frames [][]byte) zmq4.Msg { return zmq4.NewMsgFrom(frames...) }

// countConn counts the writes that reach the network.
type countConn struct {
	net.Conn
	writes [][]byte
}

func (c *countConn) SetWriteDeadline(time.Time) error { return nil }

func (c *countConn) Write(p []byte) (int, error) {
	c.writes = append(c.writes, append([]byte(nil), p...))
	return len(p), nil
}

// TestWritesGathered: the greeting goes out at once, and a message's
// frames, written header and body apart as the library does, go out as
// one write when its last frame is complete.
func TestWritesGathered(t *testing.T) {
	cc := &countConn{}
	c := &guardConn{Conn: cc, w: frameGuard{maxMessage: 1 << 40, maxFrames: 1 << 20}}
	greeting := make([]byte, 64)
	greeting[0] = 0xff
	c.Write(greeting)
	if len(cc.writes) != 1 {
		t.Fatalf("greeting: %d writes", len(cc.writes))
	}
	frames := [][]byte{[]byte("<IDS|MSG>"), []byte("sig"), bytes.Repeat([]byte("h"), 300)}
	var want []byte
	for i, f := range frames {
		flag := byte(0)
		if i < len(frames)-1 {
			flag = flagMore
		}
		var hdr []byte
		if len(f) > 255 {
			hdr = make([]byte, 9)
			hdr[0] = flag | flagLong
			binary.BigEndian.PutUint64(hdr[1:], uint64(len(f)))
		} else {
			hdr = []byte{flag, byte(len(f))}
		}
		c.Write(hdr)
		if len(cc.writes) != 1 {
			t.Fatalf("frame %d: wrote before the message was whole", i)
		}
		c.Write(f)
		want = append(append(want, hdr...), f...)
	}
	if len(cc.writes) != 2 || !bytes.Equal(cc.writes[1], want) {
		t.Fatalf("%d writes; the message's: %q", len(cc.writes), cc.writes[len(cc.writes)-1])
	}
}

// TestStalledPeerWriteTimesOut: a peer that stops reading does not hold a
// writer (the library's PUB writes to subscribers in turn, under a lock)
// past the write timeout; its connection is closed.
func TestStalledPeerWriteTimesOut(t *testing.T) {
	old := writeTimeout.Load()
	writeTimeout.Store(int64(200 * time.Millisecond))
	defer writeTimeout.Store(old)
	a, b := net.Pipe() // b never reads
	defer b.Close()
	released := false
	c := &guardConn{Conn: a, w: frameGuard{maxMessage: 1 << 40, maxFrames: 1 << 20}, release: func() { released = true }}
	big := make([]byte, coalesceMax+1)
	big[0] = 0xff // a greeting's first byte, then what follows is the rest of it and beyond
	done := make(chan error, 1)
	go func() { _, err := c.Write(big); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a write nobody reads succeeded")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the write to a peer that does not read did not time out")
	}
	if !released {
		t.Fatal("the connection was not closed")
	}
}
