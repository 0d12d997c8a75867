package rpc

import (
	"context"
	"sync"

	"github.com/cellbox-dev/cellbox/protocol"
)

// Wire order.
//
// Requests run concurrently, so a slow one never delays a fast one. But
// where a client pipelines requests on the same resource, the order it
// sends them in is the order it means: twenty kernel/execute of a
// notebook's "Run all" must run as sent, an fs/write followed by an
// fs/read must read what was written, and an fs/write followed by a
// kernel/execute must run the code on the written file. Goroutine
// scheduling cannot promise that, so the order is fixed when a request is
// read: on the read goroutine, before the request is released, it takes a
// turn on each resource it touches (its claims). The request then waits,
// on its own goroutine, for the turns before it, runs its ordered part,
// and passes the turn on.
//
// A claim is shared (reads: fs/read, workspace/changes, ...) or exclusive
// (writes and mutations: fs/write, workspace/commit, kernel/restart, ...).
// A shared turn waits for the exclusive turns before it; an exclusive turn
// waits for every turn before it. The ordered part of most methods is the
// whole method; kernel/execute passes its turn on as soon as its code is
// in the kernel's queue (the kernel runs its queue in order), so the
// requests behind it do not wait for the code to finish.
//
// Turns are per connection: requests of different connections have no
// order between them. Keys name resources: "w:ID" a workspace, "k:ID" a
// kernel. Terminal writes and resizes are ordered on the read goroutine
// itself (see pty.go).

// claim is one resource a request takes a turn on.
type claim struct {
	key       string
	exclusive bool
}

// sequencer hands out turns on a connection's resources in wire order.
type sequencer struct {
	mu   sync.Mutex
	keys map[string]*keyTurns
}

// keyTurns is the tail of one resource's line: the last exclusive turn
// and the shared turns taken since.
type keyTurns struct {
	last   chan struct{}   // closed when the last exclusive turn is done; nil if none
	shared []chan struct{} // shared turns since last
}

// turn is a request's place in line on each resource it claimed.
type turn struct {
	s     *sequencer
	wait  []chan struct{} // turns this one waits for
	mine  []chan struct{} // closed when this one is done
	claim []claim
	once  sync.Once
}

// take queues a turn for claims. It must be called on the read goroutine,
// in wire order; it never blocks on other requests.
func (s *sequencer) take(claims []claim) *turn {
	t := &turn{s: s, claim: claims}
	if len(claims) == 0 {
		return t
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keys == nil {
		s.keys = make(map[string]*keyTurns)
	}
	for _, cl := range claims {
		kt := s.keys[cl.key]
		if kt == nil {
			kt = &keyTurns{}
			s.keys[cl.key] = kt
		}
		ch := make(chan struct{})
		t.mine = append(t.mine, ch)
		if kt.last != nil {
			t.wait = append(t.wait, kt.last)
		}
		if cl.exclusive {
			t.wait = append(t.wait, kt.shared...)
			kt.last, kt.shared = ch, nil
		} else {
			kt.shared = append(kt.shared, ch)
		}
	}
	return t
}

// await waits until every turn before this one is done. When ctx ends
// first it returns ctx's error, and the turn is passed on only once the
// turns before it are done, so the requests behind keep their order.
func (t *turn) await(ctx context.Context) error {
	for i, ch := range t.wait {
		select {
		case <-ch:
		case <-ctx.Done():
			rest := t.wait[i:]
			t.once.Do(func() {
				go func() {
					for _, ch := range rest {
						<-ch
					}
					t.release()
				}()
			})
			return ctx.Err()
		}
	}
	return nil
}

// done passes the turn on; it may be called more than once.
func (t *turn) done() {
	t.once.Do(t.release)
}

func (t *turn) release() {
	if len(t.mine) == 0 {
		return
	}
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, cl := range t.claim {
		ch := t.mine[i]
		close(ch)
		kt := s.keys[cl.key]
		if kt == nil {
			continue
		}
		// Forget what no later turn can wait for, so the map stays as
		// small as the requests in flight.
		if kt.last == ch {
			kt.last = nil
		}
		for j, sh := range kt.shared {
			if sh == ch {
				kt.shared = append(kt.shared[:j], kt.shared[j+1:]...)
				break
			}
		}
		if kt.last == nil && len(kt.shared) == 0 {
			delete(s.keys, cl.key)
		}
	}
}

// size is the number of resources with turns outstanding (for tests).
func (s *sequencer) size() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.keys)
}

