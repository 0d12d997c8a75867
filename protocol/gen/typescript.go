package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"strings"
)

// The client types: TypeScript (with the method maps) and the helpers both
// emitters share.

// basicTypes maps Go's basic types to TypeScript's and Lua's.
var basicTypes = map[string]struct{ ts, lua string }{
	"string": {"string", "string"}, "bool": {"boolean", "boolean"},
	"int": {"number", "integer"}, "int8": {"number", "integer"}, "int16": {"number", "integer"},
	"int32": {"number", "integer"}, "int64": {"number", "integer"}, "uint": {"number", "integer"},
	"uint8": {"number", "integer"}, "uint16": {"number", "integer"}, "uint32": {"number", "integer"},
	"uint64": {"number", "integer"}, "float32": {"number", "number"}, "float64": {"number", "number"},
	"any": {"unknown", "any"},
}

// clientType renders a Go type expression in TypeScript (lua false) or as a
// LuaLS type (lua true).
func (p *protocol) clientType(e ast.Expr, lua bool) (string, error) {
	pick := func(ts, l string) string {
		if lua {
			return l
		}
		return ts
	}
	switch e := e.(type) {
	case *ast.Ident:
		if b, ok := basicTypes[e.Name]; ok {
			return pick(b.ts, b.lua), nil
		}
		if p.byName[e.Name] != nil {
			return pick(e.Name, "cellbox."+e.Name), nil
		}
		return "", fmt.Errorf("unknown type %s", e.Name)
	case *ast.StarExpr:
		return p.clientType(e.X, lua)
	case *ast.ArrayType:
		if id, ok := e.Elt.(*ast.Ident); ok && id.Name == "byte" {
			return "string", nil // encoding/json: base64
		}
		elem, err := p.clientType(e.Elt, lua)
		if err != nil {
			return "", err
		}
		if strings.ContainsAny(elem, " |") {
			elem = "(" + elem + ")"
		}
		return elem + "[]", nil
	case *ast.MapType:
		v, err := p.clientType(e.Value, lua)
		if err != nil {
			return "", err
		}
		return pick("{ [key: string]: "+v+" }", "table<string, "+v+">"), nil
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok {
			switch x.Name + "." + e.Sel.Name {
			case "time.Time":
				return "string", nil // RFC 3339
			case "json.RawMessage":
				return pick("unknown", "any"), nil
			}
		}
	case *ast.InterfaceType:
		if len(e.Methods.List) == 0 {
			return pick("unknown", "any"), nil
		}
	}
	return "", fmt.Errorf("unsupported type expression %T", e)
}

// typescript renders the TypeScript module.
func (p *protocol) typescript() ([]byte, error) {
	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("// %s\n// Source: protocol/*.go, the Go implementation of PROTOCOL.md.\n", header)

	w("\n%sexport const ProtocolVersion = %s;\n", jsdoc(p.versionDoc, ""), p.version)

	w("\n/** Method names, exactly as PROTOCOL.md spells them. */\nexport const Methods = {\n")
	for _, v := range p.methods {
		for _, l := range lines(v.Doc) {
			w("  // %s\n", l)
		}
		w("  %s: %s,%s\n", v.Name, v.Lit, trailing(v.Comment, "//"))
	}
	w("} as const;\n")

	w("\n/** JSON-RPC error codes (PROTOCOL.md §7). */\nexport const ErrorCodes = {\n")
	for _, v := range p.errors {
		w("  %s: %s,\n", v.Name, v.Lit)
	}
	w("} as const;\n")
	w("\n/** The snake_case name carried in `data.errorCode`, by error code. */\n")
	w("export const ErrorNames: { readonly [code: number]: string } = {\n")
	for _, v := range p.errors {
		w("  %s: %s,\n", quote(v.Lit), quote(p.errorNames[v.Name]))
	}
	w("};\n")

	for _, d := range p.types {
		w("\n%s", jsdoc(d.Doc, ""))
		switch {
		case d.isEnum():
			lits := make([]string, len(d.Values))
			for i, v := range d.Values {
				lits[i] = v.Lit
			}
			w("export type %s = %s;\n", d.Name, strings.Join(lits, " | "))
			w("/** Values of {@link %s}. */\nexport const %s = {\n", d.Name, d.Name)
			for _, v := range d.Values {
				w("%s  %s: %s,\n", jsdoc(v.Doc, "  "), v.Name, v.Lit)
			}
			w("} as const;\n")
		case d.isStruct() && len(d.Fields) == 0:
			w("export type %s = Record<string, never>;\n", d.Name)
		case d.isStruct():
			w("export interface %s {\n", d.Name)
			for _, f := range d.Fields {
				t, err := p.clientType(f.Type, false)
				if err != nil {
					return nil, fmt.Errorf("%s.%s: %v", d.Name, f.Name, err)
				}
				w("%s  %s%s: %s;\n", jsdoc(f.Doc, "  "), f.Name, optional(f.Optional), t)
			}
			w("}\n")
		default:
			t, err := p.aliasType(d, false)
			if err != nil {
				return nil, err
			}
			w("export type %s = %s;\n", d.Name, t)
		}
	}
	maps, err := p.methodMaps()
	if err != nil {
		return nil, err
	}
	b.WriteString(maps)
	return b.Bytes(), nil
}

