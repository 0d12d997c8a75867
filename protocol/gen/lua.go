package main

import (
	"bytes"
	"fmt"
	"strings"
)

// lua renders the Lua module: values, then LuaLS annotations of the types.
func (p *protocol) lua() ([]byte, error) {
	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("-- %s\n-- Source: protocol/*.go, the Go implementation of PROTOCOL.md.\n", header)
	w("-- Lua 5.1 (LuaJIT). Types are LuaLS annotations under the cellbox. prefix.\n\nlocal M = {}\n")

	w("\n%sM.version = %s\n", luadoc(p.versionDoc, ""), p.version)

	w("\n--- Method names, exactly as PROTOCOL.md spells them.\nM.methods = {\n")
	for _, v := range p.methods {
		for _, l := range lines(v.Doc) {
			w("  -- %s\n", l)
		}
		w("  %s = %s,%s\n", v.Name, v.Lit, trailing(v.Comment, "--"))
	}
	w("}\n")

	w("\n--- JSON-RPC error codes (PROTOCOL.md §7): code by name and name by code.\nM.error_codes = {\n")
	for _, v := range p.errors {
		w("  %s = %s,\n", v.Name, v.Lit)
	}
	for _, v := range p.errors {
		w("  [%s] = %s,\n", v.Lit, quote(v.Name))
	}
	w("}\n")
	w("\n--- The snake_case name carried in `data.errorCode`, by error code.\nM.error_names = {\n")
	for _, v := range p.errors {
		w("  [%s] = %s,\n", v.Lit, quote(p.errorNames[v.Name]))
	}
	w("}\n")

	w("\n--- The values of each string enum, by the Go constant's name.\nM.enums = {\n")
	for _, d := range p.types {
		if !d.isEnum() {
			continue
		}
		w("  %s = {\n", d.Name)
		for _, v := range d.Values {
			w("    %s = %s,%s\n", v.Name, v.Lit, trailing(oneLine(v.Doc), "--"))
		}
		w("  },\n")
	}
	w("}\n")

	for _, d := range p.types {
		w("\n%s", luadoc(d.Doc, ""))
		switch {
		case d.isEnum():
			lits := make([]string, len(d.Values))
			for i, v := range d.Values {
				lits[i] = v.Lit
			}
			w("---@alias cellbox.%s %s\n", d.Name, strings.Join(lits, "|"))
		case d.isStruct():
			w("---@class cellbox.%s\n", d.Name)
			for _, f := range d.Fields {
				t, err := p.clientType(f.Type, true)
				if err != nil {
					return nil, fmt.Errorf("%s.%s: %v", d.Name, f.Name, err)
				}
				w("---@field %s%s %s%s\n", f.Name, optional(f.Optional), t, trailing(oneLine(f.Doc), ""))
			}
		default:
			t, err := p.aliasType(d, true)
			if err != nil {
				return nil, err
			}
			w("---@alias cellbox.%s %s\n", d.Name, t)
		}
	}
	w("\nreturn M\n")
	return b.Bytes(), nil
}
