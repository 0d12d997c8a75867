package protocol

// DaemonStatsParams are the params of `daemon/stats` (always {}).
type DaemonStatsParams struct{}

// DaemonStats is the result of `daemon/stats`.
type DaemonStats struct {
	UptimeMs   int64           `json:"uptimeMs"`
	Kernels    int             `json:"kernels"`
	Ptys       int             `json:"ptys"`
	Workspaces int             `json:"workspaces"`
	Watches    int             `json:"watches"`
	Executions ExecutionCounts `json:"executions"`
	LatencyMs  LatencyMs       `json:"latencyMs"`
	// MemoryBytes is the daemon's resident set size.
	MemoryBytes int64 `json:"memoryBytes"`
	// Extension: open client connections (stdio and websocket).
	Connections int `json:"connections"`
}

// ExecutionCounts counts finished executions by status.
type ExecutionCounts struct {
	Total       int64 `json:"total"`
	Ok          int64 `json:"ok"`
	Error       int64 `json:"error"`
	Timeout     int64 `json:"timeout"`
	Interrupted int64 `json:"interrupted"`
}

// LatencyMs are request latency percentiles, in milliseconds, over the most
// recent requests the daemon served.
type LatencyMs struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
}
