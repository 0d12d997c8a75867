// Package pty runs terminals (PROTOCOL.md §5): programs on a pseudo-terminal
// inside a workspace's sandbox, streamed to the connections attached to
// them. It imports workspace and protocol only (ARCHITECTURE.md); rpc
// translates the pty/ methods into calls on a [Manager] and implements
// [Sink] on its connections.
//
// # A terminal
//
// [Manager.Open] starts the program with workspace.ProcSpec.PTY: the
// sandbox's spawner opens a terminal on the sandbox's own devpts and makes
// it the program's controlling terminal in a new session, and hands the
// master back. The default program is the daemon user's login shell (from
// the host's passwd entry) if it exists inside the sandbox, else /bin/bash,
// else /bin/sh; it gets the sandbox's default environment, TERM=xterm-256color
// and the client's env; cwd is relative to /workspace. Without a workspace
// the terminal gets a scratch workspace of its own, discarded when the
// program ends.
//
// One reader goroutine per terminal reads the master into chunks of at most
// [ChunkBytes] (64 KiB) of terminal bytes: it waits for the first byte and
// then takes whatever else is already there, so a keystroke's echo goes out
// at once and a busy program's output in big chunks. Each chunk gets the
// next seq (from 1) and goes into the scrollback and to every attached
// [Sink]. In utf8 the bytes are carried as a kernel's streams are
// ([protocol.UTF8Chunker]): a chunk never splits a UTF-8 sequence (an
// incomplete tail waits for the next read) and each byte that is not UTF-8
// becomes one U+FFFD; base64 is byte-exact. Input (pty/write) is queued, in order, and a writer
// goroutine hands it to the master; at most [MaxInputBytes] wait for a
// program that does not read. Resize sets the size on the master; the kernel
// sends the program SIGWINCH. Sizes are 1..[MaxCols] x 1..[MaxRows].
//
// When the program ends, the reader drains what it left (until the terminal
// hangs up, or 100 ms without output when a background process still holds
// it; at most 2 s or 4 MiB), closes the master and sends pty/exit: exitCode,
// or for a death by signal exitCode 128+N and the signal's name. An ended
// terminal stays attachable for [DefaultExitedTTL] (its last output and its
// exit) unless closed. Close kills the program's whole tree (its session,
// process group and every descendant, with SIGKILL); pty/exit still goes out.
//
// # Scrollback and attach
//
// Each terminal keeps its most recent chunks in a ring bounded by bytes
// ([DefaultScrollbackBytes], 1 MiB, counting 64 bytes per chunk on top of
// its data). [Session.Attach] replays what the ring holds from fromSeq, then
// the live output follows with no gap and no repeat (delivery to sinks is
// serialized per terminal). The result says whether the ring had to drop
// some of what was asked for, and the first seq the client gets.
//
// # Flow control
//
// Each attached sink acknowledges output with pty/ack (every chunk up to a
// seq). The terminal counts, per sink, the bytes sent and not acknowledged
// (data plus 64 per chunk). When any sink is above the high-water mark
// ([DefaultHighWater], 256 KiB) the reader stops reading the master, so the
// kernel's terminal buffer fills and the program blocks on write, until acks
// bring every sink under the low-water mark ([DefaultLowWater], 128 KiB).
// The daemon never buffers a terminal's output beyond its ring: a client
// that does not keep up slows that terminal only. A terminal with no sink
// attached is never paused: it reads into the ring, dropping the oldest
// output, so a detached terminal never wedges its program. The slowest
// attached viewer sets the pace for all viewers of a terminal; a connection
// that ends is detached (rpc calls [Manager.DetachAll]), and a sink whose
// delivery fails is detached.
//
// # Ownership (PROTOCOL.md §2)
//
// Terminals belong to the daemon. The connection that opened a terminal is
// attached to it; pty/attach attaches others (a second viewer, a browser tab
// that reconnects). A connection that drops is detached and the terminal
// runs on, its output kept in the ring. A connection's shutdown request
// stops the terminals it opened ([Manager.CloseOpenedBy]), even those other
// connections are attached to: attaching never makes a connection an owner,
// so a viewer cannot keep alive, or end, what another client started.
//
// # Limits
//
// At most [DefaultMaxPtys] (64; --max-terminals) terminals run in a daemon and
// [DefaultMaxPerWorkspace] (16) in one workspace; more are refused with
// [ErrLimit] (-32012). Ended terminals do not count.
package pty
