package pty

// ring is a terminal's scrollback: the most recent output chunks, bounded
// by the bytes of their data plus a per-chunk overhead (so a flood of
// one-byte chunks is bounded too). The oldest chunks go first.
type ring struct {
	max    int
	bytes  int
	chunks []chunk // chunks[head:] are held, oldest first
	head   int
	// next is the seq the next chunk will have: chunks are pushed in seq
	// order with no gap, so a held chunk's seq says where it is.
	next int64
}

type chunk struct {
	seq  int64
	data string
}

// chunkOverhead is what one chunk costs beyond its data, in the ring's
// and in flow control's accounting.
const chunkOverhead = 64

func newRing(max int) *ring { return &ring{max: max, next: 1} }

func cost(data string) int { return len(data) + chunkOverhead }

// push adds the next chunk and drops the oldest ones over the bound. A
// chunk larger than the whole ring is not kept.
func (r *ring) push(c chunk) {
	r.next = c.seq + 1
	r.chunks = append(r.chunks, c)
	r.bytes += cost(c.data)
	for r.bytes > r.max && r.head < len(r.chunks) {
		r.bytes -= cost(r.chunks[r.head].data)
		r.chunks[r.head] = chunk{}
		r.head++
	}
	// Reuse the front of the slice once half of it is dead.
	if r.head > 64 && r.head*2 > len(r.chunks) {
		n := copy(r.chunks, r.chunks[r.head:])
		clear(r.chunks[n:])
		r.chunks = r.chunks[:n]
		r.head = 0
	}
}

// oldest is the seq of the oldest chunk held (next when none is).
func (r *ring) oldest() int64 {
	if r.head == len(r.chunks) {
		return r.next
	}
	return r.chunks[r.head].seq
}

// since returns a copy of the held chunks with seq >= from.
func (r *ring) since(from int64) []chunk {
	held := r.chunks[r.head:]
	if len(held) == 0 || from >= r.next {
		return nil
	}
	i := 0
	if from > held[0].seq {
		i = int(from - held[0].seq)
	}
	return append([]chunk(nil), held[i:]...)
}
