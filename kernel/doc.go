// Package kernel runs persistent language kernels (PROTOCOL.md §4): a
// driver program in its own language (drivers/driver.py, driver.js,
// driver.sh, embedded) started by its interpreter in a workspace's sandbox,
// speaking framed JSON with the [Manager] over pipes (drivers/README.md is
// that contract).
//
// A [Manager] starts kernels, queues their executions in order, interrupts,
// restarts and shuts them down, enforces their limits and culls idle ones;
// [Manager.Close] is the daemon ending. A kernel's output flows one way:
// the driver's read loop reports events, which are untrusted input and
// validated (README.md, "The driver's events are untrusted input"), into
// the kernel's output, which numbers them, keeps a bounded replay for
// kernel/attach and delivers them to [Sink]s. Its delivery lock is held
// while sinks are called, so a sink must not call into the kernel; who is
// attached has a lock of its own, so a stalled client holds up no one
// else's kernel/list, detach or culling. No other mutex of the package is
// held while another is taken.
//
// Kernels need Linux (their sandboxes do); elsewhere the package builds and
// a start fails saying so.
package kernel
