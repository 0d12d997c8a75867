package protocol

import "time"

// Decisions this file makes where PROTOCOL.md §3 (files) is silent, each
// marked "Extension:" on its type or field:
//   - fs/read without an encoding answers utf8 when the content is valid
//     UTF-8 and base64 otherwise; the result says which.
//   - The params of fs/stat, fs/delete, fs/rename and fs/mkdir, which §3
//     gives only as "as their names say": fs/stat answers a FileEntry,
//     fs/delete of a non-empty directory needs recursive, fs/rename fails on
//     an existing target without overwrite, fs/mkdir creates missing parents
//     with parents.
//   - FileEntry carries mode (the permission bits), paths relative to the
//     workspace, and size 0 for a directory.
//   - fs/watch globs are matched against workspace-relative paths, with `**`
//     matching any number of directories.
//   - Extension: a name whose bytes are not UTF-8, which a JSON string cannot
//     carry, is sent quoted as git quotes it (C escapes, octal for bytes
//     that are not UTF-8: "caf\351.txt"), and so is a name that begins
//     with `"`; every other name is sent as it is. A path a client sends
//     that begins and ends with `"` and unquotes cleanly means the unquoted
//     name. This holds for every path of §3 (fs/*, fs/didChange,
//     workspace/changes, diff, commit, discard).

// Encoding is how file or terminal content is carried in a JSON string.
type Encoding string

// Encodings (§3 fs/read, §5 pty/open).
const (
	// EncodingUTF8: the content is the text itself.
	EncodingUTF8 Encoding = "utf8"
	// EncodingBase64: the content is the bytes in standard base64.
	EncodingBase64 Encoding = "base64"
)

// FileType is the type of a directory entry.
type FileType string

// File types (§3 fs/list). A symlink is reported as itself, not followed.
const (
	FileTypeFile    FileType = "file"
	FileTypeDir     FileType = "dir"
	FileTypeSymlink FileType = "symlink"
)

// FsReadParams are the params of `fs/read`.
type FsReadParams struct {
	WorkspaceID string `json:"workspaceId"`
	// Path is relative to the workspace.
	Path string `json:"path"`
	// Encoding of the result's content. Extension: absent means utf8 if
	// the file is valid UTF-8, else base64.
	Encoding Encoding `json:"encoding,omitempty"`
}

// FsReadResult is the result of `fs/read`.
type FsReadResult struct {
	Content string `json:"content"`
	// Encoding is the encoding of Content.
	Encoding Encoding `json:"encoding"`
	// Size is the file's size in bytes.
	Size int64 `json:"size"`
	// Mtime is the file's modification time (RFC 3339).
	Mtime time.Time `json:"mtime"`
}

// FsWriteParams are the params of `fs/write`.
type FsWriteParams struct {
	WorkspaceID string `json:"workspaceId"`
	// Path is relative to the workspace.
	Path    string `json:"path"`
	Content string `json:"content"`
	// Encoding of Content; defaults to utf8.
	Encoding Encoding `json:"encoding,omitempty"`
	// CreateParents creates missing parent directories.
	CreateParents bool `json:"createParents,omitempty"`
}

// FsWriteResult is the result of `fs/write`.
type FsWriteResult struct {
	// Size is the file's size in bytes after the write.
	Size int64 `json:"size"`
	// Mtime is the file's modification time (RFC 3339).
	Mtime time.Time `json:"mtime"`
}

// FsListParams are the params of `fs/list`.
type FsListParams struct {
	WorkspaceID string `json:"workspaceId"`
	// Path is the directory to list, relative to the workspace; absent: its root.
	Path string `json:"path,omitempty"`
	// Recursive lists the whole tree below Path.
	Recursive bool `json:"recursive,omitempty"`
}

// FsListResult is the result of `fs/list`.
type FsListResult struct {
	Entries []FileEntry `json:"entries"`
}

// FileEntry is an entry of `fs/list` and the result of `fs/stat`.
type FileEntry struct {
	// Path is relative to the workspace (not to the listed directory).
	Path string   `json:"path"`
	Type FileType `json:"type"`
	// Size in bytes: of the file; of the link itself for a symlink.
	// Extension: 0 for a directory.
	Size int64 `json:"size"`
	// Mtime is the modification time (RFC 3339).
	Mtime time.Time `json:"mtime"`
	// Extension: Mode is the permission bits (for example 0o644, sent as
	// the number 420).
	Mode uint32 `json:"mode"`
}

// FsStatParams are the params of `fs/stat`, which answers a FileEntry.
// Extension: §3 gives fs/stat "as its name says".
type FsStatParams struct {
	WorkspaceID string `json:"workspaceId"`
	// Path is relative to the workspace.
	Path string `json:"path"`
}

// FsDeleteParams are the params of `fs/delete`, which answers {}.
// Extension: §3 gives fs/delete "as its name says".
type FsDeleteParams struct {
	WorkspaceID string `json:"workspaceId"`
	// Path is relative to the workspace.
	Path string `json:"path"`
	// Recursive is needed to delete a directory that is not empty.
	Recursive bool `json:"recursive,omitempty"`
}

// FsRenameParams are the params of `fs/rename`, which answers {}.
// Extension: §3 gives fs/rename "as its name says".
type FsRenameParams struct {
	WorkspaceID string `json:"workspaceId"`
	// From and To are relative to the workspace.
	From string `json:"from"`
	To   string `json:"to"`
	// Overwrite replaces an existing To; without it that is an error.
	Overwrite bool `json:"overwrite,omitempty"`
}

// FsMkdirParams are the params of `fs/mkdir`, which answers {}.
// Extension: §3 gives fs/mkdir "as its name says".
type FsMkdirParams struct {
	WorkspaceID string `json:"workspaceId"`
	// Path is relative to the workspace.
	Path string `json:"path"`
	// Parents creates missing parents and accepts an existing directory.
	Parents bool `json:"parents,omitempty"`
}

// FsWatchParams are the params of `fs/watch`.
type FsWatchParams struct {
	WorkspaceID string `json:"workspaceId"`
	// Globs select the paths reported; absent: every path. Extension: they
	// match workspace-relative paths, `*` within a name and `**` across
	// directories.
	Globs []string `json:"globs,omitempty"`
}

// FsWatchResult is the result of `fs/watch`.
type FsWatchResult struct {
	WatchID string `json:"watchId"`
}

// FsUnwatchParams are the params of `fs/unwatch`.
type FsUnwatchParams struct {
	WatchID string `json:"watchId"`
}

// FileChangeType is what happened to a path (§3 fs/didChange).
type FileChangeType string

// File change types.
const (
	FileChangeCreated FileChangeType = "created"
	FileChangeChanged FileChangeType = "changed"
	FileChangeDeleted FileChangeType = "deleted"
)

// FsDidChangeParams are the params of the `fs/didChange` notification.
// Bursts are coalesced (one entry per path per batch) and batched within
// about 50 ms.
type FsDidChangeParams struct {
	WatchID     string       `json:"watchId"`
	WorkspaceID string       `json:"workspaceId"`
	Changes     []FileChange `json:"changes"`
	// Extension: Overflow is true when changes were dropped (this watch's
	// queue was full, or the kernel's inotify queue overflowed): the client
	// should rescan what it watches. Changes may still list some.
	Overflow bool `json:"overflow,omitempty"`
}

// FileChange is one entry of fs/didChange.
type FileChange struct {
	// Path is relative to the workspace.
	Path string         `json:"path"`
	Type FileChangeType `json:"type"`
}
