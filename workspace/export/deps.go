package export

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
)

// The packages of /env (the workspace's environment, where pip and npm
// install): what requirements.txt and package.json's dependencies say.

// Package is an installed package.
type Package struct {
	Name, Version string
}

// Bounds on reading /env, which the sandbox wrote.
const (
	maxPackages     = 10000
	maxMetadataRead = 64 << 10 // the head of a METADATA holds Name and Version
	maxJSONRead     = 4 << 20  // a package.json
)

// Variables so that the tests can lower them.
var (
	// maxEnvVisits bounds the entries of /env whose metadata is read
	// (every *.dist-info and node module, valid or not).
	maxEnvVisits = 2 * maxPackages
	// maxEnvRead bounds the bytes of metadata read from /env in all.
	maxEnvRead int64 = 64 << 20
)

// envReader reads /env's metadata within the bounds, until ctx ends.
type envReader struct {
	ctx    context.Context
	env    fs.FS
	visits int
	read   int64
}

// visit counts an entry whose metadata is read next.
func (r *envReader) visit() error {
	if err := r.ctx.Err(); err != nil {
		return err
	}
	if r.visits++; r.visits > maxEnvVisits {
		return fmt.Errorf("%w: more than %d packages' metadata in /env", ErrLimit, maxEnvVisits)
	}
	return nil
}

// head reads up to max bytes of name, counted against maxEnvRead.
func (r *envReader) head(name string, max int64) ([]byte, error) {
	b, err := readHead(r.env, name, min(max, maxEnvRead-r.read+1))
	r.read += int64(len(b))
	if r.read > maxEnvRead {
		return nil, fmt.Errorf("%w: more than %d MiB of package metadata in /env", ErrLimit, maxEnvRead>>20)
	}
	return b, err
}

// pipOwn are the packages a virtual environment holds for pip itself,
// which pip freeze leaves out too.
var pipOwn = []string{"pip", "setuptools", "wheel", "distribute", "pkg-resources"}

// PythonPackages lists the distributions in env's site-packages
// (lib/python3.*/site-packages/*.dist-info/METADATA: Name and Version),
// sorted by name, without pip's own. env may be nil. The reading is
// bounded (maxEnvVisits, maxEnvRead) and ends with ctx.
func PythonPackages(ctx context.Context, env fs.FS) ([]Package, error) {
	if env == nil {
		return nil, nil
	}
	rd := &envReader{ctx: ctx, env: env}
	libs, err := fs.ReadDir(env, "lib")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list /env/lib: %w", err)
	}
	var out []Package
	for _, lib := range libs {
		if !lib.IsDir() || !strings.HasPrefix(lib.Name(), "python3") {
			continue
		}
		sp := path.Join("lib", lib.Name(), "site-packages")
		ents, err := fs.ReadDir(env, sp)
		if errors.Is(err, ErrLimit) {
			return nil, err
		}
		if err != nil {
			continue // a python3.X without site-packages
		}
		for _, e := range ents {
			if !e.IsDir() || !strings.HasSuffix(e.Name(), ".dist-info") {
				continue
			}
			if len(out) >= maxPackages {
				return nil, fmt.Errorf("%w: more than %d packages in /env", ErrLimit, maxPackages)
			}
			if err := rd.visit(); err != nil {
				return nil, err
			}
			b, err := rd.head(path.Join(sp, e.Name(), "METADATA"), maxMetadataRead)
			if errors.Is(err, ErrLimit) {
				return nil, err
			}
			if err != nil {
				continue // a broken distribution is not one pip would list
			}
			p := parseMetadata(b)
			if p.Name == "" || p.Version == "" || slices.Contains(pipOwn, normName(p.Name)) {
				continue
			}
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b Package) int { return strings.Compare(normName(a.Name), normName(b.Name)) })
	return slices.CompactFunc(out, func(a, b Package) bool { return normName(a.Name) == normName(b.Name) }), nil
}