// turnKey is the context key of a request's *turn.
type turnKey struct{}

// passTurn ends the ordered part of the request running under ctx early:
// the requests behind it on the same resources may go on. A method whose
// ordered part is shorter than the whole call (kernel/execute) calls it.
func passTurn(ctx context.Context) {
	if t, ok := ctx.Value(turnKey{}).(*turn); ok {
		t.done()
	}
}

// Which resources each method takes a turn on, and how.
type orderClass int

const (
	orderNone       orderClass = iota
	orderWSRead                // shared on its workspace
	orderWSWrite               // exclusive on its workspace
	orderKernel                // exclusive on its kernel, shared on the kernel's workspace
	orderKernelRead            // shared on its kernel
)

var orderOf = map[string]orderClass{
	protocol.MethodFsRead:                    orderWSRead,
	protocol.MethodFsList:                    orderWSRead,
	protocol.MethodFsStat:                    orderWSRead,
	protocol.MethodFsWatch:                   orderWSRead,
	protocol.MethodWorkspaceChanges:          orderWSRead,
	protocol.MethodWorkspaceDiff:             orderWSRead,
	protocol.MethodWorkspaceCheckpoints:      orderWSRead,
	protocol.MethodWorkspaceExportGit:        orderWSRead,
	protocol.MethodWorkspaceExport:           orderWSRead,
	protocol.MethodWorkspaceExposePort:       orderWSRead,
	protocol.MethodWorkspaceExportPatch:      orderWSRead,
	protocol.MethodWorkspaceFork:             orderWSRead,
	protocol.MethodWorkspaceExecutions:       orderWSRead,
	protocol.MethodFsWrite:                   orderWSWrite,
	protocol.MethodFsDelete:                  orderWSWrite,
	protocol.MethodFsRename:                  orderWSWrite,
	protocol.MethodFsMkdir:                   orderWSWrite,
	protocol.MethodWorkspaceCommit:           orderWSWrite,
	protocol.MethodWorkspaceDiscard:          orderWSWrite,
	protocol.MethodWorkspaceCheckpoint:       orderWSWrite,
	protocol.MethodWorkspaceSetNetwork:       orderWSWrite,
	protocol.MethodWorkspaceRestore:          orderWSWrite,
	protocol.MethodWorkspaceDeleteCheckpoint: orderWSWrite,
	protocol.MethodWorkspaceClose:            orderWSWrite,
	protocol.MethodKernelExecute:             orderKernel,
	protocol.MethodKernelInterrupt:           orderKernel,
	protocol.MethodKernelRestart:             orderKernel,
	protocol.MethodKernelShutdown:            orderKernel,
	protocol.MethodKernelComplete:            orderKernelRead,
	protocol.MethodKernelInspect:             orderKernelRead,
	protocol.MethodKernelIsComplete:          orderKernelRead,
	protocol.MethodKernelVariables:           orderKernelRead,
	protocol.MethodKernelHistory:             orderKernelRead,
}

// claimsOf returns the turns a request of method takes. It runs on the
// read goroutine, so it only decodes ids and looks kernels up.
func (c *conn) claimsOf(method string, raw []byte) []claim {
	class := orderOf[method]
	if class == orderNone {
		return nil
	}
	var ids struct {
		WorkspaceID string `json:"workspaceId"`
		KernelID    string `json:"kernelId"`
	}
	if decodeParams(raw, &ids) != nil {
		return nil // the handler answers the bad params
	}
	switch class {
	case orderWSRead, orderWSWrite:
		if ids.WorkspaceID == "" {
			return nil
		}
		return []claim{{key: "w:" + ids.WorkspaceID, exclusive: class == orderWSWrite}}
	case orderKernel, orderKernelRead:
		if ids.KernelID == "" {
			return nil
		}
		cl := []claim{{key: "k:" + ids.KernelID, exclusive: class == orderKernel}}
		if class == orderKernel && c.d.opts.Kernels != nil {
			if k, err := c.d.opts.Kernels.Get(ids.KernelID); err == nil {
				cl = append(cl, claim{key: "w:" + k.Workspace().ID()})
			}
		}
		return cl
	}
	return nil
}
