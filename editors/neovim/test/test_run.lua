-- Run line, selection and cells in python, javascript and bash buffers: virtual text, the
-- output float, errors as diagnostics on the right line.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":h") .. "/helpers.lua")

H.main(function()
  local cb = H.setup()
  local api = vim.api

  H.test("python: run line shows output and result as virtual text", function()
    local buf = H.buffer("a.py", "python", { "x = 20", "print('hello'); x * 2 + 2", "" })
    H.done(cb.run_line(buf, 1))
    local ex = H.done(cb.run_line(buf, 2))
    H.eq("ok", ex.status)
    local m = H.mark_at(buf, 1)
    H.check(m, "no mark on line 2: " .. vim.inspect(H.marks(buf)))
    H.eq({ "  hello", "  42" }, m.lines)
    H.check(m.text:find("ok", 1, true) and m.text:find("[2]", 1, true), "status text: " .. m.text)
    H.eq(2, #H.marks(buf), "one mark per line run")
    -- Running the same line again replaces its output.
    H.done(cb.run_line(buf, 2))
    H.eq(2, #H.marks(buf), "re-run replaces the mark")
    H.eq({ "  hello", "  42" }, H.mark_at(buf, 1).lines)
  end)

  H.test("python: :CellboxRunSelection runs the range, output under its last line", function()
    local buf = H.buffer("sel.py", "python", { "a = 1", "b = 2", "print(a + b)", "y = 5" })
    vim.cmd("1,3CellboxRunSelection")
    local ex = H.done(cb.last_exec)
    H.eq("ok", ex.status)
    H.eq({ "  3" }, H.mark_at(buf, 2).lines)
    H.eq(nil, H.mark_at(buf, 0))
  end)

  H.test("python: visual <Plug>(CellboxRunVisual)", function()
    local buf = H.buffer("vis.py", "python", { "print('v1')", "print('v2')", "print('v3')" })
    vim.api.nvim_win_set_cursor(0, { 2, 0 })
    vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes("Vj<Plug>(CellboxRunVisual)", true, false, true), "x", false)
    local ex = H.done(cb.last_exec)
    H.eq(buf, ex.buf)
    H.eq({ "  v2", "  v3" }, H.mark_at(buf, 2).lines)
    -- Characterwise: only the selected text runs.
    buf = H.buffer("vis2.py", "python", { "x = 2 + 3  # comment", "y = [5 * 10, 'é']" })
    vim.api.nvim_win_set_cursor(0, { 1, 4 })
    vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes("v4l<Plug>(CellboxRunVisual)", true, false, true), "x", false)
    H.done(cb.last_exec)
    H.eq({ "  5" }, H.mark_at(buf, 0).lines)
    vim.api.nvim_win_set_cursor(0, { 2, 4 })
    vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes("vf]<Plug>(CellboxRunVisual)", true, false, true), "x", false)
    H.done(cb.last_exec)
    H.eq({ "  [50, 'é']" }, H.mark_at(buf, 1).lines)
  end)

  H.test("python: cells, run cell and move to next, cells above, the float", function()
    local buf = H.buffer("cells.py", "python", {
      "# %% first",
      "n = 10",
      "print('first', n)",
      "",
      "# %% second",
      "n = n + 1",
      "for i in range(12): print('line', i)",
      "# %% third",
      "print('third', n)",
    })
    api.nvim_win_set_cursor(0, { 2, 0 })
    local ex = H.done(cb.run_cell_and_next())
    H.eq({ "  first 10" }, H.mark_at(buf, 2).lines, "output under the last non-blank line of the cell")
    H.eq(6, api.nvim_win_get_cursor(0)[1], "cursor moved into the next cell")
    H.eq(1, ex.first_line)
    ex = H.done(cb.run_cell())
    local m = H.mark_at(buf, 6)
    -- 12 lines of output; virt_lines = 6 shows 5 and a "more" line.
    H.eq(6, #m.lines)
    H.eq("  line 0", m.lines[1])
    H.check(m.lines[6]:find("7 more lines", 1, true), m.lines[6])
    -- The float has every line, and the status header.
    local fbuf, fwin = cb.show_output(ex)
    local flines = api.nvim_buf_get_lines(fbuf, 0, -1, false)
    H.eq(13, #flines)
    H.check(flines[1]:find("ok", 1, true), flines[1])
    H.eq("line 11", flines[13])
    H.eq("floating", api.nvim_win_get_config(fwin).relative ~= "" and "floating" or "split")
    api.nvim_win_close(fwin, true)
    -- Run every cell above the third: first and second again, in order.
    api.nvim_win_set_cursor(0, { 9, 0 })
    local execs = cb.run_cells_above()
    H.eq(2, #execs)
    H.done(execs[2])
    H.eq({ 1, 5 }, { execs[1].first_line, execs[2].first_line })
    H.done(cb.run_cell())
    H.eq({ "  third 11" }, H.mark_at(buf, 8).lines, "state kept across executions")
  end)

  H.test("python: an error is a diagnostic on its line; stderr and error in the float", function()
    local buf = H.buffer("err.py", "python", {
      "import sys",
      "def f():",
      "    print('to stderr', file=sys.stderr)",
      "    return 1 / 0",
      "",
      "f()",
    })
    local ex = H.done(cb.run_file(buf))
    H.eq("error", ex.status)
    local d = vim.diagnostic.get(buf)
    H.eq(1, #d, "one diagnostic")
    H.eq(3, d[1].lnum, "on the line of 1 / 0 (innermost frame)")
    H.eq("ZeroDivisionError: division by zero", d[1].message)
    H.check(H.mark_at(buf, 5).text:find("ZeroDivisionError", 1, true))
    -- ]d jumps to it (the plugin maps it in the buffer: Neovim 0.7.2 does not), [d back.
    H.eq(1, #vim.tbl_filter(function(m)
      return m.lhs == "]d"
    end, api.nvim_buf_get_keymap(buf, "n")), "]d is mapped in the buffer")
    api.nvim_win_set_cursor(0, { 1, 0 })
    api.nvim_feedkeys("]d", "x", false)
    H.eq(4, api.nvim_win_get_cursor(0)[1], "]d")
    H.test_close_floats()
    api.nvim_win_set_cursor(0, { 6, 0 })
    api.nvim_feedkeys("[d", "x", false)
    H.eq(4, api.nvim_win_get_cursor(0)[1], "[d")
    H.test_close_floats()
    -- The float highlights stderr and the error.
    local fbuf = cb.show_output(ex)
    local flines = api.nvim_buf_get_lines(fbuf, 0, -1, false)
    H.eq("to stderr", flines[2])
    H.check(flines[#flines]:find("ZeroDivisionError", 1, true), flines[#flines])
    local hls = {}
    for _, m in ipairs(api.nvim_buf_get_extmarks(fbuf, require("cellbox.util").float_ns, 0, -1, { details = true })) do
      hls[m[2]] = m[4].hl_group
    end
    H.eq("CellboxStderr", hls[1])
    H.eq("CellboxError", hls[#flines - 1])
    -- Fixing the code and running again clears the diagnostic.
    api.nvim_buf_set_lines(buf, 3, 4, false, { "    return 1" })
    H.done(cb.run_file(buf))
    H.eq(0, #vim.diagnostic.get(buf))
  end)

  H.test("]d is the user's own where they mapped it", function()
    vim.cmd("nnoremap ]d <cmd>let g:user_d = 1<cr>")
    local buf = H.buffer("own.py", "python", { "1 / 0" })
    H.done(cb.run_line(buf, 1))
    H.eq(1, #vim.diagnostic.get(buf))
    H.eq(0, #vim.tbl_filter(function(m)
      return m.lhs == "]d"
    end, api.nvim_buf_get_keymap(buf, "n")), "no buffer-local ]d over the user's")
    H.check(#vim.tbl_filter(function(m)
      return m.lhs == "[d"
    end, api.nvim_buf_get_keymap(buf, "n")) == 1, "[d, which the user left free, is mapped")
    api.nvim_feedkeys("]d", "x", false)
    H.eq(1, vim.g.user_d)
    vim.cmd("nunmap ]d")
  end)

  H.test("python: error in a selection maps to the file's line", function()
    local buf = H.buffer("err2.py", "python", { "a = 1", "", "", "b = 2", "c = a +", "d = 4" })
    H.done(cb.run_selection(4, 6, buf))
    local d = vim.diagnostic.get(buf)
    H.eq(1, #d)
    H.eq(4, d[1].lnum, "SyntaxError on line 5")
    H.check(d[1].message:find("SyntaxError", 1, true), d[1].message)
  end)

  H.test("javascript: run line, cell and an error's line", function()
    local buf = H.buffer("a.js", "javascript", {
      "// %% one",
      "let a = 40",
      "console.log('js', a + 2)",
      "// %% two",
      "const o = null",
      "o.x",
    })
    local ex = H.done(cb.run_cell(buf, 2))
    H.eq("ok", ex.status)
    H.eq({ "  js 42" }, H.mark_at(buf, 2).lines)
    ex = H.done(cb.run_cell(buf, 5))
    H.eq("error", ex.status)
    local d = vim.diagnostic.get(buf)
    H.eq(1, #d)
    H.eq(5, d[1].lnum)
    H.check(d[1].message:find("TypeError", 1, true), d[1].message)
    ex = H.done(cb.run_line(buf, 2))
    H.eq("ok", ex.status)
  end)

  H.test("bash: run line and selection, stderr, failing command's line", function()
    local buf = H.buffer("a.sh", "sh", { "X=hello", "echo \"$X world\"", "echo oops >&2", "ls /nonexistent-dir", "echo after" })
    -- A bash execution fails when its last command does.
    H.done(cb.run_line(buf, 1))
    H.done(cb.run_line(buf, 2))
    H.eq({ "  hello world" }, H.mark_at(buf, 1).lines)
    local ex = H.done(cb.run_selection(3, 4, buf))
    H.eq("error", ex.status)
    local m = H.mark_at(buf, 3)
    H.eq("  oops", m.lines[1])
    H.check(m.lines[2]:find("nonexistent", 1, true), m.lines[2])
    local d = vim.diagnostic.get(buf)
    H.eq(1, #d)
    H.eq(3, d[1].lnum, "ls on line 4")
    -- The float: stderr and the error highlighted.
    local fbuf = cb.show_output(ex)
    local fl = vim.api.nvim_buf_get_lines(fbuf, 0, -1, false)
    H.eq("oops", fl[2])
    H.check(fl[#fl]:find("exit status 2", 1, true), fl[#fl])
    local hls = {}
    for _, mk in ipairs(vim.api.nvim_buf_get_extmarks(fbuf, require("cellbox.util").float_ns, 0, -1, { details = true })) do
      hls[mk[2] + 1] = mk[4].hl_group
    end
    H.eq("CellboxStderr", hls[2])
    H.eq("CellboxError", hls[#fl])
  end)

  H.test("bash: cells", function()
    local buf = H.buffer("cells.sh", "sh", { "# %% one", "N=5", "# %% two", "echo $((N * 2))", "echo done" })
    local ex = H.done(cb.run_cell(buf, 2))
    H.eq("ok", ex.status)
    vim.api.nvim_win_set_cursor(0, { 4, 0 })
    ex = H.done(cb.run_cell())
    H.eq({ "  10", "  done" }, H.mark_at(buf, 4).lines)
    H.eq(3, ex.first_line)
  end)

  H.test("kernels: one per buffer, shared with :CellboxKernel, status()", function()
    local b1 = H.buffer("k1.py", "python", { "v = 'one'" })
    H.done(cb.run_line(b1, 1))
    local k1 = cb.kernel(b1, false)
    local b2 = H.buffer("k2.py", "python", { "print(globals().get('v'))" })
    H.done(cb.run_line(b2, 1))
    H.eq({ "  None" }, H.mark_at(b2, 0).lines, "a second buffer has its own kernel")
    H.check(cb.kernel(b2, false) ~= k1)
    vim.cmd("CellboxKernel " .. k1)
    H.done(cb.run_line(b2, 1))
    H.eq({ "  one" }, H.mark_at(b2, 0).lines, "shared kernel sees v")
    H.eq("cellbox python: idle", cb.status(b2))
    vim.cmd("CellboxRestart")
    H.done(cb.run_line(b2, 1))
    H.eq({ "  None" }, H.mark_at(b2, 0).lines, "restart resets state")
    vim.cmd("CellboxShutdown")
    H.eq(nil, cb.kernel(b2, false))
    H.eq("", cb.status(b2))
  end)

  H.test("images are saved to a file and the path shown", function()
    local buf = H.buffer("img.py", "python", {
      "import base64",
      "class P:",
      "    def _repr_png_(self): return base64.b64decode('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==')",
      "P()",
    })
    local ex = H.done(cb.run_file(buf))
    H.eq("ok", ex.status)
    local line = H.mark_at(buf, 3).lines[1]
    local path = line:match("%[image: (.-)%]")
    H.check(path, line)
    local f = assert(io.open(path, "rb"))
    local data = f:read("*a")
    f:close()
    H.eq("\137PNG", data:sub(1, 4))
  end)
end)