// parseMetadata reads Name and Version of a METADATA's headers.
func parseMetadata(b []byte) Package {
	var p Package
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			break // the headers end
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			v = strings.TrimSpace(v)
			switch strings.ToLower(k) {
			case "name":
				p.Name = v
			case "version":
				p.Version = v
			}
		}
	}
	if !validPyName(p.Name) || !validVersion(p.Version) {
		return Package{}
	}
	return p
}

var (
	rePyName  = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,200}[A-Za-z0-9])?$`)
	reVersion = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.+!_-]{0,100}$`)
	reSep     = regexp.MustCompile(`[-_.]+`)
	reReqName = regexp.MustCompile(`^\s*([A-Za-z0-9][A-Za-z0-9._-]*)`)
)

func validPyName(s string) bool  { return rePyName.MatchString(s) }
func validVersion(s string) bool { return reVersion.MatchString(s) }

// normName is a Python project's normalized name (PEP 503).
func normName(s string) string { return strings.ToLower(reSep.ReplaceAllString(s, "-")) }

// Requirements is requirements.txt: the project's own (project, nil if it
// has none) first, as it is, then /env's packages it does not name,
// pinned (pip freeze's form), then needs (what the command itself needs)
// that neither names, unpinned.
func Requirements(project []byte, env []Package, needs []string) []byte {
	named := map[string]bool{}
	var b bytes.Buffer
	b.WriteString("# Written by cellbox export: the project's own requirements.txt, if it had one,\n# then the packages installed in the workspace's /env (pip freeze's form).\n")
	if len(project) > 0 {
		for _, line := range strings.Split(strings.TrimRight(string(project), "\n"), "\n") {
			if m := reReqName.FindStringSubmatch(line); m != nil && !strings.HasPrefix(strings.TrimSpace(line), "#") {
				named[normName(m[1])] = true
			}
		}
		b.Write(bytes.TrimRight(project, "\n"))
		b.WriteByte('\n')
	}
	for _, p := range env {
		if !named[normName(p.Name)] {
			named[normName(p.Name)] = true
			fmt.Fprintf(&b, "%s==%s\n", p.Name, p.Version)
		}
	}
	first := true
	for _, n := range needs {
		if named[normName(n)] {
			continue
		}
		if first {
			b.WriteString("# What the command needs, which the sandbox had from the host's Python:\n")
			first = false
		}
		named[normName(n)] = true
		b.WriteString(n + "\n")
	}
	return b.Bytes()
}

// NodePackages are the npm packages installed in env: those asked for
// (npm/package.json's dependencies, which npm install --prefix /env/npm
// writes), else every package at the top of npm/node_modules, at its
// version. env may be nil.
func NodePackages(ctx context.Context, env fs.FS) (map[string]string, error) {
	if env == nil {
		return nil, nil
	}
	rd := &envReader{ctx: ctx, env: env}
	if b, err := rd.head("npm/package.json", maxJSONRead); err == nil {
		var p struct {
			Dependencies map[string]string `json:"dependencies"`
		}
		if err := json.Unmarshal(b, &p); err == nil && p.Dependencies != nil {
			return validDeps(p.Dependencies)
		}
	} else if errors.Is(err, ErrLimit) {
		return nil, err
	}
	ents, err := fs.ReadDir(env, "npm/node_modules")
	if errors.Is(err, ErrLimit) {
		return nil, err
	}
	if err != nil {
		return nil, nil
	}
	deps := map[string]string{}
	add := func(dir string) error {
		if err := rd.visit(); err != nil {
			return err
		}
		b, err := rd.head(path.Join("npm/node_modules", dir, "package.json"), maxJSONRead)
		if err != nil {
			if errors.Is(err, ErrLimit) {
				return err
			}
			return nil
		}
		var p struct{ Name, Version string }
		if json.Unmarshal(b, &p) == nil && p.Name == dir && p.Version != "" {
			deps[p.Name] = p.Version
		}
		return nil
	}
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if strings.HasPrefix(e.Name(), "@") {
			sub, err := fs.ReadDir(env, path.Join("npm/node_modules", e.Name()))
			if errors.Is(err, ErrLimit) {
				return nil, err
			}
			for _, s := range sub {
				if s.IsDir() {
					if err := add(e.Name() + "/" + s.Name()); err != nil {
						return nil, err
					}
				}
			}
			continue
		}
		if err := add(e.Name()); err != nil {
			return nil, err
		}
	}
	return validDeps(deps)
}

