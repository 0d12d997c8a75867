-- Running code with cellbox.nvim: lines, selections (linewise and characterwise), `# %%` cells
-- and whole buffers, each as one kernel/execute whose output is shown under the code.
local proto = require("cellbox.protocol")
local session = require("cellbox.session")
local kernels = require("cellbox.kernels")
local output = require("cellbox.output")
local util = require("cellbox.util")

local methods = proto.methods
local api = vim.api
local state = session.state
local ns = output.ns

local M = {}

local function buf_path(buf)
  local name = api.nvim_buf_get_name(buf)
  if name == "" then
    return "untitled-" .. buf
  end
  return name
end

-- finish records kernel/execute's reply (or error) and shows it: the status, an error as a
-- diagnostic on the line it points at.
local function finish(exec, err, res)
  exec.done = true
  if err then
    if err.code == proto.error_codes.RequestCancelled then
      exec.status = "interrupted"
      exec.result = { status = "interrupted" }
    else
      exec.status = "failed"
      exec.result = { status = "failed", error = { ename = proto.error_names[err.code] or "Error", evalue = session.err_text(err) } }
      if err.code == proto.error_codes.KernelDead then
        local k = state.kernels[exec.kernel]
        if k then
          k.state = "dead"
        end
      end
    end
  else
    exec.result = res or {}
    exec.status = exec.result.status or "ok"
    exec.count = exec.result.executionCount
    -- What it wrote (PROTOCOL.md §10): a line under its output, and a message.
    local what = util.describe_files(exec.result.filesChanged, exec.result.filesChangedMore)
    if what ~= "" then
      exec.files_line = util.execution_title({ executionCount = exec.count, executionId = exec.id }) .. " " .. what
      if session.config().notify_files_changed ~= false then
        session.notify(exec.files_line .. (exec.result.checkpoint and " (:CellboxUndo undoes it)" or ""))
      end
    end
  end
  local error = exec.result.error
  if error and exec.status ~= "interrupted" and exec.status ~= "aborted" then
    local s, e = output.exec_range(exec)
    local lnum = util.error_line(exec, error)
    if lnum then
      lnum = lnum - 1
    end
    if lnum == nil or lnum < 0 or lnum >= api.nvim_buf_line_count(exec.buf) then
      lnum = e or s or 0
    end
    exec.diagnostic = {
      lnum = lnum,
      col = 0,
      severity = vim.diagnostic.severity.ERROR,
      source = "cellbox",
      message = (error.ename or "Error") .. ((error.evalue and error.evalue ~= "") and (": " .. error.evalue) or ""),
    }
    output.set_diagnostics(exec.buf)
  end
  output.render(exec)
  if exec.on_done then
    pcall(exec.on_done, exec)
  end
  pcall(vim.cmd, "redrawstatus")
end

--- Runs rows s..e (0-based, inclusive) of buf. Returns the execution (a table with .done,
--- .status, .result, .outputs) or nil.
function M.run_range(buf, s, e, opts)
  opts = opts or {}
  buf = (buf == nil or buf == 0) and api.nvim_get_current_buf() or buf
  local lines = opts.lines or api.nvim_buf_get_lines(buf, s, e + 1, false)
  -- Leave out trailing blank lines so that the output sits under the last line of code.
  while #lines > 0 and lines[#lines]:match("^%s*$") do
    table.remove(lines)
    e = e - 1
  end
  if #lines == 0 then
    return nil
  end
  local code = table.concat(lines, "\n")
  local kid = kernels.kernel(buf)
  if not kid then
    return nil
  end
  output.clear(buf, s, e)
  output.map_diagnostic_keys(buf)
  state.seq = state.seq + 1
  local exec = {
    id = "nvim-" .. vim.fn.getpid() .. "-" .. state.seq,
    buf = buf,
    kernel = kid,
    language = state.kernels[kid].language,
    path = buf_path(buf),
    first_line = s + 1,
    outputs = {},
    status = "running",
    done = false,
    on_done = opts.on_done,
  }
  exec.start_mark = api.nvim_buf_set_extmark(buf, ns, s, 0, {})
  exec.mark = api.nvim_buf_set_extmark(buf, ns, e, 0, {})
  state.execs[exec.id] = exec
  state.buf_execs[buf] = state.buf_execs[buf] or {}
  table.insert(state.buf_execs[buf], exec)
  output.render(exec)
  local params = {
    kernelId = kid,
    code = code,
    executionId = exec.id,
    source = { path = exec.path, line = s + 1 },
    allowStdin = true,
    timeoutMs = session.config().timeout_ms,
    -- An automatic checkpoint first, so that :CellboxUndo can undo what the run writes (none is
    -- taken when nothing changed since the last one); only in an overlay workspace.
    checkpoint = (session.config().checkpoint_runs ~= false and state.workspace and state.workspace.mode == "overlay") or nil,
  }
  exec.request_id = state.client:request(methods.KernelExecute, params, function(err, res)
    finish(exec, err, res)
  end)
  require("cellbox").last_exec = exec
  return exec
