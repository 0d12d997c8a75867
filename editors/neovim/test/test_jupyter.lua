-- Installed Jupyter kernels (languages jupyter:NAME, PROTOCOL.md §8): an `.R` buffer, with no
-- entry in config.languages, runs in cellbox's own r, and in jupyter:ir (the host's IRkernel)
-- once :CellboxKernel picks it; a `.py` file of another
-- filetype runs in cellbox's python, not jupyter:python3; :CellboxKernel completes every available
-- language and starts one; `unsupported` is respected (:CellboxVariables says a Jupyter kernel
-- cannot list variables, without an error). Without IRkernel the file skips, except under CI.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":h") .. "/helpers.lua")

-- IRkernel takes a second or two to start on an idle machine; far longer on a loaded one.
local START_MS = 45000

--- Calls f with vim.notify captured; returns the messages as {msg, level}.
local function notifications(f)
  local msgs = {}
  local orig = vim.notify
  vim.notify = function(m, level)
    table.insert(msgs, { m, level })
  end
  local ok, err = pcall(f)
  vim.notify = orig
  if not ok then
    error(err, 2)
  end
  return msgs
end

H.main(function()
  local cb = H.setup()
  assert(cb.connect())
  local ir
  for _, l in ipairs(cb._state.init.capabilities.languages) do
    if l.id == "jupyter:ir" then
      ir = l
    end
  end
  if not (ir and ir.available) then
    local why = ir and ("jupyter:ir unavailable: " .. tostring(ir.reason)) or "no jupyter:ir (IRkernel's kernelspec is not installed)"
    if os.getenv("CI") == "true" then
      error(why)
    end
    H.log("SKIP " .. why)
    return
  end

  local rbuf
  H.test("an .R buffer runs in cellbox's r; :CellboxKernel jupyter:ir runs cat(1+1) in IRkernel: 2", function()
    H.eq(nil, cb.config.languages.r)
    rbuf = H.buffer("analysis.R", "r", { "# %% sum", "cat(1+1)" })
    H.eq("r", cb.language(rbuf))
    vim.cmd("CellboxKernel jupyter:ir")
    vim.api.nvim_win_set_cursor(0, { 2, 0 })
    local ex = H.done(cb.run_cell(rbuf), START_MS)
    H.eq("ok", ex.status, vim.inspect(ex.result))
    H.eq({ "  2" }, H.mark_at(rbuf, 1).lines)
    local kid = cb.kernel(rbuf, false)
    H.eq("jupyter:ir", cb._state.kernels[kid].language)
    H.check(cb.status(rbuf):find("cellbox jupyter:ir: idle", 1, true), cb.status(rbuf))
    -- An error of R code is a diagnostic in the buffer, on the line that ran.
    vim.api.nvim_buf_set_lines(rbuf, -1, -1, false, { "stop('boom')" })
    ex = H.done(cb.run_line(rbuf, 3), START_MS)
    H.eq("error", ex.status)
    local d = vim.diagnostic.get(rbuf)
    H.eq(1, #d)
    H.eq(2, d[1].lnum)
    H.check(d[1].message:find("boom", 1, true), d[1].message)
  end)

  H.test("cellbox's own language wins over a Jupyter kernel of the same extension; none fits: nil", function()
    local buf = H.buffer("script.py", "conf", { "print(6 * 7)" })
    H.eq("python", cb.language(buf))
    buf = H.buffer("model.R", "text", { "1" })
    H.eq("r", cb.language(buf))
    buf = H.buffer("notes.txt", "text", { "hello" })
    H.eq(nil, cb.language(buf))
  end)

  H.test(":CellboxKernel completes every available language, Jupyter kernels included", function()
    local all = vim.fn.getcompletion("CellboxKernel ", "cmdline")
    for _, want in ipairs({ "new", "python", "javascript", "bash", "jupyter:ir" }) do
      H.check(vim.tbl_contains(all, want), want .. " not in " .. vim.inspect(all))
    end
    for _, l in ipairs(cb._state.init.capabilities.languages) do
      H.eq(l.available, vim.tbl_contains(all, l.id), l.id)
    end
    local jup = vim.fn.getcompletion("CellboxKernel jupyter:", "cmdline")
    H.check(#jup >= 1, vim.inspect(jup))
    for _, x in ipairs(jup) do
      H.check(vim.startswith(x, "jupyter:"), x)
    end
    -- Without an argument, the picker offers a new kernel of every available language too.
    local shown
    local orig = vim.ui.select
    vim.ui.select = function(items, opts, on_choice)
      shown = vim.tbl_map(opts.format_item, items)
      on_choice(nil)
    end
    local ok, err = pcall(vim.cmd, "CellboxKernel")
    vim.ui.select = orig
    H.check(ok, err)
    H.check(vim.tbl_contains(shown, "new R (jupyter:ir, Jupyter kernel, sandboxed) kernel"), vim.inspect(shown))
    H.check(vim.tbl_contains(shown, "new python kernel"), vim.inspect(shown))
  end)

  H.test(":CellboxKernel jupyter:ir gives a buffer of another filetype an R kernel", function()
    local buf = H.buffer("scratch.txt", "text", { "cat(3 * 3)" })
    vim.cmd("CellboxKernel jupyter:ir")
    local kid = cb.kernel(buf, false)
    H.check(kid, "no kernel for the buffer")
    H.eq("jupyter:ir", cb._state.kernels[kid].language)
    local ex = H.done(cb.run_line(buf, 1), START_MS)
    H.eq("ok", ex.status, vim.inspect(ex.result))
    H.eq({ "  9" }, H.mark_at(buf, 0).lines)
  end)

  H.test(":CellboxVariables: a Jupyter kernel cannot list variables, which is said (not an error)", function()
    vim.api.nvim_set_current_buf(rbuf)
    local wins = #vim.api.nvim_list_wins()
    local msgs = notifications(function()
      H.eq(nil, cb.variables(rbuf))
      vim.cmd("CellboxVariables")
    end)
    H.eq(2, #msgs, vim.inspect(msgs))
    for _, m in ipairs(msgs) do
      H.check(m[1]:find("this kernel (jupyter:ir, R) cannot list variables", 1, true), m[1])
      H.eq(vim.log.levels.INFO, m[2])
    end
    H.eq(wins, #vim.api.nvim_list_wins(), "no float")
    -- Completion and inspect, which jupyter:ir answers, go on working.
    local sbuf = H.buffer("more.R", "r", { "prin" })
    vim.api.nvim_win_set_cursor(0, { 1, 4 })
    cb.select_kernel(cb.kernel(rbuf, false), sbuf)
    local c = cb.complete()
    H.check(c and vim.tbl_contains(c.matches, "print"), vim.inspect(c))
    vim.api.nvim_buf_set_lines(sbuf, 0, -1, false, { "print" })
    vim.api.nvim_win_set_cursor(0, { 1, 2 })
    local fbuf = cb.inspect()
    H.check(fbuf, "no inspect float")
    local text = table.concat(vim.api.nvim_buf_get_lines(fbuf, 0, -1, false), "\n")
    H.check(text:find("Print Values", 1, true), text:sub(1, 300))
    H.check(not text:find("\b", 1, true), "overstrikes left in: " .. text:sub(1, 300))
  end)

  H.test(":CellboxVariables lists a python kernel's variables in a float", function()
    local buf = H.buffer("v.py", "python", { "answer = 42" })
    H.done(cb.run_line(buf, 1), START_MS)
    local fbuf, _, vars = cb.variables(buf)
    H.check(fbuf, "no float")
    H.check(vim.tbl_filter(function(v)
      return v.name == "answer"
    end, vars)[1], vim.inspect(vars))
    local lines = vim.api.nvim_buf_get_lines(fbuf, 0, -1, false)
    H.check(lines[1]:match("^name%s+type%s+value$"), lines[1])
    local found = false
    for _, l in ipairs(lines) do
      found = found or (l:match("^answer%s+int%s+42$") ~= nil)
    end
    H.check(found, vim.inspect(lines))
  end)
end)
