package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

// `cellbox export`: PROTOCOL.md §11 workspace/export from a terminal, as
// a review command (review.go) over the user's daemon.

// addExportFlags adds export's flags, after the CELLBOX_* variables: what
// one export writes is the command line's.
func addExportFlags(fs *flag.FlagSet, cfg *reviewConfig) {
	fs.StringVar(&cfg.format, "format", "dir", "what to write: `FORMAT` dir (the bundle) or oci (the bundle and an OCI image layout in DEST/image)")
	fs.StringVar(&cfg.command, "command", "", "the `CMD` that runs the app, split into words as a shell does with quotes (default: found)")
	fs.StringVar(&cfg.base, "base", "", "the OCI image layout `DIR[:TAG]` the image is built on (default: found in $XDG_DATA_HOME/cellbox/images)")
	fs.IntVar(&cfg.port, "port", 0, "the `PORT` the app serves on (default: found, or the framework's)")
	fs.StringVar(&cfg.workspace, "workspace", "", "the workspace: its `ID`, or its project directory (default: as the other review commands find it)")
}

// printExportFlags prints export's flags, which no environment variable
// sets.
func printExportFlags(w io.Writer) {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	var cfg reviewConfig
	addExportFlags(fs, &cfg)
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		fmt.Fprintf(w, "  --%s %s\n      %s", f.Name, name, usage)
		if f.DefValue != "" && f.DefValue != "0" {
			fmt.Fprintf(w, ", default %s", f.DefValue)
		}
		fmt.Fprint(w, " (no environment variable sets it)\n")
	})
}

func (r *review) export(ctx context.Context, args []string) int {
	dest, err := filepath.Abs(args[0])
	if err != nil {
		return r.fail(fmt.Errorf("DEST %s: %w", args[0], err))
	}
	p := protocol.WorkspaceExportParams{WorkspaceID: r.ws.WorkspaceID, Dest: dest, Format: protocol.ExportFormat(r.cfg.format), Port: r.cfg.port}
	if r.cfg.command != "" {
		if p.Command, err = shellWords(r.cfg.command); err != nil {
			return r.fail(fmt.Errorf("--command: %w", err))
		}
	}
	if r.cfg.base != "" {
		dir, tag := r.cfg.base, ""
		if i := strings.LastIndexByte(dir, ':'); i > strings.LastIndexByte(dir, '/') {
			dir, tag = dir[:i], dir[i:]
		}
		abs, err := filepath.Abs(dir)
		if err != nil {
			return r.fail(fmt.Errorf("--base %s: %w", r.cfg.base, err))
		}
		p.Base = abs + tag
	}
	start := time.Now()
	var res protocol.WorkspaceExportResult
	if err := r.c.Call(ctx, protocol.MethodWorkspaceExport, p, &res); err != nil {
		return r.fail(err)
	}
	if r.cfg.json {
		return r.printJSON(res)
	}
	fmt.Fprintf(r.stdout, "exported the %s app to %s (%s, %s) in %v\n", res.App, res.Path, plural(res.Files, "file"),
		byteCount(res.Bytes), time.Since(start).Round(time.Millisecond))
	fmt.Fprintf(r.stdout, "command: %s\n", strings.Join(res.Command, " "))
	if res.Image != nil {
		fmt.Fprintf(r.stdout, "image: %s in %s (on %s)\n", res.Image.Digest, res.Image.Layout, res.Image.Base)
	}
	fmt.Fprintf(r.stdout, "run it: see %s\n", filepath.Join(res.Path, "README.md"))
	return 0
}

// openID finds the open workspace of id.
func (r *review) openID(ctx context.Context, id string) error {
	var list protocol.WorkspaceListResult
	if err := r.c.Call(ctx, protocol.MethodWorkspaceList, protocol.WorkspaceListParams{}, &list); err != nil {
		return err
	}
	for _, w := range list.Workspaces {
		if w.WorkspaceID == id {
			r.ws, r.root = w, w.Root
			return nil
		}
	}
	return fmt.Errorf("--workspace %s: no such workspace open in the daemon, and no such directory", id)
}

// byteCount says n bytes for a person.
func byteCount(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// shellWords splits s into words as a POSIX shell does with quotes and
// backslashes (no expansions).
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	in := false // a word is under way
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("an unclosed ' quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			in = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New(`an unclosed " quote`)
			}
			in = true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			in = true
		case c == ' ' || c == '\t' || c == '\n':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	if len(words) == 0 {
		return nil, errors.New("no words")
	}
	return words, nil
}