end

function M.run_line(buf, lnum)
  buf = (buf == nil or buf == 0) and api.nvim_get_current_buf() or buf
  lnum = lnum or api.nvim_win_get_cursor(0)[1]
  return M.run_range(buf, lnum - 1, lnum - 1)
end

--- Runs lines line1..line2 (1-based, inclusive).
function M.run_selection(line1, line2, buf)
  if not line1 then
    line1 = vim.fn.line("'<")
    line2 = vim.fn.line("'>")
  end
  return M.run_range(buf, line1 - 1, line2 - 1)
end

--- Runs the last visual selection: linewise (V) runs whole lines; characterwise (v) runs just
--- the selected text (its first line keeps its line number for errors).
function M.run_visual()
  local buf = api.nvim_get_current_buf()
  local s = api.nvim_buf_get_mark(buf, "<")
  local e = api.nvim_buf_get_mark(buf, ">")
  if vim.fn.visualmode() ~= "v" then
    return M.run_range(buf, s[1] - 1, e[1] - 1)
  end
  local lines = api.nvim_buf_get_lines(buf, s[1] - 1, e[1], false)
  if #lines == 0 then
    return nil
  end
  -- '> of a characterwise selection is the first byte of the last character; include all of it.
  local last = lines[#lines]
  local ecol = e[2] + 1
  while ecol < #last and bit.band(last:byte(ecol + 1), 0xC0) == 0x80 do
    ecol = ecol + 1
  end
  lines[#lines] = last:sub(1, ecol)
  lines[1] = lines[1]:sub(s[2] + 1)
  return M.run_range(buf, s[1] - 1, e[1] - 1, { lines = lines })
end

--- The cells of buf: a list of {s, e} (0-based, inclusive); a line matching cell_pattern starts one.
function M.cells(buf)
  buf = (buf == nil or buf == 0) and api.nvim_get_current_buf() or buf
  local lines = api.nvim_buf_get_lines(buf, 0, -1, false)
  local pattern = session.config().cell_pattern
  local cells, start = {}, 0
  for i, l in ipairs(lines) do
    if l:match(pattern) and i - 1 > start then
      table.insert(cells, { start, i - 2 })
      start = i - 1
    elseif l:match(pattern) then
      start = i - 1
    end
  end
  if start <= #lines - 1 then
    table.insert(cells, { start, #lines - 1 })
  end
  return cells
end

--- The cell that holds row (0-based) of buf, its index, and all the cells.
function M.cell_at(buf, row)
  local cells = M.cells(buf)
  for i, c in ipairs(cells) do
    if row >= c[1] and row <= c[2] then
      return c, i, cells
    end
  end
  return nil, nil, cells
end
local cell_at = M.cell_at

function M.run_cell(buf, lnum)
  buf = (buf == nil or buf == 0) and api.nvim_get_current_buf() or buf
  lnum = lnum or api.nvim_win_get_cursor(0)[1]
  local c = cell_at(buf, lnum - 1)
  if not c then
    return nil
  end
  return M.run_range(buf, c[1], c[2])
end

--- Runs the cell under the cursor and moves the cursor to the first line of the next cell.
function M.run_cell_and_next()
  local buf = api.nvim_get_current_buf()
  local row = api.nvim_win_get_cursor(0)[1] - 1
  local c, i, cells = cell_at(buf, row)
  if not c then
    return nil
  end
  local exec = M.run_range(buf, c[1], c[2])
  local nxt = cells[i + 1]
  if nxt then
    local target = nxt[1] + 1
    if target > nxt[2] then
      target = nxt[1]
    end
    api.nvim_win_set_cursor(0, { target + 1, 0 })
  end
  return exec
end

--- Runs every cell above the one under the cursor, in order. Returns the executions.
function M.run_cells_above()
  local buf = api.nvim_get_current_buf()
  local row = api.nvim_win_get_cursor(0)[1] - 1
  local c, i, cells = cell_at(buf, row)
  local out = {}
  local upto = c and (i - 1) or #cells
  for j = 1, upto do
    local ex = M.run_range(buf, cells[j][1], cells[j][2])
    if ex then
      table.insert(out, ex)
    end
  end
  return out
end

function M.run_file(buf)
  buf = (buf == nil or buf == 0) and api.nvim_get_current_buf() or buf
  return M.run_range(buf, 0, api.nvim_buf_line_count(buf) - 1)
end

return M
