package jupyter

import (
	"context"
	"encoding/json"

	"github.com/cellbox-dev/cellbox/protocol"
)

func (s *Server) complete(ctx context.Context, m *Message) {
	var c struct {
		Code      string `json:"code"`
		CursorPos int    `json:"cursor_pos"`
	}
	if err := json.Unmarshal(m.Content, &c); err != nil {
		s.reply(m, "complete_reply", errorContent("BadRequest", err.Error()))
		return
	}
	var res protocol.KernelCompleteResult
	kid, err := s.kernel(ctx)
	if err == nil {
		err = s.o.Caller.Call(ctx, protocol.MethodKernelComplete, protocol.KernelCompleteParams{KernelID: kid, Code: c.Code, CursorPos: c.CursorPos}, &res)
	}
	if err != nil {
		s.reply(m, "complete_reply", errorContent("CellboxError", err.Error()))
		return
	}
	if res.Matches == nil {
		res.Matches = []string{}
	}
	s.reply(m, "complete_reply", map[string]any{"status": "ok", "matches": res.Matches, "cursor_start": res.CursorStart, "cursor_end": res.CursorEnd, "metadata": map[string]any{}})
}

func (s *Server) inspect(ctx context.Context, m *Message) {
	var c struct {
		Code        string `json:"code"`
		CursorPos   int    `json:"cursor_pos"`
		DetailLevel int    `json:"detail_level"`
	}
	if err := json.Unmarshal(m.Content, &c); err != nil {
		s.reply(m, "inspect_reply", errorContent("BadRequest", err.Error()))
		return
	}
	var res protocol.KernelInspectResult
	kid, err := s.kernel(ctx)
	if err == nil {
		err = s.o.Caller.Call(ctx, protocol.MethodKernelInspect, protocol.KernelInspectParams{KernelID: kid, Code: c.Code, CursorPos: c.CursorPos, DetailLevel: min(max(c.DetailLevel, 0), 1)}, &res)
	}
	if err != nil {
		s.reply(m, "inspect_reply", errorContent("CellboxError", err.Error()))
		return
	}
	data := res.Data
	if data == nil {
		data = protocol.MimeBundle{}
	}
	s.reply(m, "inspect_reply", map[string]any{"status": "ok", "found": res.Found, "data": data, "metadata": map[string]any{}})
}

func (s *Server) isComplete(ctx context.Context, m *Message) {
	var c struct {
		Code string `json:"code"`
	}
	if err := json.Unmarshal(m.Content, &c); err != nil {
		s.reply(m, "is_complete_reply", map[string]any{"status": "unknown"})
		return
	}
	var res protocol.KernelIsCompleteResult
	kid, err := s.kernel(ctx)
	if err == nil {
		err = s.o.Caller.Call(ctx, protocol.MethodKernelIsComplete, protocol.KernelIsCompleteParams{KernelID: kid, Code: c.Code}, &res)
	}
	if err != nil {
		s.reply(m, "is_complete_reply", map[string]any{"status": "unknown"})
		return
	}
	content := map[string]any{"status": string(res.Status)}
	if res.Status == protocol.IsCompleteStatusIncomplete {
		content["indent"] = res.Indent
	}
	s.reply(m, "is_complete_reply", content)
}

// historySession is the session number history entries carry: a cellbox
// kernel keeps one session's history.
const historySession = 1

func (s *Server) history(ctx context.Context, m *Message) {
	var c struct {
		Output  bool   `json:"output"`
		Access  string `json:"hist_access_type"`
		Start   int    `json:"start"`
		Stop    int    `json:"stop"`
		N       int    `json:"n"`
		Pattern string `json:"pattern"`
		Unique  bool   `json:"unique"`
	}
	if err := json.Unmarshal(m.Content, &c); err != nil {
		s.reply(m, "history_reply", errorContent("BadRequest", err.Error()))
		return
	}
	kid, err := s.kernel(ctx)
	if err != nil {
		s.reply(m, "history_reply", errorContent("CellboxError", err.Error()))
		return
	}
	p := protocol.KernelHistoryParams{KernelID: kid}
	switch c.Access {
	case "tail":
		p.N = c.N
	case "search":
		p.N, p.Pattern, p.Unique = c.N, c.Pattern, c.Unique
	}
	var res protocol.KernelHistoryResult
	if err := s.o.Caller.Call(ctx, protocol.MethodKernelHistory, p, &res); err != nil {
		s.reply(m, "history_reply", errorContent("CellboxError", err.Error()))
		return
	}
	hist := []any{}
	for _, h := range res.Entries {
		if c.Access == "range" && (h.ExecutionCount < c.Start || (c.Stop > 0 && h.ExecutionCount >= c.Stop)) {
			continue
		}
		var entry any = h.Code
		if c.Output {
			entry = []any{h.Code, nil} // outputs are not kept
		}
		hist = append(hist, []any{historySession, h.ExecutionCount, entry})
	}
	s.reply(m, "history_reply", map[string]any{"status": "ok", "history": hist})
}
