package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// envName is the CELLBOX_* variable that sets a flag: --max-message-bytes
// is CELLBOX_MAX_MESSAGE_BYTES.
func envName(flagName string) string {
	return "CELLBOX_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parseFlags applies CELLBOX_* variables, then the command line (which wins).
func parseFlags(fs *flag.FlagSet, args []string) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		v, ok := os.LookupEnv(envName(f.Name))
		if !ok || err != nil {
			return
		}
		if serr := f.Value.Set(v); serr != nil {
			err = fmt.Errorf("%s=%q: %w", envName(f.Name), v, serr)
		}
	})
	if err != nil {
		return err
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// printFlags documents a flag set with the environment variable of each.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		fmt.Fprintf(w, "  --%s", f.Name)
		if name != "" {
			fmt.Fprintf(w, " %s", name)
		}
		fmt.Fprintf(w, "\n      %s\n      env %s", usage, envName(f.Name))
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "[]" {
			fmt.Fprintf(w, ", default %s", f.DefValue)
		}
		fmt.Fprintln(w)
	})
}

// defaultStateDir is $XDG_STATE_HOME/cellbox, else ~/.local/state/cellbox.
func defaultStateDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "cellbox")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "state", "cellbox")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("cellbox-%d", os.Getuid()))
}

// defaultPackageCache is the package cache's directory: under the user's
// cache directory, shared by every daemon of the user.
func defaultPackageCache() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "cellbox", "packages")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("cellbox-%d", os.Getuid()), "packages")
}

// listFlag is a repeatable, comma-separable string flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// splitCommand splits a command line at its first "--": the flags before
// it, the program and its arguments after it (none without "--").
func splitCommand(args []string) (flags, argv []string) {
	for i, a := range args {
		if a == "--" {
			return args[:i], args[i+1:]
		}
	}
	return args, nil
}
