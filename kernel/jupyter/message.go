package jupyter

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"sync"
	"time"
)

// ProtocolVersion is the Jupyter messaging protocol this package speaks.
const ProtocolVersion = "5.3"

// delimiter separates a message's routing identities from its body.
var delimiter = []byte("<IDS|MSG>")

// Header is a message's header (and, as a reply's parent_header, the header
// of the request it answers).
type Header struct {
	MsgID    string `json:"msg_id"`
	Session  string `json:"session"`
	Username string `json:"username"`
	Date     string `json:"date"`
	MsgType  string `json:"msg_type"`
	Version  string `json:"version"`
}

// Message is one Jupyter message.
type Message struct {
	// Identities route a message through a ROUTER socket (on iopub, the
	// topic).
	Identities [][]byte
	Header     Header
	// RawHeader is the header as received; a reply's parent header is it,
	// byte for byte, so fields this package does not know survive.
	RawHeader json.RawMessage
	// Parent, Metadata and Content are JSON objects.
	Parent   json.RawMessage
	Metadata json.RawMessage
	Content  json.RawMessage
	Buffers  [][]byte
}

// Limits of a message's parts that are not bounded by the transport.
const (
	maxIdentities = 64
	maxBuffers    = 256
)

// ErrBadSignature is the error for a message whose HMAC does not match.
var ErrBadSignature = errors.New("jupyter: bad message signature")

// ErrReplayed is the error for a signed message seen before (a replay).
var ErrReplayed = errors.New("jupyter: replayed message (its signature was seen before)")

// Signer signs and checks messages with the connection's key. A zero key
// means unsigned messages, as Jupyter allows.
type Signer struct {
	key  []byte
	pool sync.Pool // hash.Hash

	mu   sync.Mutex
	seen map[string]struct{} // signatures of received messages
	old  map[string]struct{} // the previous generation of seen
}

// seenLimit bounds the remembered signatures: a generation holds this many,
// and two generations are kept, so a replay within the last 65,536
// messages is refused (jupyter_client keeps the same number).
const seenLimit = 1 << 16

// NewSigner returns a signer for scheme (only "hmac-sha256", or "" with an
// empty key).
func NewSigner(scheme string, key []byte) (*Signer, error) {
	if len(key) > 0 && scheme != "hmac-sha256" {
		return nil, fmt.Errorf("jupyter: signature scheme %q is not supported (hmac-sha256 is)", scheme)
	}
	s := &Signer{key: append([]byte(nil), key...), seen: map[string]struct{}{}}
	s.pool.New = func() any { return hmac.New(sha256.New, s.key) }
	return s, nil
}

func (s *Signer) sign(parts ...[]byte) []byte {
	if len(s.key) == 0 {
		return nil
	}
	h := s.pool.Get().(hash.Hash)
	h.Reset()
	for _, p := range parts {
		h.Write(p)
	}
	sum := h.Sum(nil)
	s.pool.Put(h)
	out := make([]byte, hex.EncodedLen(len(sum)))
	hex.Encode(out, sum)
	return out
}

// check verifies a received signature and that it is new.
func (s *Signer) check(sig []byte, parts ...[]byte) error {
	if len(s.key) == 0 {
		return nil
	}
	if !hmac.Equal(sig, s.sign(parts...)) {
		return ErrBadSignature
	}
	k := string(sig)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.seen[k]; ok {
		return ErrReplayed
	}
	if _, ok := s.old[k]; ok {
		return ErrReplayed
	}
	if len(s.seen) >= seenLimit {
		s.old, s.seen = s.seen, make(map[string]struct{}, seenLimit)
	}
	s.seen[k] = struct{}{}
	return nil
}

