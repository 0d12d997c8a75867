package workspace

// ChangeOptions choose the changes ListChanges, DiffChanges and the exports
// take.
type ChangeOptions struct {
	// Paths keeps the changes at or below these workspace paths (none:
	// every change).
	Paths []string
	// Ignored keeps the changes of paths the project's git ignores
	// (.gitignore, .git/info/exclude, core.excludesFile, and anything
	// below a .git directory); without it they are left out and counted.
	Ignored bool
}