// methodMaps renders the method maps of the TypeScript module: the params
// and result types of every request and the params type of every
// notification, in each direction, by method name.
func (p *protocol) methodMaps() (string, error) {
	wire := map[string]string{}
	for _, v := range p.methods {
		wire[v.Name] = v.Lit
	}
	typ := func(goName, none string) (string, error) {
		if goName == "" {
			return none, nil
		}
		if p.byName[goName] == nil {
			return "", fmt.Errorf("unknown type %s", goName)
		}
		return goName, nil
	}
	type entry struct{ method, params, result string }
	var requests, notifications, serverRequests, serverNotifications []entry
	add := func(m rpcMethod, requestsTo, notificationsTo *[]entry, notification bool) error {
		lit, ok := wire[m.Name]
		if !ok {
			return fmt.Errorf("method %s has no constant Method%s", m.Name, m.Name)
		}
		params, err := typ(m.Params, "void")
		if err != nil {
			return fmt.Errorf("%s: %v", m.Name, err)
		}
		result, err := typ(m.Result, "null")
		if err != nil {
			return fmt.Errorf("%s: %v", m.Name, err)
		}
		if notification {
			*notificationsTo = append(*notificationsTo, entry{lit, params, ""})
		} else {
			*requestsTo = append(*requestsTo, entry{lit, params, result})
		}
		return nil
	}
	declared := map[string]bool{}
	for _, m := range p.server {
		_, notification := clientNotifications[m.Name]
		if err := add(m, &requests, &notifications, notification); err != nil {
			return "", err
		}
		declared[m.Name] = true
	}
	for _, v := range p.methods {
		if params, ok := clientNotifications[v.Name]; ok && !declared[v.Name] {
			if err := add(rpcMethod{Name: v.Name, Params: params}, nil, &notifications, true); err != nil {
				return "", err
			}
			declared[v.Name] = true
		}
	}
	for name := range clientNotifications {
		if !declared[name] {
			return "", fmt.Errorf("notification %s has no constant Method%s", name, name)
		}
	}
	for _, m := range p.client {
		if err := add(m, &serverRequests, &serverNotifications, m.Result == ""); err != nil {
			return "", err
		}
		declared[m.Name] = true
	}
	var unserved []string
	for _, v := range p.methods {
		if !declared[v.Name] {
			unserved = append(unserved, "`"+strings.Trim(v.Lit, `"`)+"`")
		}
	}

	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	requestMap := func(doc, name string, es []entry) {
		w("\n%sexport interface %s {\n", jsdoc(doc, ""), name)
		for _, e := range es {
			w("  %s: { params: %s; result: %s };\n", e.method, e.params, e.result)
		}
		w("}\n")
	}
	notificationMap := func(doc, name string, es []entry) {
		w("\n%sexport interface %s {\n", jsdoc(doc, ""), name)
		for _, e := range es {
			w("  %s: %s;\n", e.method, e.params)
		}
		w("}\n")
	}
	doc := "The params and result types of every client-to-server request, by method\n" +
		"(protocol.Server). Params `void`: the method takes none; result `null`:\n" +
		"it answers null."
	if len(unserved) > 0 {
		doc += "\n\n" + wrap("The methods of PROTOCOL.md that this daemon does not implement yet "+
			"(such requests answer -32601) are in none of these maps: "+strings.Join(unserved, ", ")+".", 74)
	}
	requestMap(doc, "Requests", requests)
	notificationMap("The params type of every client-to-server notification, by method.", "Notifications", notifications)
	requestMap("The params and result types of every server-to-client request, by method\n(protocol.Client).", "ServerRequests", serverRequests)
	notificationMap("The params type of every server-to-client notification, by method\n(protocol.Client).", "ServerNotifications", serverNotifications)
	w(`
export type RequestMethod = keyof Requests;
export type RequestParams<M extends RequestMethod> = Requests[M]["params"];
export type RequestResult<M extends RequestMethod> = Requests[M]["result"];
export type NotificationMethod = keyof Notifications;
export type ServerRequestMethod = keyof ServerRequests;
export type ServerNotificationMethod = keyof ServerNotifications;

/**
 * The params argument of a call whose params type is P, as a rest tuple: it
 * may be left out when P is void or when every field of P is optional.
 */
export type ParamsArg<P> = [P] extends [void] ? [params?: undefined] : Record<never, never> extends P ? [params?: P] : [params: P];
`)
	return b.String(), nil
}

