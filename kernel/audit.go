package kernel

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// auditKeep is how many rotated audit logs are kept (executions.jsonl.1 ..).
const auditKeep = 3

// auditRecord is one line of the audit log: one execution.
type auditRecord struct {
	Time           time.Time `json:"time"`
	Connection     string    `json:"connection,omitempty"`
	Kernel         string    `json:"kernel"`
	Language       string    `json:"language"`
	Workspace      string    `json:"workspace"`
	ExecutionID    string    `json:"executionId"`
	ExecutionCount int       `json:"executionCount,omitempty"`
	CodeBytes      int       `json:"codeBytes"`
	CodeSHA256     string    `json:"codeSha256"`
	Status         string    `json:"status"`
	DurationMs     int64     `json:"durationMs"`
	Error          string    `json:"error,omitempty"`
}

// auditLog appends JSON lines to DIR/executions.jsonl and rotates it by
// size. It records what ran, not the code itself (its size and sha256).
type auditLog struct {
	dir, path string
	maxBytes  int64
	log       *slog.Logger

	// mu guards f and size, and orders the lines; it is taken with no
	// other lock held.
	mu   sync.Mutex
	f    *os.File
	size int64
}

func newAuditLog(dir string, maxBytes int64, log *slog.Logger) *auditLog {
	return &auditLog{dir: dir, path: filepath.Join(dir, "executions.jsonl"), maxBytes: maxBytes, log: log}
}

func (a *auditLog) write(r *auditRecord) {
	b, err := json.Marshal(r)
	if err != nil {
		return
	}
	b = append(b, '\n')
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.open(); err != nil {
		a.log.Warn("cannot write the audit log", "err", err)
		return
	}
	if a.size+int64(len(b)) > a.maxBytes && a.size > 0 {
		if err := a.rotate(); err != nil {
			a.log.Warn("cannot rotate the audit log", "err", err)
		}
		if err := a.open(); err != nil {
			a.log.Warn("cannot write the audit log", "err", err)
			return
		}
	}
	n, err := a.f.Write(b)
	a.size += int64(n)
	if err != nil {
		a.log.Warn("cannot write the audit log", "err", err)
	}
}

func (a *auditLog) open() error {
	if a.f != nil {
		return nil
	}
	if err := os.MkdirAll(a.dir, 0o700); err != nil {
		return fmt.Errorf("create audit dir %s: %w", a.dir, err)
	}
	f, err := os.OpenFile(a.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open audit log %s: %w", a.path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("stat audit log %s: %w", a.path, err)
	}
	a.f, a.size = f, fi.Size()
	return nil
}

// rotate moves executions.jsonl to .1, .1 to .2, ..., dropping the oldest.
func (a *auditLog) rotate() error {
	a.f.Close()
	a.f = nil
	for i := auditKeep - 1; i >= 1; i-- {
		_ = os.Rename(fmt.Sprintf("%s.%d", a.path, i), fmt.Sprintf("%s.%d", a.path, i+1))
	}
	if err := os.Rename(a.path, a.path+".1"); err != nil {
		return fmt.Errorf("rotate audit log %s: %w", a.path, err)
	}
	return nil
}

func (a *auditLog) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f != nil {
		a.f.Close()
		a.f = nil
	}
}
