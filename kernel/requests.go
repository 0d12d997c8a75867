package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/cellbox-dev/cellbox/protocol"
)

// driverCall sends a request other than execute and decodes its result.
func (k *Kernel) driverCall(ctx context.Context, r *request, out any) error {
	k.mu.Lock()
	d, st := k.drv, k.state
	k.nextReq++
	r.ID = "r" + strconv.Itoa(k.nextReq)
	reason := k.deadReason
	k.mu.Unlock()
	if st == protocol.KernelStateDead || d == nil {
		return k.deadErr(reason)
	}
	raw, err := d.call(ctx, r)
	if err != nil {
		return k.driverErr(err)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s kernel: decode %s reply: %w", k.lang, r.Op, err)
	}
	return nil
}

// Complete is kernel/complete; positions count code points.
func (k *Kernel) Complete(ctx context.Context, code string, cursor int) (*protocol.KernelCompleteResult, error) {
	var res protocol.KernelCompleteResult
	if err := k.driverCall(ctx, &request{Op: "complete", Code: code, CursorPos: cursor}, &res); err != nil {
		return nil, err
	}
	if res.Matches == nil {
		res.Matches = []string{}
	}
	return &res, nil
}

// Inspect is kernel/inspect.
func (k *Kernel) Inspect(ctx context.Context, code string, cursor, detail int) (*protocol.KernelInspectResult, error) {
	var res protocol.KernelInspectResult
	if err := k.driverCall(ctx, &request{Op: "inspect", Code: code, CursorPos: cursor, DetailLevel: detail}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// IsComplete is kernel/isComplete.
func (k *Kernel) IsComplete(ctx context.Context, code string) (*protocol.KernelIsCompleteResult, error) {
	if f := drivers[k.lang].isComplete; f != nil {
		if len(code) > k.m.opts.MaxCodeBytes {
			return nil, fmt.Errorf("%w: code is %d bytes, over the %d-byte maximum (maxCodeBytes)", ErrLimit, len(code), k.m.opts.MaxCodeBytes)
		}
		res := f(k.m, code)
		return &res, nil
	}
	var res protocol.KernelIsCompleteResult
	if err := k.driverCall(ctx, &request{Op: "isComplete", Code: code}, &res); err != nil {
		return nil, err
	}
	switch res.Status {
	case protocol.IsCompleteStatusComplete, protocol.IsCompleteStatusIncomplete, protocol.IsCompleteStatusInvalid:
	default:
		res.Status = protocol.IsCompleteStatusUnknown
	}
	return &res, nil
}

// Variables is kernel/variables.
func (k *Kernel) Variables(ctx context.Context) (*protocol.KernelVariablesResult, error) {
	if slices.Contains(k.langInfo.Unsupported, protocol.MethodKernelVariables) {
		return nil, fmt.Errorf("%w: kernel/variables is not supported by %s kernels (languages[].unsupported)", ErrInvalid, k.lang)
	}
	var res protocol.KernelVariablesResult
	if err := k.driverCall(ctx, &request{Op: "variables"}, &res); err != nil {
		return nil, err
	}
	if res.Variables == nil {
		res.Variables = []protocol.Variable{}
	}
	return &res, nil
}

// History is kernel/history, newest last.
func (k *Kernel) History(p protocol.KernelHistoryParams) (*protocol.KernelHistoryResult, error) {
	if p.N < 0 {
		return nil, fmt.Errorf("%w: invalid params for kernel/history: field \"n\" must not be negative", ErrInvalid)
	}
	if p.Pattern != "" {
		if _, err := path.Match(p.Pattern, ""); err != nil {
			return nil, fmt.Errorf("%w: invalid params for kernel/history: field \"pattern\" %q is not a glob: %v", ErrInvalid, p.Pattern, err)
		}
	}
	k.mu.Lock()
	all := append([]protocol.HistoryEntry(nil), k.history...)
	k.mu.Unlock()
	out := []protocol.HistoryEntry{}
	seen := map[string]bool{}
	for i := len(all) - 1; i >= 0; i-- {
		h := all[i]
		if p.Pattern != "" && !globMatch(p.Pattern, h.Code) {
			continue
		}
		if p.Unique {
			if seen[h.Code] {
				continue
			}
			seen[h.Code] = true
		}
		out = append(out, h)
		if p.N > 0 && len(out) == p.N {
			break
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return &protocol.KernelHistoryResult{Entries: out}, nil
}

// globMatch matches a history glob against code: `*` and `?` also match
// newlines and slashes.
func globMatch(pattern, code string) bool {
	r := strings.NewReplacer("/", "\x01", "\n", "\x02")
	ok, _ := path.Match(r.Replace(pattern), r.Replace(code))
	return ok
}
