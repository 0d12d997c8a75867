package mcp

import "strconv"

// capture is one output stream of an execution (stdout or stderr) as this
// server keeps it: its first keepBytes in full (the resource
// cellbox://executions/ID/stdout serves them), and always its last
// tailBytes, so the tail of a stream longer than keepBytes is still shown.
type capture struct {
	keep, tailMax int
	head          []byte // the first keep bytes
	tail          []byte // the last bytes written past head (at most 2*tailMax, trimmed to tailMax)
	total         int64  // bytes written
}

func newCapture(keep, tail int) capture { return capture{keep: keep, tailMax: tail} }

// write appends p. Chunks come whole from kernel/output (never a split
// UTF-8 sequence); head is cut on a UTF-8 boundary when p crosses keep.
func (c *capture) write(p string) {
	c.total += int64(len(p))
	if room := c.keep - len(c.head); room > 0 {
		if len(p) <= room {
			c.head = append(c.head, p...)
			return
		}
		cut := cutUTF8(p[:room])
		c.head = append(c.head, cut...)
		c.keep = len(c.head) // the rest goes to tail
		p = p[len(cut):]
	}
	c.tail = append(c.tail, p...)
	if len(c.tail) > 2*c.tailMax {
		drop := len(c.tail) - c.tailMax
		drop += utf8Start(string(c.tail[drop:min(len(c.tail), drop+4)]))
		c.tail = append(c.tail[:0], c.tail[drop:]...)
	}
}

// window is the text written from offset from on, with gap bytes in its
// middle that were not kept (past keep, before the kept tail).
func (c *capture) window(from int64) (text string, gap int64) {
	if from >= c.total {
		return "", 0
	}
	headLen := int64(len(c.head))
	var headPart []byte
	if from < headLen {
		headPart = c.head[from:]
	}
	if c.total == headLen {
		return string(headPart), 0
	}
	start := max(from, headLen) // first byte wanted past head
	tailStart := c.total - int64(len(c.tail))
	if start >= tailStart {
		return string(headPart) + string(c.tail[start-tailStart:]), 0
	}
	return string(headPart) + string(c.tail), tailStart - start
}

// whole is what the stream's resource serves: the kept head, and a line
// saying how much more there was.
func (c *capture) whole() string {
	if c.total == int64(len(c.head)) {
		return string(c.head)
	}
	return string(c.head) + "\n[cellbox: the output goes on for " + strconv.FormatInt(c.total-int64(len(c.head)), 10) + " bytes that were not kept; the last of them were:]\n" + string(c.tail)
}

// size is what the capture holds in memory.
func (c *capture) size() int { return len(c.head) + len(c.tail) }
