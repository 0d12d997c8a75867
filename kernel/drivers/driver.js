// cellbox kernel driver for JavaScript. The manager runs it as `node -e SRC` in the kernel's cwd;
// the contract (fds, framing, requests, events, ordering) is README.md in this directory.
//
// State lives in node's own global context: cells run with vm.Script#runInThisContext, after a
// small top-level scanner (below) has rewritten their top-level declarations so that they land on
// the global object and can be declared again when a cell is re-run.
//
// Everything is inside a function so that none of the driver's names reach the global scope that
// user code shares.
(() => {
'use strict';
const fs = require('fs');
const net = require('net');
const path = require('path');
const util = require('util');
const vm = require('vm');
const { createRequire } = require('module');
// V8's compilation cache would keep every distinct cell ever run (about 1 KB each, plus code).
require('v8').setFlagsFromString('--no-compilation-cache');
// User code shares the global object (its `let Buffer = ...` assigns the global): the driver keeps
// its own references to what it uses.
const { Array, ArrayBuffer, Atomics, Buffer, Error, Function, Int32Array, JSON, Map, Math, Object,
  Promise, Set, SharedArrayBuffer, String, SyntaxError, Uint8Array, process, setImmediate } = globalThis;

// Cells import through vm's USE_MAIN_CONTEXT_DEFAULT_LOADER, which makes node print an
// ExperimentalWarning on the user's stderr at the first import: that warning alone is dropped.
const emitWarning = process.emitWarning;
process.emitWarning = function (warning, ...rest) {
  const type = typeof rest[0] === 'string' ? rest[0] : rest[0] && rest[0].type;
  const text = typeof warning === 'string' ? warning : warning && warning.message;
  if ((type === 'ExperimentalWarning' || (warning && warning.name === 'ExperimentalWarning'))
      && /USE_MAIN_CONTEXT_DEFAULT_LOADER/.test(text)) return;
  return Reflect.apply(emitWarning, this, [warning, ...rest]);
};

// ---------------------------------------------------------------------------------------------
// Channel: fd 3 requests, fd 4 events. (Started without them, node's own descriptors may sit at
// 3 and 4: check what they are.)
const isChannel = (fd) => {
  try { const st = fs.fstatSync(fd); return st.isFIFO() || st.isSocket() || st.isFile(); } catch { return false; }
};
if (!isChannel(3) || !isChannel(4)) {
  fs.writeSync(2, 'cellbox driver: fd 3 (requests) and fd 4 (events) must be pipes; see kernel/drivers/README.md\n');
  process.exit(2);
}
// Node cannot dup(2), so fds 3 and 4 are reopened through /proc/self/fd: libuv opens with
// O_CLOEXEC, so the new descriptors are not inherited by programs the user code starts, and 3 and
// 4 are closed. Without /proc (or if the fds are sockets) the driver keeps 3 and 4 as they are.
function reopen(fd, flags) {
  try { return fs.openSync(`/proc/self/fd/${fd}`, flags); } catch { return fd; }
}
const reqFd = reopen(3, 'r');
const evFd = reopen(4, 'w'); // both opened before closing either, so neither lands on 3 or 4
if (reqFd !== 3) fs.closeSync(3);
if (evFd !== 4) fs.closeSync(4);

// process.stdout/stderr on pipes are libuv streams that turn asynchronous (queued in memory) when
// the pipe is full, which would let an event overtake output written before it. Blocking writes
// keep fd 1/2 output and fd 4 events in program order, and clear O_NONBLOCK for children too.
// The bytes the streams hand to fds 1 and 2 are counted (at _write/_writev, past any cork or
// queue) for the events' stdoutBytes/stderrBytes.
const written = [0, 0, 0];
const byteLength = (chunk, enc) => typeof chunk === 'string' ? Buffer.byteLength(chunk, enc) : chunk.length;
for (const [fd, s] of [[1, process.stdout], [2, process.stderr]]) {
  if (s._handle && typeof s._handle.setBlocking === 'function') s._handle.setBlocking(true);
  s.on('error', () => {});
  const write = s._write, writev = s._writev;
  s._write = function (chunk, enc, cb) {
    written[fd] += byteLength(chunk, enc);
    return write.call(this, chunk, enc, cb);
  };
  if (writev) {
    s._writev = function (chunks, cb) {
      for (const c of chunks) written[fd] += byteLength(c.chunk, c.encoding);
      return writev.call(this, chunks, cb);
    };
  }
}

const sleeper = new Int32Array(new SharedArrayBuffer(4));
function writeAll(fd, data) {
  const buf = Buffer.from(data);
  for (let off = 0; off < buf.length;) {
    try {
      off += fs.writeSync(fd, buf, off);
    } catch (e) {
      if (e.code === 'EAGAIN') Atomics.wait(sleeper, 0, 0, 1); // a non-blocking pipe is full
      else if (e.code === 'EPIPE') process.exit(0); // the manager is gone
      else throw e;
    }
  }
}
const send = (ev) => writeAll(evFd, JSON.stringify(ev) + '\n');
// An event of an execution: it carries how much output came before it.
const emit = (ev) => send({ ...ev, stdoutBytes: written[1], stderrBytes: written[2] });

// ---------------------------------------------------------------------------------------------
// Top-level scanner. A tokenizer that knows enough of JavaScript to skip strings, templates,
// comments and regular expressions, then a pass over the depth-0 tokens that finds where
// top-level statements start (with the usual automatic-semicolon rule) and parses the binding
// patterns of top-level declarations. It is not a full parser: when it guesses wrong, the
// rewritten cell fails to compile and compile() falls back to a simpler form.

const IDENT = /(?:[\p{ID_Start}$_]|\\u[\da-fA-F]{4}|\\u\{[\da-fA-F]+\})(?:[\p{ID_Continue}$\u200c\u200d]|\\u[\da-fA-F]{4}|\\u\{[\da-fA-F]+\})*/uy;
const NUM = /(?:0[xXoObB][\da-fA-F_]+|(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][+-]?[\d_]+)?)n?/y;
const PUNC = /\.\.\.|>>>=|===|!==|\*\*=|<<=|>>=|>>>|&&=|\|\|=|\?\?=|=>|==|!=|<=|>=|&&|\|\||\?\?|\?\.(?!\d)|\+\+|--|[-+*/%&|^]=|<<|>>|\*\*|[^]/y;
const NEWLINE = /[\n\r\u2028\u2029]/;
// After these keywords a `/` starts a regular expression; after other names it divides.
const BEFORE_EXPR = new Set(['return', 'typeof', 'instanceof', 'in', 'of', 'new', 'delete', 'void',
  'throw', 'case', 'do', 'else', 'yield', 'await', 'extends']);

// tokenize returns the top-level tokens {t: name|num|str|tpl|re|punc, v, s, e, nl (a line break
// before it)} and whether `await` occurs anywhere (template substitutions included).
function tokenize(src) {
  let hasAwait = false;
  function scan(i, nested) {
    const toks = [];
    let nl = false, depth = 0;
    const push = (t, s, e) => {
      toks.push({ t, s, e, v: t === 'name' || t === 'punc' ? src.slice(s, e) : '', nl });
      nl = false;
      return e;
    };
    const regexAllowed = () => {
      const p = toks[toks.length - 1];
      if (!p) return true;
      if (p.t === 'punc') return !(p.v === ')' || p.v === ']' || p.v === '++' || p.v === '--');
      return p.t === 'name' && BEFORE_EXPR.has(p.v);
    };
    while (i < src.length) {
      const c = src[i];
      if (NEWLINE.test(c)) { nl = true; i++; continue; }
      if (c === ' ' || c === '\t' || /\s/.test(c)) { i++; continue; }
      if ((c === '/' && src[i + 1] === '/') || (c === '#' && src[i + 1] === '!' && i === 0)) {
        while (i < src.length && !NEWLINE.test(src[i])) i++; // a line comment, or #! on line 1
        continue;
      }
      if (c === '/' && src[i + 1] === '*') {
        const e = src.indexOf('*/', i + 2), end = e < 0 ? src.length : e + 2;
        if (NEWLINE.test(src.slice(i, end))) nl = true;
        i = end;
        continue;
      }
      if (c === '"' || c === "'") {
        let j = i + 1;
        while (j < src.length && src[j] !== c && src[j] !== '\n') j += src[j] === '\\' ? 2 : 1;
        i = push('str', i, Math.min(j + 1, src.length));
        continue;
      }
      if (c === '`') {
        let j = i + 1;
        while (j < src.length && src[j] !== '`') {
          if (src[j] === '\\') j += 2;
          else if (src[j] === '$' && src[j + 1] === '{') j = scan(j + 2, true).end;
          else j++;
        }
        i = push('tpl', i, Math.min(j + 1, src.length));
        continue;
      }
      if (c === '/' && regexAllowed()) {
        let j = i + 1, cls = false;
        for (; j < src.length && !NEWLINE.test(src[j]); j++) {
          if (src[j] === '\\') j++;
          else if (src[j] === '[') cls = true;
          else if (src[j] === ']') cls = false;
          else if (src[j] === '/' && !cls) break;
        }
        j++;
        while (j < src.length && /[\w$]/.test(src[j])) j++;
        i = push('re', i, Math.min(j, src.length));
        continue;
      }
      IDENT.lastIndex = i;
      let m = IDENT.exec(src) || (c === '#' && (IDENT.lastIndex = i + 1, IDENT.exec(src)));
      if (m) {
        i = push('name', i, IDENT.lastIndex);
        if (m[0] === 'await') hasAwait = true;
        continue;
      }
      NUM.lastIndex = i;
      if (/[\d.]/.test(c) && NUM.exec(src)) { i = push('num', i, NUM.lastIndex); continue; }
      PUNC.lastIndex = i;
      m = PUNC.exec(src);
      if (c === '{') depth++;
      if (c === '}' && nested && depth-- === 0) return { toks, end: i + 1 };
      i = push('punc', i, i + m[0].length);
    }
    return { toks, end: i };
  }
  const { toks } = scan(0, false);
  return { toks, hasAwait };
}

// A token that can end an expression, and one that cannot continue it: a line break between two
// such tokens ends the statement (automatic semicolon insertion).
const endsExpr = (t) => t.t !== 'punc' ? !(t.t === 'name' && BEFORE_EXPR.has(t.v))
  : t.v === ')' || t.v === ']' || t.v === '}' || t.v === '++' || t.v === '--';
const startsStmt = (t) => t.t === 'name' ? t.v !== 'in' && t.v !== 'instanceof'
  : t.t !== 'punc' ? t.t !== 'tpl' : ['{', '!', '~', '++', '--'].includes(t.v);
const isOpen = (t) => t.t === 'punc' && (t.v === '(' || t.v === '[' || t.v === '{');
const isClose = (t) => t.t === 'punc' && (t.v === ')' || t.v === ']' || t.v === '}');
const isPunc = (t, v) => t && t.t === 'punc' && t.v === v;

// Indices of the tokens that start top-level statements. A `}` back at depth 0 ends the
// statement when that statement is a block, a declaration or a compound statement (its braces
// are not an object literal or function expression that an operator could continue).
const BLOCK_STMT = new Set(['if', 'for', 'while', 'do', 'try', 'switch', 'with', 'else', 'catch', 'finally']);
function statementStarts(toks) {
  const starts = [];
  let depth = 0, blockStmt = false, moduleStmt = false;
  for (let i = 0; i < toks.length; i++) {
    const t = toks[i], p = toks[i - 1];
    if (depth === 0 && (!p || isPunc(p, ';') || (isPunc(p, '}') && blockStmt)
        || ((t.nl || isPunc(p, '}')) && endsExpr(p) && startsStmt(t) && !(moduleStmt && t.t === 'name' && t.v === 'from')))) {
      starts.push(i);
      const kind = declKind(toks, i);
      blockStmt = isPunc(t, '{') || (t.t === 'name' && BLOCK_STMT.has(t.v)) || kind === 'class' || kind === 'function';
      // the `from` after the braces of `import {a} from 'm'` continues it
      moduleStmt = isStaticImport(toks, i) || (t.t === 'name' && t.v === 'export');
    }
    if (isOpen(t)) depth++;
    else if (isClose(t)) depth--;
  }
  return starts;
}

// What the statement starting at toks[i] declares: 'let', 'const', 'var', 'class', 'function', or ''.
function declKind(toks, i) {
  const t = toks[i], n = toks[i + 1];
  if (!t || t.t !== 'name' || !n) return '';
  switch (t.v) {
    case 'var': case 'const': case 'class': case 'function': return t.v;
    case 'let': return (n.t === 'name' && n.v !== 'in' && n.v !== 'instanceof') || isPunc(n, '[') || isPunc(n, '{') ? 'let' : '';
    case 'async': return n.t === 'name' && n.v === 'function' && !n.nl ? 'function' : '';
  }
  return '';
}
const NOT_EXPR = new Set([...BLOCK_STMT, 'return', 'throw', 'break', 'continue', 'debugger', 'import',
  'export', 'case', 'default']);
const isExprStmt = (toks, i) => !declKind(toks, i) && !isPunc(toks[i], '{') && !isPunc(toks[i], ';')
  && !(toks[i].t === 'name' && (NOT_EXPR.has(toks[i].v) || isPunc(toks[i + 1], ':')));

// Skips an assignment expression from toks[j]; returns the index of the token after it: a `,`
// or a closer at depth 0, or the first token of the next statement.
function skipExpr(toks, j) {
  for (let depth = 0, k = j; k < toks.length; k++) {
    const t = toks[k];
    if (depth === 0) {
      if (isPunc(t, ',') || isPunc(t, ';') || isClose(t)) return k;
      if (k > j && t.nl && endsExpr(toks[k - 1]) && startsStmt(t)) return k;
    }
    if (isOpen(t)) depth++;
    else if (isClose(t)) depth--;
  }
  return toks.length;
}

// Parses a binding pattern at toks[j], pushing the names it binds; returns the index after it.
function pattern(toks, j, names) {
  const t = toks[j];
  if (t && t.t === 'name') { names.push(t.v); return j + 1; }
  if (!isPunc(t, '[') && !isPunc(t, '{')) throw new Error('pattern');
  const close = t.v === '[' ? ']' : '}';
  for (j++; !isPunc(toks[j], close);) {
    if (j >= toks.length) throw new Error('pattern');
    if (isPunc(toks[j], ',')) { j++; continue; }
    if (isPunc(toks[j], '...')) j = pattern(toks, j + 1, names);
    else if (close === ']') j = pattern(toks, j, names);
    else {
      const key = toks[j];
      if (isPunc(key, '[')) j = skipExpr(toks, j + 1) + 1; // [computed]
      else j++;
      if (isPunc(toks[j], ':')) j = pattern(toks, j + 1, names);
      else if (key.t === 'name') names.push(key.v);
      else throw new Error('pattern');
    }
    if (isPunc(toks[j], '=')) j = skipExpr(toks, j + 1);
  }
  return j + 1;
}

// Parses the declaration `let|const|var ...` at toks[i]: its declarators and where it ends.
function declaration(toks, i) {
  const decls = [];
  let j = i + 1;
  for (;;) {
    const names = [], start = j;
    j = pattern(toks, j, names);
    const init = isPunc(toks[j], '=');
    if (init) j = skipExpr(toks, j + 1);
    decls.push({ s: toks[start].s, e: toks[j - 1].e, names, init });
    if (!isPunc(toks[j], ',')) return { decls, end: j };
    j++;
  }
}

// The class body of the class declaration at toks[i]: returns the index of its closing brace.
function classEnd(toks, i) {
  let j = i + 2;
  while (j < toks.length && !isPunc(toks[j], '{')) j = isOpen(toks[j]) ? skipExpr(toks, j + 1) + 1 : j + 1;
  for (let depth = 0; j < toks.length; j++) {
    if (isOpen(toks[j])) depth++;
    else if (isClose(toks[j]) && --depth === 0) return j;
  }
  throw new Error('class');
}

// rewrite turns a cell into a script (sync) or an async function body (async) whose top-level
// declarations assign global bindings:
//   sync:  let/const x = 1, y   ->  var x = 1, y = undefined     (a script's vars are globals)
//          class A {}           ->  var A = class A {};
//   async: let {a, b} = o, c    ->  void (({a, b} = o), (c = undefined))   and `var a, b, c;` hoisted
//          class A {}           ->  A = class A {};                         and `var A;` hoisted
//          function f() {}      ->  kept (hoisted in the body), `globalThis.f = f;` at its start
//          last expression e    ->  return (e)
//          import x, {a as b} from 'm'  ->  void ({default: x, a : b} = await import('m'));
//          import * as ns from 'm'      ->  void (ns = await import('m'));      (names hoisted)
//          import 'm'                   ->  void (await import('m'));
// (static imports only in the async form: a cell with one always takes it). Like node's REPL
// (lib/internal/repl/await.js). Edits never add or remove line breaks (applyEdits keeps those of
// what an edit replaces), so line numbers stay those of the cell. Returns {edits, hoisted, copies, show (the cell ends with
// an expression)}; throws when the scanner cannot make sense of a declaration.
function rewrite(toks, starts, isAsync) {
  const edits = [], hoisted = [], copies = [];
  const edit = (s, e, text) => edits.push({ s, e, text });
  for (const i of starts) {
    const kind = declKind(toks, i), t = toks[i];
    if (isStaticImport(toks, i)) {
      if (!isAsync) throw new Error('import');
      hoisted.push(...importStatement(toks, i, edit));
    } else if (kind === 'let' || kind === 'const' || kind === 'var') {
      const { decls, end } = declaration(toks, i);
      if (isAsync) {
        edit(t.s, t.e, 'void (');
        for (const d of decls) {
          edit(d.s, d.s, '(');
          edit(d.e, d.e, d.init || kind === 'var' ? ')' : ' = undefined)'); // (var keeps its value)
          hoisted.push(...d.names);
        }
        edit(toks[end - 1].e, toks[end - 1].e, ')');
      } else {
        edit(t.s, t.e, 'var'.padEnd(t.v.length)); // keeps columns for const
        for (const d of decls) if (!d.init && kind !== 'var') edit(d.e, d.e, ' = undefined');
      }
    } else if (kind === 'class') {
      const name = toks[i + 1];
      if (!name || name.t !== 'name' || name.v === 'extends') throw new Error('class');
      const end = toks[classEnd(toks, i)].e;
      edit(t.s, t.s, (isAsync ? '' : 'var ') + name.v + ' = ');
      edit(end, end, ';');
      if (isAsync) hoisted.push(name.v);
    } else if (kind === 'function' && isAsync) {
      let j = i + 1;
      while (toks[j] && !(toks[j].t === 'name' && toks[j].v !== 'function')) j++; // skip `function`, `*`
      if (toks[j]) copies.push(`globalThis[${JSON.stringify(toks[j].v)}] = ${toks[j].v};`);
    }
  }
  const last = starts.length ? starts[starts.length - 1] : -1;
  const show = last >= 0 && (isAsync ? isExprStmt(toks, last) : !declKind(toks, last));
  if (isAsync && show) {
    let k = toks.length - 1;
    if (isPunc(toks[k], ';') && k > last) k--;
    edit(toks[last].s, toks[last].s, 'return (');
    edit(toks[k].e, toks[k].e, ')');
  }
  return { edits, hoisted: [...new Set(hoisted)], copies, show };
}

// A static import starts at toks[i] (not import(...) or import.meta).
const isStaticImport = (toks, i) => toks[i].t === 'name' && toks[i].v === 'import' && !!toks[i + 1]
  && !isPunc(toks[i + 1], '(') && !isPunc(toks[i + 1], '.');

// importStatement rewrites the static import at toks[i] into an assignment from a dynamic import
// (see rewrite) and returns the names it binds; throws on a form it does not know.
function importStatement(toks, i, edit) {
  let j = i + 1, def = null, defAt = 0, ns = null, braces = null;
  const names = [];
  const name = (k) => { if (!toks[k] || toks[k].t !== 'name') throw new Error('import'); return toks[k]; };
  if (toks[j].t !== 'str') {
    if (toks[j].t === 'name' && (isPunc(toks[j + 1], ',') || (toks[j + 1] && toks[j + 1].v === 'from' && toks[j + 1].t === 'name'))) {
      def = toks[j];
      defAt = j;
      names.push(def.v);
      j++;
      if (isPunc(toks[j], ',')) j++;
    }
    if (isPunc(toks[j], '*')) {
      if (name(j + 1).v !== 'as') throw new Error('import');
      ns = name(j + 2);
      names.push(ns.v);
      edit(toks[j].s, toks[j + 1].e, '');
      j += 3;
    } else if (isPunc(toks[j], '{')) {
      braces = [j];
      for (j++; !isPunc(toks[j], '}'); j++) {
        if (j >= toks.length) throw new Error('import');
        if (isPunc(toks[j], ',')) continue;
        if (toks[j].t !== 'name' && toks[j].t !== 'str') throw new Error('import');
        if (toks[j + 1] && toks[j + 1].t === 'name' && toks[j + 1].v === 'as') {
          edit(toks[j + 1].s, toks[j + 1].e, ':');
          j += 2;
        }
        names.push(name(j).v);
      }
      braces.push(j++);
    } else if (!def) throw new Error('import');
    if (name(j).v !== 'from') throw new Error('import');
    edit(toks[j].s, toks[j].e, '= await import(');
    j++;
  }
  const spec = toks[j];
  if (!spec || spec.t !== 'str') throw new Error('import');
  if (!def && !ns && !braces) edit(toks[i].s, toks[i].e, 'void (await import(');
  else edit(toks[i].s, toks[i].e, def && !ns ? 'void ({' : 'void (');
  if (def && ns) edit(def.s, toks[defAt + 1].e, ''); // `x,`: set from ns.default at the end
  else if (def) {
    edit(def.s, def.s, 'default: ');
    if (braces) edit(toks[braces[0]].s, toks[braces[0]].e, ''); // its `}` closes `{default: x, ...`
    else edit(def.e, def.e, '}');
  }
  let end = spec.e, close = '));'; // (`;`: the statement ends at the specifier)
  const w = toks[j + 1];
  if (w && w.t === 'name' && (w.v === 'with' || (w.v === 'assert' && !w.nl)) && isPunc(toks[j + 2], '{')) {
    let k = j + 2;
    for (let depth = 0; k < toks.length; k++) {
      if (isOpen(toks[k])) depth++;
      else if (isClose(toks[k]) && --depth === 0) break;
    }
    if (k >= toks.length) throw new Error('import');
    edit(w.s, w.e, ', { with:');
    end = toks[k].e;
    close = '}));';
  }
  if (def && ns) close = close.slice(0, -2) + `, ${def.v} = ${ns.v}.default);`;
  edit(end, end, close);
  return names;
}

// moduleSyntax takes `export` out of the top-level statements (a cell is not a module):
//   export <declaration>, export default <expression>  ->  the declaration, the expression
//   export {a, b}                                       ->  ;
//   export ... from 'm'                                 ->  import 'm' (it loads, binds nothing)
// It returns the tokens as they are then, the edits, and whether a static import is left.
function moduleSyntax(toks, starts) {
  const edits = [], out = [];
  let hasImport = false;
  for (let n = 0; n < starts.length; n++) {
    const i = starts[n], end = n + 1 < starts.length ? starts[n + 1] : toks.length;
    const t = toks[i], next = toks[i + 1];
    let stmt = toks.slice(i, end);
    if (t.t === 'name' && t.v === 'export' && next) {
      if (isPunc(next, '{') || isPunc(next, '*')) {
        let k = i + 1;
        while (k < end && !(toks[k].t === 'str' && toks[k - 1].t === 'name' && toks[k - 1].v === 'from')) k++;
        if (k < end) {
          edits.push({ s: t.s, e: toks[k].s, text: '' });
          stmt = [{ t: 'name', v: 'import', s: toks[k].s, e: toks[k].s, nl: t.nl }, ...toks.slice(k, end)];
        } else {
          const last = end - 1 > i && isPunc(toks[end - 1], ';') ? end - 2 : end - 1;
          edits.push({ s: t.s, e: toks[last].e, text: ';' });
          stmt = [{ t: 'punc', v: ';', s: t.s, e: toks[last].e, nl: t.nl }, ...toks.slice(last + 1, end)];
        }
      } else {
        const d = next.t === 'name' && next.v === 'default' && i + 2 < end ? 2 : 1;
        edits.push({ s: t.s, e: toks[i + d].s, text: '' });
        stmt = toks.slice(i + d, end);
        stmt[0] = { ...stmt[0], nl: stmt[0].nl || t.nl };
      }
    }
    if (isStaticImport(stmt, 0)) hasImport = true;
    out.push(...stmt);
  }
  return { toks: out, edits, hasImport };
}

// applyEdits returns the edited source and, for each line (0-based) whose columns the edits
// shift, the edits as [column, deleted, inserted], for mapColumn.
function applyEdits(src, edits) {
  edits = edits.map((x, n) => ({ ...x, n })).sort((a, b) => a.s - b.s || a.n - b.n);
  const lines = new Map();
  let out = '', at = 0, line = 0, lineStart = 0;
  for (const x of edits) {
    out += src.slice(at, x.s) + x.text + src.slice(x.s, x.e).replace(/[^\n\r\u2028\u2029]/g, ''); // (line breaks stay)
    at = Math.max(at, x.e);
    for (let i = src.indexOf('\n', lineStart); i !== -1 && i < x.s; i = src.indexOf('\n', lineStart)) { line++; lineStart = i + 1; }
    if (x.text.length !== x.e - x.s) {
      if (!lines.has(line)) lines.set(line, []);
      lines.get(line).push([x.s - lineStart, x.e - x.s, x.text.length]);
    }
  }
  return { src: out + src.slice(at), lines };
}

// Maps a 1-based column of an edited line back to the cell's own text.
function mapColumn(edits, col) {
  let shift = 0;
  for (const [pos, del, ins] of edits) {
    const at = pos + shift; // where the edit's text starts in the edited line
    if (col - 1 < at) break;
    if (col - 1 < at + ins) return pos + 1;
    shift += ins - del;
  }
  return col - shift;
}

// filename -> {line0, lastLine, lines} of its latest compile, to fix up stack frames (of the
// latest 1000 cells that need it: their code may still run later).
const cells = new Map();

// compile picks the first form of the cell that compiles: with `await` at the top, an async
// function (rewritten, then plain); otherwise, or if those fail, a script (rewritten, then the
// code as it is). It returns {script, isAsync, show}; it throws the SyntaxError of the
// form closest to what the user wrote.
function compile(code, count, source, sourceMap, syntaxError) {
  const filename = (source && source.path) || `<cell ${count}>`;
  const line0 = Math.max(1, (source && source.line) | 0) - 1;
  if (syntaxError) throw cellSyntaxError(syntaxError, filename, line0);
  const lastLine = line0 + code.split('\n').length;
  const map = Array.isArray(sourceMap) && sourceMap.length ? sourceMap : null;
  let scanned = null;
  try {
    const { toks, hasAwait } = tokenize(code);
    const mod = moduleSyntax(toks, statementStarts(toks));
    // a static import makes the cell async, as a dynamic import
    scanned = { toks: mod.toks, hasAwait: hasAwait || mod.hasImport, starts: statementStarts(mod.toks), pre: mod.edits };
  } catch {}
  const forms = [];
  const asyncForm = (kind, edits, hoisted, copies, show) => {
    const { src, lines } = applyEdits(code, edits);
    return {
      kind, isAsync: true, show, lines, lineOffset: line0 - 1, // the wrapper's first line comes before the cell's
      src: (hoisted.length ? `var ${hoisted.join(', ')}; ` : '') + `(async () => {${copies.join(' ')}\n${src}\n})()`,
    };
  };
  if (scanned && scanned.hasAwait) {
    try {
      const r = rewrite(scanned.toks, scanned.starts, true);
      forms.push(asyncForm('async', [...scanned.pre, ...r.edits], r.hoisted, r.copies, r.show));
    } catch {}
    forms.push(asyncForm('plain async', [], [], [], false));
  }
  if (scanned) {
    try {
      const r = rewrite(scanned.toks, scanned.starts, false);
      forms.push({ kind: 'script', ...applyEdits(code, [...scanned.pre, ...r.edits]), lineOffset: line0, isAsync: false, show: r.show });
    } catch {}
  }
  forms.push({ kind: 'raw', src: code, lines: new Map(), lineOffset: line0, isAsync: false, show: true });
  const errors = {};
  // A transpiled cell's SyntaxError (syntax node lacks): its `file:line` header at the source line.
  const mapped = (e) => {
    const m = map && /^(.*):(\d+)\n/.exec(String(e && e.stack));
    const at = m && m[1] === filename && mapSource(map, m[2] - line0 - 1, 1);
    if (at) e.stack = `${filename}:${line0 + at[0]}${String(e.stack).slice(m[0].length - 1)}`;
    return e;
  };
  for (const f of forms) {
    try {
      const script = new vm.Script(f.src, {
        filename, lineOffset: f.lineOffset,
        importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
      });
      cells.delete(filename);
      if (f.isAsync || f.lines.size || map) cells.set(filename, { line0, lastLine, lines: f.lines, map });
      if (cells.size > 1000) cells.delete(cells.keys().next().value); // the oldest
      return { script, isAsync: f.isAsync, show: f.show };
    } catch (e) {
      errors[f.kind] = e;
    }
  }
  // For code with `await`, the plain async form tells the real error, unless the error is on the
  // wrapper's closing line (an unfinished cell): the code's own error says that better.
  const plain = errors['plain async'];
  if (!plain) throw mapped(errors.raw);
  if (!String(plain.stack).startsWith(`${filename}:${lastLine + 1}\n`)) throw mapped(plain);
  const e = new SyntaxError('Unexpected end of input');
  e.stack = `${filename}:${lastLine}\n${code.split('\n').pop()}\n\nSyntaxError: ${e.message}`;
  throw e;
}

// ---------------------------------------------------------------------------------------------
// Errors.

// Stack frames of the driver ([eval]), of node itself (node:...) and of the async wrapper's call
// (a line after the cell's last) are dropped; columns in cells are mapped back through the edits.
function cleanStack(stack) {
  const out = [];
  for (const line of String(stack).split('\n')) {
    if (!/^\s+at /.test(line)) { out.push(line); continue; }
    if (/\((?:node:|\[eval\])|^\s+at (?:node:|\[eval\])/.test(line)) continue;
    const m = /^(\s+at (?:.*\()?)(.*):(\d+):(\d+)(\)?)$/.exec(line);
    const c = m && cells.get(m[2]);
    if (c && +m[3] > c.lastLine) continue;
    const edits = c && c.lines.get(m[3] - c.line0 - 1);
    let at = [+m[3], edits ? mapColumn(edits, +m[4]) : +m[4]];
    if (c && c.map) {
      const ts = mapSource(c.map, at[0] - c.line0 - 1, at[1]);
      if (ts) at = [c.line0 + ts[0], ts[1]];
    }
    out.push(c ? `${m[1]}${m[2]}:${at[0]}:${at[1]}${m[5]}` : line);
  }
  return out;
}

// Maps a 0-based line and 1-based column of a transpiled cell to its source through the
// request's sourceMap (per line, flat triples: generated column, source line, source column, all
// 0-based): the segment at or before the column, or the last one of an earlier line. Returns
// [line, column], 1-based, or null.
function mapSource(map, line, col) {
  for (let l = Math.min(line, map.length - 1); l >= 0; l--) {
    const seg = map[l];
    if (!Array.isArray(seg) || seg.length < 3) continue;
    let k = l === line ? 0 : seg.length - seg.length % 3 - 3;
    if (l === line) for (let j = 0; j + 2 < seg.length && seg[j] <= col - 1; j += 3) k = j;
    const within = l === line ? Math.max(0, col - 1 - (seg[k] | 0)) : 0;
    return [(seg[k + 1] | 0) + 1, (seg[k + 2] | 0) + 1 + within];
  }
  return null;
}

// A cell the daemon could not transpile (the request's syntaxError): a SyntaxError shown as
// node shows its own, at the cell's line.
function cellSyntaxError(se, filename, line0) {
  const message = String(se.message || 'invalid syntax');
  const e = new SyntaxError(message);
  const text = String(se.lineText || '');
  e.stack = `${filename}:${line0 + Math.max(1, se.line | 0)}\n${text}\n${' '.repeat(Math.min(Math.max(0, se.column | 0), text.length))}^\n\nSyntaxError: ${message}`;
  return e;
}

const isError = (e) => e instanceof Error || (e && typeof e === 'object' && typeof e.message === 'string' && 'stack' in e);

// {ename, evalue, traceback}: the stack without driver frames, then the `cause` chain.
function errorInfo(e) {
  if (!isError(e)) {
    const shown = util.inspect(e);
    return { ename: 'Uncaught', evalue: shown, traceback: [`Uncaught ${shown}`] };
  }
  let ename = 'Error';
  try { ename = (e.constructor && e.constructor.name) || e.name || 'Error'; } catch {}
  const traceback = [];
  for (let c = e, n = 0; n < 5; n++) {
    let stack;
    try { stack = c.stack; } catch {}
    traceback.push(...cleanStack(typeof stack === 'string' ? stack : `${c.name}: ${c.message}`));
    try { c = c.cause; } catch { break; }
    if (c === undefined) break;
    if (!isError(c)) { traceback.push(`Caused by: ${util.inspect(c)}`); break; }
    traceback.push('Caused by:');
  }
  return { ename, evalue: String(e.message), traceback };
}

const interruptedError = () => ({
  ename: 'Interrupted', evalue: 'Script execution was interrupted by `SIGINT`',
  traceback: ['Interrupted: Script execution was interrupted by `SIGINT`'],
});

// ---------------------------------------------------------------------------------------------
// Executions.

let cur = null; // the running execution

// The manager's SIGINT goes through the sandbox's helper, so its `interrupt` request can come
// first and end a waiting cell before the signal lands. The next execute then waits for that
// signal (up to sigintWaitMs, as it can be lost), so it cannot interrupt the next cell.
let sigints = 0; // SIGINTs the listener saw
let sigintDue = null; // {next, release} while a SIGINT is on its way
const sigintWaitMs = 500;

function awaitSigint() {
  const due = sigintDue = {
    next: null,
    release() {
      clearTimeout(timer);
      if (sigintDue !== due) return;
      sigintDue = null;
      if (due.next) execute(due.next, due.interrupted);
    },
  };
  const timer = setTimeout(() => due.release(), sigintWaitMs);
}

function execute(req, interrupted) {
  if (sigintDue) { sigintDue.next = req; return; }
  const ex = cur = {
    sigints,
    id: req.id, silent: !!req.silent, stdin: typeof req.stdin === 'string' ? req.stdin : '',
    allowStdin: !!req.allowStdin, cpu: process.cpuUsage(), ended: false,
    inputs: [], inputChain: Promise.resolve(),
  };
  if (interrupted) return finish(ex, 'interrupted'); // interrupted while it waited to begin
  let c;
  try {
    c = compile(String(req.code == null ? '' : req.code), req.count | 0, req.source, req.sourceMap, req.syntaxError);
  } catch (e) {
    return finish(ex, 'error', e);
  }
  let value;
  try {
    value = c.script.runInThisContext({ breakOnSigint: true, displayErrors: false });
  } catch (e) {
    return finish(ex, e && e.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED' ? 'interrupted' : 'error', e);
  }
  if (!c.isAsync) return finish(ex, 'ok', value, c.show);
  value.then((v) => finish(ex, 'ok', v, c.show), (e) => finish(ex, 'error', e));
}

// finish ends an execution once. The events go out after pending callbacks and microtasks have
// run (setImmediate), so a promise the cell left rejected still counts as its error.
function finish(ex, status, value, show) {
  if (ex.ended) return;
  ex.ended = true;
  ex.inputs.length = 0; // an input() the cell still waits for stays pending: the cell is abandoned
  setImmediate(() => {
    let error;
    if (ex.failure) { status = 'error'; value = ex.failure; }
    if (status === 'interrupted') error = interruptedError();
    else if (status === 'error') error = errorInfo(value);
    if (error) {
      emit({ ev: 'error', id: ex.id, ...error });
    } else if (show && value !== undefined && !ex.silent) {
      let text;
      try {
        text = util.inspect(value);
        if (isError(value)) text = cleanStack(text).join('\n');
      } catch (e) { text = `[inspect failed: ${e && e.message}]`; }
      emit({ ev: 'result', id: ex.id, data: { 'text/plain': text }, metadata: {} });
    }
    const cpu = process.cpuUsage(ex.cpu);
    const done = { ev: 'done', id: ex.id, status };
    if (error) done.error = error;
    done.cpuMs = Math.round((cpu.user + cpu.system) / 100) / 10;
    done.peakMemoryBytes = process.resourceUsage().maxRSS * 1024;
    emit(done);
    if (cur === ex) cur = null;
    if (closing && !cur) process.exit(0);
    listen();
  });
}

// Failures outside the cell's own promise chain (an unhandled rejection, an exception thrown in a
// callback) end the running execution with that error, as node itself would end the script;
// between executions they go to stderr and the kernel lives on.
function background(e, prefix) {
  if (cur && !cur.ended) return finish(cur, 'error', e);
  if (cur && cur.ended && !cur.failure) { cur.failure = e; return; } // before its events went out
  let text;
  try { text = errorInfo(e).traceback.join('\n'); } catch { text = String(e); }
  try { process.stderr.write(`${prefix}${text}\n`); } catch {}
}

// SIGINT while runInThisContext runs is taken by its breakOnSigint (node then restores the
// listener below). Once the cell awaits, its code runs from callbacks and microtasks that no vm
// option covers: the `interrupt` request that comes with every SIGINT ends a waiting cell
// "interrupted" (its promise is abandoned); code that stays busy after an await never lets it
// be read. The listener itself only keeps node from exiting: it cannot tell which execution its
// signal was for, and when the request has already ended the cell, the manager's next execute
// can be read before it runs, which it would then end.
const listeners = {
  uncaughtException: (e) => background(e, 'Uncaught '),
  unhandledRejection: (e) => background(e, 'Uncaught (in promise) '),
  SIGINT: () => {
    sigints++;
    if (sigintDue) sigintDue.release();
  },
};
// (again after each execution, in case the code removed them)
function listen() {
  for (const [name, f] of Object.entries(listeners)) if (!process.listeners(name).includes(f)) process.on(name, f);
}
listen();

// ---------------------------------------------------------------------------------------------
// Globals for user code.

globalThis.require = createRequire(path.join(process.cwd(), path.sep));

// display(value, {displayId, update, metadata}): a value whose keys are all MIME types is a
// MimeBundle (string values as they are, bytes as base64, application/json any JSON value);
// anything else shows as util.inspect text. display.clear(wait) clears the cell's output.
const MIME = /^[a-z]+\/[\w.+-]+$/i;
function display(obj, opts) {
  const ex = cur;
  opts = opts || {};
  if (!ex) return;
  let data;
  const proto = obj && typeof obj === 'object' ? Object.getPrototypeOf(obj) : undefined;
  const keys = proto === Object.prototype || proto === null ? Object.keys(obj) : [];
  if (keys.length && keys.every((k) => MIME.test(k))) {
    data = {};
    for (const k of keys) {
      const v = obj[k];
      data[k] = /json$/i.test(k) ? v : v instanceof Uint8Array ? Buffer.from(v).toString('base64') : String(v);
    }
  } else {
    data = { 'text/plain': util.inspect(obj) };
  }
  const ev = { ev: 'display', id: ex.id, data, metadata: opts.metadata || {} };
  if (opts.displayId != null) ev.displayId = String(opts.displayId);
  if (opts.update) ev.update = true;
  emit(ev);
}
display.clear = (wait = false) => { if (cur) emit({ ev: 'clear', id: cur.id, wait: !!wait }); };

// input(prompt, {password}) -> Promise<string|null>: the next line of the request's `stdin`
// string, then (allowStdin) an answer to an `input` event, else null (end of file). The prompt
// and the value (not for passwords) are echoed to stdout so the transcript reads well.
function input(prompt = '', opts = {}) {
  const ex = cur;
  prompt = String(prompt);
  const password = !!(opts && opts.password);
  const echo = (v) => { if (v !== null || prompt) process.stdout.write(prompt + (v !== null && !password ? v : '') + '\n'); return v; };
  if (!ex || ex.ended) return Promise.resolve(null);
  if (ex.stdin) {
    const i = ex.stdin.indexOf('\n');
    const line = i < 0 ? ex.stdin : ex.stdin.slice(0, i);
    ex.stdin = i < 0 ? '' : ex.stdin.slice(i + 1);
    return Promise.resolve(echo(line));
  }
  if (!ex.allowStdin) return Promise.resolve(echo(null));
  // One `input` event at a time: concurrent calls wait for the previous answer.
  const p = ex.inputChain.then(() => new Promise((resolve) => {
    if (ex.ended) return resolve(null);
    ex.inputs.push((v) => resolve(v === null ? null : echo(v)));
    emit({ ev: 'input', id: ex.id, prompt, password });
  }));
  ex.inputChain = p;
  return p;
}
// await install('lodash', 'left-pad@1'): npm install into the workspace's environment
// (/env/npm, through the daemon's verified package cache, scripts not run), its output in the
// cell; then require('lodash') and import('lodash') find it (NODE_PATH and /node_modules).
function install(...pkgs) {
  pkgs = pkgs.flat().map(String);
  const env = process.env.CELLBOX_ENV;
  if (!env) return Promise.reject(new Error('install: this kernel has no workspace environment (CELLBOX_ENV is not set)'));
  if (!pkgs.length || pkgs.some((p) => !p || p.startsWith('-'))) {
    return Promise.reject(new Error('install: give package specifiers, e.g. install("lodash@4")'));
  }
  const { spawn } = require('child_process');
  return new Promise((resolve, reject) => {
    const child = spawn('npm', ['install', '--prefix', path.join(env, 'npm'), '--no-audit', '--no-fund',
      '--ignore-scripts', '--', ...pkgs], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.on('data', (b) => process.stdout.write(b));
    child.stderr.on('data', (b) => process.stderr.write(b));
    child.on('error', reject);
    child.on('close', (code, sig) => code === 0 ? resolve(undefined)
      : reject(new Error(`npm install ${pkgs.join(' ')} ${sig ? 'was killed by ' + sig : 'exited with code ' + code}`)));
  });
}
for (const [name, value] of Object.entries({ display, input, install })) {
  Object.defineProperty(globalThis, name, { value, writable: true, configurable: true, enumerable: false });
}

// Names that exist before any user code runs are not "variables".
const baseline = new Set(Object.getOwnPropertyNames(globalThis));

// ---------------------------------------------------------------------------------------------
// complete / inspect / isComplete / variables.

// Positions on the wire count code points; JS strings count UTF-16 units.
const HAS_SURROGATE = /[\ud800-\udfff]/;
function cpToIndex(s, cp) {
  if (!HAS_SURROGATE.test(s)) return Math.min(cp, s.length);
  let i = 0;
  for (let k = 0; k < cp && i < s.length; k++) i += s.codePointAt(i) > 0xffff ? 2 : 1;
  return i;
}
const indexToCp = (s, i) => HAS_SURROGATE.test(s) ? [...s.slice(0, i)].length : i;

const KEYWORDS = ('async await break case catch class const continue debugger default delete do ' +
  'else export extends false finally for function if import in instanceof let new null of return ' +
  'static super switch this throw true try typeof var void while with yield').split(' ');
const ID_CHAR = /[\p{ID_Continue}$\u200c\u200d]/u;
const IS_IDENT = /^[\p{ID_Start}$_][\p{ID_Continue}$\u200c\u200d]*$/u;

// Resolves a dotted chain of identifiers (no calls, no computed members) against the globals;
// a bare identifier that is not a global property (a lexical binding) is evaluated by name.
function resolve(chain) {
  const parts = chain.split('.');
  if (!parts.every((p) => IS_IDENT.test(p))) return { found: false };
  let v;
  if (parts[0] in globalThis) v = globalThis[parts[0]];
  else if (KEYWORDS.includes(parts[0])) return { found: false };
  else {
    try { v = vm.runInThisContext(parts[0]); } catch { return { found: false }; }
  }
  for (const p of parts.slice(1)) {
    if (v == null || !(p in Object(v))) return { found: false };
    v = v[p];
  }
  return { found: true, value: v };
}

function propertyNames(v) {
  const names = new Set();
  for (let o = Object(v); o != null; o = Object.getPrototypeOf(o)) {
    for (const n of Object.getOwnPropertyNames(o)) names.add(n);
  }
  return names;
}

function complete({ code = '', cursorPos }) {
  const idx = cpToIndex(code, cursorPos == null ? Infinity : cursorPos);
  let s = idx;
  while (s > 0 && ID_CHAR.test(code[s - 1])) s--;
  const prefix = code.slice(s, idx);
  let names;
  if (code[s - 1] === '.' && code[s - 2] !== '.') {
    // obj.pre or obj?.pre: only a plain chain of names and dots is evaluated
    const e = code[s - 2] === '?' ? s - 2 : s - 1;
    let b = e;
    while (b > 0 && (ID_CHAR.test(code[b - 1]) || code[b - 1] === '.' || (code[b - 1] === '?' && code[b] === '.'))) b--;
    const chain = code.slice(b, e).replace(/\?\./g, '.');
    const r = chain && !/^\d/.test(chain) ? resolve(chain) : { found: false };
    names = r.found && r.value != null ? propertyNames(r.value) : new Set();
  } else {
    names = propertyNames(globalThis);
    for (const k of KEYWORDS) names.add(k);
  }
  const matches = [...names].filter((n) => n.startsWith(prefix) && IS_IDENT.test(n)).sort();
  return { matches, cursorStart: indexToCp(code, s), cursorEnd: indexToCp(code, idx) };
}

function typeName(v) {
  if (v === null) return 'null';
  if (typeof v === 'function') return /^class\b/.test(Function.prototype.toString.call(v)) ? 'class' : 'function';
  if (typeof v !== 'object') return typeof v;
  try { return (v.constructor && v.constructor.name) || 'Object'; } catch { return 'Object'; }
}

// A function's source up to its body: `async function f(a, b = 1)`, `(x) =>`, `class A extends B`.
function signature(src) {
  let depth = 0;
  try {
    for (const t of tokenize(src).toks) {
      if (depth === 0 && (isPunc(t, '{') || isPunc(t, '=>'))) return src.slice(0, t.v === '=>' ? t.e : t.s).replace(/\s+/g, ' ').trim();
      if (isOpen(t)) depth++;
      else if (isClose(t)) depth--;
    }
  } catch {}
  return src.split('\n')[0];
}

function inspect({ code = '', cursorPos, detailLevel = 0 }) {
  const idx = cpToIndex(code, cursorPos == null ? code.length : cursorPos);
  let s = idx, e = idx;
  while (s > 0 && (ID_CHAR.test(code[s - 1]) || code[s - 1] === '.')) s--;
  while (e < code.length && ID_CHAR.test(code[e])) e++;
  const chain = code.slice(s, e).replace(/^\.+|\.+$/g, '');
  const r = chain ? resolve(chain) : { found: false };
  if (!r.found) return { found: false };
  const v = r.value, lines = [`Type: ${typeName(v)}`];
  if (typeof v === 'function') {
    const src = Function.prototype.toString.call(v);
    lines.push(`Signature: ${signature(src)}`);
    if (detailLevel > 0) lines.push('Source:', src);
  }
  lines.push(`Value: ${util.inspect(v, { depth: detailLevel > 0 ? 3 : 1 })}`);
  return { found: true, data: { 'text/plain': lines.join('\n') } };
}

function isComplete({ code = '' }) {
  const attempt = (src, lineOffset) => {
    try { new vm.Script(src, { filename: 'c', lineOffset }); return null; } catch (e) { return e; }
  };
  let e = attempt(code, 0);
  const lines = code.split('\n').length;
  let body = code;
  if (e && /import statement|Unexpected token 'export'/.test(e.message)) {
    // static imports and export, rewritten as a cell runs them
    try {
      const { toks } = tokenize(code);
      const mod = moduleSyntax(toks, statementStarts(toks));
      body = applyEdits(code, [...mod.edits, ...rewrite(mod.toks, statementStarts(mod.toks), true).edits]).src;
      e = new SyntaxError('await'); // checked as an async cell below
    } catch {}
  }
  if (e && /await|Unexpected reserved word/.test(e.message)) {
    const e2 = attempt(`(async () => {\n${body}\n})`, -1);
    // an error on the wrapper's closing line means the cell is not finished
    e = e2 && String(e2.stack).startsWith(`c:${lines + 1}\n`) ? new SyntaxError('Unexpected end of input') : e2;
  }
  if (!e) return { status: 'complete' };
  if (!(e instanceof SyntaxError)) return { status: 'unknown' };
  let depth = 0;
  try {
    for (const t of tokenize(code).toks) depth += isOpen(t) ? 1 : isClose(t) ? -1 : 0;
  } catch {}
  // (an import that the rewrite could not take is unfinished when a bracket is open)
  const openImport = body === code && /import statement|Unexpected token 'export'/.test(e.message) && depth > 0;
  if (!openImport && !/Unexpected end of input|Unterminated/.test(e.message)) return { status: 'invalid' };
  return { status: 'incomplete', indent: '  '.repeat(Math.max(depth, 0)) };
}

function variables() {
  const out = [];
  for (const name of Object.getOwnPropertyNames(globalThis)) {
    if (baseline.has(name)) continue;
    let v;
    try { v = globalThis[name]; } catch { continue; }
    const item = { name, type: typeName(v), summary: '' };
    try {
      item.summary = isError(v) ? String(v)
        : util.inspect(v, { depth: 0, breakLength: Infinity, maxArrayLength: 10, maxStringLength: 100 });
      item.summary = item.summary.slice(0, 200);
    } catch {}
    if (typeof v === 'string' || Array.isArray(v) || ArrayBuffer.isView(v)) item.size = v.length;
    else if (v instanceof Map || v instanceof Set) item.size = v.size;
    out.push(item);
  }
  return { variables: out };
}

// ---------------------------------------------------------------------------------------------
// Requests.

const handlers = { complete, inspect, isComplete, variables };

function handle(line) {
  let req;
  try { req = JSON.parse(line); } catch { return; }
  if (!req || typeof req !== 'object') return;
  if (req.op === 'execute') return execute(req);
  if (req.op === 'interrupt') {
    // sent with SIGINT, which node can lose (see the SIGINT listener): ends the execution it
    // names if it still waits, like the listener; a busy one was stopped by the SIGINT.
    if (cur && cur.id === req.id && !cur.ended) {
      if (sigints === cur.sigints) awaitSigint();
      finish(cur, 'interrupted');
    } else if (sigintDue && sigintDue.next && sigintDue.next.id === req.id) {
      sigintDue.interrupted = true; // it waits for the last one's signal: it ends when it would begin
    }
    return;
  }
  if (req.op === 'input') {
    // the answer to the oldest pending input event of that execution
    if (cur && cur.id === req.id && cur.inputs.length) cur.inputs.shift()(req.eof ? null : String(req.value == null ? '' : req.value));
    return;
  }
  const h = Object.hasOwn(handlers, req.op) ? handlers[req.op] : null;
  let reply;
  try {
    reply = h ? { ev: 'reply', id: req.id, result: h(req) } : { ev: 'reply', id: req.id, error: `unknown op ${req.op}` };
  } catch (e) {
    reply = { ev: 'reply', id: req.id, error: String((e && e.message) || e) };
  }
  try {
    send(reply);
  } catch (e) { // e.g. a value JSON cannot hold
    send({ ev: 'reply', id: req.id, error: `internal error: ${e && e.message}` });
  }
}

let requests;
try {
  requests = new net.Socket({ fd: reqFd, readable: true, writable: false }); // a pipe or socket
} catch {
  requests = fs.createReadStream(null, { fd: reqFd }); // a file (e.g. a test's script of requests)
}
requests.setEncoding('utf8');
let partial = '';
requests.on('data', (chunk) => {
  const lines = (partial + chunk).split('\n');
  partial = lines.pop();
  for (const line of lines) if (line) handle(line);
});
// The manager closed the requests: exit 0, after the running execution if there is one.
let closing = false;
const close = () => { closing = true; if (!cur) process.exit(0); };
requests.on('end', close);
requests.on('error', close);

send({ ev: 'ready', version: process.versions.node, pid: process.pid });
})();