func (p *protocol) aliasType(d *typeDecl, lua bool) (string, error) {
	if o, ok := overrides[d.Name]; ok {
		if lua {
			return o.lua, nil
		}
		return o.ts, nil
	}
	t, err := p.clientType(d.Expr, lua)
	if err != nil {
		return "", fmt.Errorf("%s: %v", d.Name, err)
	}
	return t, nil
}

func optional(ok bool) string {
	if ok {
		return "?"
	}
	return ""
}

func lines(doc string) []string {
	if doc == "" {
		return nil
	}
	return strings.Split(doc, "\n")
}

func oneLine(doc string) string { return strings.Join(strings.Fields(doc), " ") }

// trailing is doc as a comment after code on the same line.
func trailing(doc, marker string) string {
	if doc == "" {
		return ""
	}
	if marker == "" {
		return " " + doc
	}
	return " " + marker + " " + doc
}

// wrap breaks text into lines of at most width bytes at spaces.
func wrap(text string, width int) string {
	var b strings.Builder
	n := 0
	for _, word := range strings.Fields(text) {
		switch {
		case n == 0:
		case n+1+len(word) > width:
			b.WriteByte('\n')
			n = 0
		default:
			b.WriteByte(' ')
			n++
		}
		b.WriteString(word)
		n += len(word)
	}
	return b.String()
}

// jsdoc renders doc as a JSDoc comment at indent.
func jsdoc(doc, indent string) string {
	doc = strings.ReplaceAll(doc, "*/", "*\\/")
	ls := lines(doc)
	switch len(ls) {
	case 0:
		return ""
	case 1:
		return indent + "/** " + ls[0] + " */\n"
	}
	var b strings.Builder
	b.WriteString(indent + "/**\n")
	for _, l := range ls {
		b.WriteString(strings.TrimRight(indent+" * "+l, " ") + "\n")
	}
	b.WriteString(indent + " */\n")
	return b.String()
}

// luadoc renders doc as LuaLS `---` lines at indent.
func luadoc(doc, indent string) string {
	var b strings.Builder
	for _, l := range lines(doc) {
		b.WriteString(strings.TrimRight(indent+"--- "+l, " ") + "\n")
	}
	return b.String()
}
