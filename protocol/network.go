package protocol

// §9 Network and packages.

// WorkspaceSetNetworkParams are the params of `workspace/setNetwork`.
type WorkspaceSetNetworkParams struct {
	WorkspaceID string `json:"workspaceId"`
	// Network is "none" or "allowlist" ("host" is a sandbox of another
	// kind: kernel/start asks for it).
	Network NetworkMode `json:"network"`
	// Allow replaces the workspace's rules: "host", "*.domain",
	// "host:port", or an IP literal or CIDR with an optional port.
	Allow []string `json:"allow,omitempty"`
}

// NetworkBlockedParams are the params of the `network/blocked`
// notification: a connection a program of the workspace tried and the
// daemon refused.
type NetworkBlockedParams struct {
	WorkspaceID string `json:"workspaceId"`
	// Host is the name or address the program asked for, as it asked.
	Host string `json:"host"`
	Port int    `json:"port"`
	// Reason is a sentence for the user ("pypi.org is not in the
	// allowlist").
	Reason string `json:"reason"`
	// KernelID and ExecutionID name the execution that asked, when one
	// kernel of the workspace was running one (a proxy sees a connection,
	// not a process). Extension: Rule is the rule that would allow it
	// ("host:port"), for an editor's "allow" action.
	KernelID    string `json:"kernelId,omitempty"`
	ExecutionID string `json:"executionId,omitempty"`
	Rule        string `json:"rule,omitempty"`
}

// PackageManager names a package manager of workspace/install.
type PackageManager string

// Package managers.
const (
	PackageManagerPip PackageManager = "pip"
	PackageManagerNpm PackageManager = "npm"
)

// WorkspaceInstallParams are the params of `workspace/install`.
type WorkspaceInstallParams struct {
	WorkspaceID string         `json:"workspaceId"`
	Manager     PackageManager `json:"manager"`
	// Packages are requirement specifiers as the manager takes them
	// ("requests==2.31.0", "lodash@4"); options are refused.
	Packages      []string      `json:"packages"`
	WorkDoneToken ProgressToken `json:"workDoneToken,omitempty"`
}

// InstalledPackage is one package of workspace/install's result.
type InstalledPackage struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// WorkspaceInstallResult is the result of `workspace/install`.
type WorkspaceInstallResult struct {
	// Installed are the packages the install put into /env (the requested
	// ones and their dependencies).
	Installed []InstalledPackage `json:"installed"`
	// CacheHits counts the package files the daemon's cache already held.
	CacheHits       int   `json:"cacheHits"`
	DownloadedBytes int64 `json:"downloadedBytes"`
	DurationMs      int64 `json:"durationMs"`
}