// Decode parses and checks a message's frames: identities, the delimiter,
// the signature (checked before anything is parsed), header, parent
// header, metadata, content, buffers.
func (s *Signer) Decode(frames [][]byte) (*Message, error) {
	i := 0
	for i < len(frames) && !bytes.Equal(frames[i], delimiter) {
		i++
	}
	if i == len(frames) {
		return nil, errors.New("jupyter: message without the <IDS|MSG> delimiter")
	}
	if i > maxIdentities {
		return nil, fmt.Errorf("jupyter: message with %d routing identities (limit %d)", i, maxIdentities)
	}
	body := frames[i+1:]
	if len(body) < 5 {
		return nil, fmt.Errorf("jupyter: message with %d frames after the delimiter, want at least 5", len(body))
	}
	if len(body)-5 > maxBuffers {
		return nil, fmt.Errorf("jupyter: message with %d buffers (limit %d)", len(body)-5, maxBuffers)
	}
	if err := s.check(body[0], body[1], body[2], body[3], body[4]); err != nil {
		return nil, err
	}
	m := &Message{Identities: frames[:i:i], RawHeader: body[1], Parent: body[2], Metadata: body[3], Content: body[4], Buffers: body[5:]}
	for name, part := range map[string][]byte{"header": body[1], "parent_header": body[2], "metadata": body[3], "content": body[4]} {
		if !isObject(part) {
			return nil, fmt.Errorf("jupyter: message %s is not a JSON object", name)
		}
	}
	if err := json.Unmarshal(body[1], &m.Header); err != nil {
		return nil, fmt.Errorf("jupyter: message header: %w", err)
	}
	if m.Header.MsgType == "" {
		return nil, errors.New("jupyter: message header without msg_type")
	}
	return m, nil
}

// isObject reports whether b is one valid JSON object.
func isObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) >= 2 && b[0] == '{' && json.Valid(b)
}

// Encode makes a message's frames, signed.
func (s *Signer) Encode(m *Message) ([][]byte, error) {
	header := m.RawHeader
	if header == nil {
		var err error
		if header, err = json.Marshal(m.Header); err != nil {
			return nil, fmt.Errorf("jupyter: encode header: %w", err)
		}
	}
	parent, meta, content := orEmpty(m.Parent), orEmpty(m.Metadata), orEmpty(m.Content)
	frames := make([][]byte, 0, len(m.Identities)+6+len(m.Buffers))
	frames = append(frames, m.Identities...)
	frames = append(frames, delimiter, s.sign(header, parent, meta, content), header, parent, meta, content)
	frames = append(frames, m.Buffers...)
	return frames, nil
}

func orEmpty(b json.RawMessage) []byte {
	if len(b) == 0 {
		return []byte("{}")
	}
	return b
}

// Session makes the headers of the messages one side sends.
type Session struct {
	ID       string
	Username string
}

// NewSession returns a session with a fresh id.
func NewSession(username string) Session {
	return Session{ID: NewID(), Username: username}
}

// NewID returns a random UUID (version 4) as Jupyter's message ids are.
func NewID() string {
	var u [16]byte
	_, _ = rand.Read(u[:]) // crypto/rand.Read never fails (Go 1.24+)
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:])
}

// New makes a message of msgType answering parent (nil for none), with
// content marshalled from content (a json.RawMessage is used as is).
func (ss Session) New(msgType string, parent *Message, content any) (*Message, error) {
	m := &Message{
		Header: Header{
			MsgID: NewID(), Session: ss.ID, Username: ss.Username, MsgType: msgType, Version: ProtocolVersion,
			Date: time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"),
		},
		Metadata: json.RawMessage("{}"),
	}
	if parent != nil {
		m.Parent = parent.RawHeader
	}
	switch c := content.(type) {
	case json.RawMessage:
		m.Content = c
	default:
		b, err := json.Marshal(content)
		if err != nil {
			return nil, fmt.Errorf("jupyter: encode %s content: %w", msgType, err)
		}
		m.Content = b
	}
	return m, nil
}

// ParentHeader decodes a message's parent header (zero when it has none).
func (m *Message) ParentHeader() Header {
	var h Header
	_ = json.Unmarshal(m.Parent, &h)
	return h
}