var reNpmName = regexp.MustCompile(`^(?:@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*$`)

func validDeps(deps map[string]string) (map[string]string, error) {
	if len(deps) > maxPackages {
		return nil, fmt.Errorf("%w: more than %d npm packages in /env", ErrLimit, maxPackages)
	}
	out := map[string]string{}
	for n, v := range deps {
		if len(n) <= 214 && reNpmName.MatchString(n) && v != "" && len(v) <= 256 && !strings.ContainsAny(v, "\x00\n") {
			out[n] = v
		}
	}
	return out, nil
}

// PackageJSON is package.json: the project's own (nil if it has none)
// with deps added to its dependencies where it does not name them (its
// other keys kept in their order), or a new one named name.
func PackageJSON(project []byte, name string, deps map[string]string, app App) ([]byte, error) {
	fields, err := orderedObject(project)
	if err != nil || project == nil {
		if project != nil {
			return nil, fmt.Errorf("%w: the project's package.json is not a JSON object: %v", ErrInvalid, err)
		}
		fields = nil
		n, _ := json.Marshal(npmName(name))
		fields = append(fields, field{"name", n}, field{"version", json.RawMessage(`"1.0.0"`)}, field{"private", json.RawMessage("true")})
		if app.Kind == KindNode && len(app.Command) == 2 {
			s, _ := json.Marshal(map[string]string{"start": "node " + app.Command[1]})
			fields = append(fields, field{"scripts", s})
		}
	}
	have := map[string]string{}
	at := -1
	for i, f := range fields {
		if f.key == "dependencies" {
			at = i
			if err := json.Unmarshal(f.value, &have); err != nil {
				return nil, fmt.Errorf("%w: the project's package.json: dependencies is not an object of strings", ErrInvalid)
			}
		}
	}
	merged := map[string]string{}
	for n, v := range deps {
		merged[n] = v
	}
	for n, v := range have {
		merged[n] = v // the project's own range wins
	}
	d, err := json.MarshalIndent(merged, "  ", "  ")
	if err != nil {
		return nil, err
	}
	if at >= 0 {
		fields[at].value = d
	} else {
		fields = append(fields, field{"dependencies", d})
	}
	var b bytes.Buffer
	b.WriteString("{\n")
	for i, f := range fields {
		k, _ := json.Marshal(f.key)
		fmt.Fprintf(&b, "  %s: ", k)
		var v bytes.Buffer
		if f.key == "dependencies" || json.Indent(&v, f.value, "  ", "  ") != nil {
			v.Reset()
			v.Write(f.value)
		}
		b.Write(v.Bytes())
		if i < len(fields)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("}\n")
	return b.Bytes(), nil
}

// field is one key of a JSON object, in its order.
type field struct {
	key   string
	value json.RawMessage
}

// orderedObject splits a JSON object into its fields, in order.
func orderedObject(b []byte) ([]field, error) {
	if b == nil {
		return nil, nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	var out []field
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, field{k, raw[k]})
		}
	}
	return out, nil
}

// npmName makes name a valid npm package name.
func npmName(name string) string {
	var b strings.Builder
	sep := true // no separator first
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
			sep = false
		case !sep && (r == '-' || r == '.' || r == '_'):
			b.WriteRune(r)
			sep = true
		case !sep:
			b.WriteByte('-')
			sep = true
		}
	}
	s := b.String()
	s = strings.TrimRight(s[:min(len(s), 100)], "-._")
	if s == "" {
		s = "app"
	}
	return s
}

// readHead reads at most limit bytes of the regular file name in fsys.
func readHead(fsys fs.FS, name string, limit int64) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", name)
	}
	return io.ReadAll(io.LimitReader(f, limit))
}
