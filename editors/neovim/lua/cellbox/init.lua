-- cellbox.nvim: run lines, selections and `# %%` cells in cellbox's sandboxed kernels, with the
-- output inline. See doc/cellbox.txt.
local proto = require("cellbox.protocol")
local rpc = require("cellbox.rpc")
local util = require("cellbox.util")

local methods = proto.methods
local api = vim.api

local M = {}

M.version = "0.1.0"

local default_config = {
  -- The command that speaks the protocol on stdio. `cellbox connect` bridges to the user's
  -- long-lived daemon (kernels outlive Neovim); {"cellbox", "serve", "--stdio"} runs a private one.
  cmd = { "cellbox", "connect" },
  -- Extra environment for the job (e.g. { CELLBOX_STATE_DIR = "/tmp/x" }).
  env = nil,
  -- The project the workspace overlays: a path, a function returning one, or nil for the cwd.
  root = nil,
  -- Workspace mode for kernels: "overlay" (default), "scratch" or "direct"; false: every kernel
  -- gets a scratch workspace of its own (and the workspace commands are unavailable).
  workspace = "overlay",
  -- Filetype -> cellbox language.
  languages = { python = "python", javascript = "javascript", sh = "bash", bash = "bash" },
  -- One kernel per buffer (false), or one per language shared by every buffer (true).
  share_kernel = false,
  -- A line matching this Lua pattern starts a cell.
  cell_pattern = "^%s*[#/;%-]+%s*%%%%",
  -- Kernel options passed to kernel/start.
  sandbox = "required",
  network = nil,
  limits = nil,
  -- Per-execution timeout in ms (nil: the kernel's default).
  timeout_ms = nil,
  -- Virtual lines shown under the code that ran; more are in :CellboxOutput.
  virt_lines = 6,
  -- Where images (image/png, image/svg+xml) are saved.
  image_dir = nil,
  float = { border = "rounded", max_width = 120, max_height = 30 },
}

M.config = vim.deepcopy(default_config)

local ns = api.nvim_create_namespace("cellbox")
local diag_ns = api.nvim_create_namespace("cellbox.diagnostics")
M.ns = ns
M.diag_ns = diag_ns

-- State.
local state = {
  client = nil, ---@type cellbox.Client|nil
  init = nil, -- initialize result
  workspace = nil, -- {workspaceId, root, mode}
  kernels = {}, -- kernelId -> {id, language, state, reason}
  buf_kernel = {}, -- bufnr -> kernelId
  lang_kernel = {}, -- language -> kernelId (share_kernel)
  execs = {}, -- executionId -> exec
  buf_execs = {}, -- bufnr -> {exec...}
  progress = {}, -- token -> value
  ptys = {}, -- ptyId -> {buf, chan, win}
  seq = 0,
}
M._state = state

local function notify(msg, level)
  vim.notify("cellbox: " .. msg, level or vim.log.levels.INFO)
end

local function err_text(err)
  if type(err) ~= "table" then
    return tostring(err)
  end
  local s = err.message or ("error " .. tostring(err.code))
  if err.data and err.data.detail and err.data.detail ~= "" and not s:find(err.data.detail, 1, true) then
    s = s .. ": " .. err.data.detail
  end
  return s
end
M.err_text = err_text

function M.setup(opts)
  M.config = vim.tbl_deep_extend("force", vim.deepcopy(default_config), opts or {})
  if opts and opts.languages then
    M.config.languages = vim.tbl_extend("force", default_config.languages, opts.languages)
  end
  util.define_highlights()
  return M
end

-- Connection -----------------------------------------------------------------------------

local function on_output(p)
  local exec = state.execs[p.executionId]
  if not exec then
    return
  end
  util.add_output(exec, p)
  M._render_later(exec)
end

local function on_status(p)
  local k = state.kernels[p.kernelId]
  if k then
    k.state = p.state
    k.reason = p.reason
  end
  pcall(vim.cmd, "redrawstatus")
end

local function on_progress(p)
  if not p or not p.token then
    return
  end
  if p.value and p.value.kind == "end" then
    state.progress[p.token] = nil
  else
    local prev = state.progress[p.token] or {}
    state.progress[p.token] = vim.tbl_extend("force", prev, p.value or {})
  end
  pcall(vim.cmd, "redrawstatus")
end

local function on_input_request(p, reply)
  vim.schedule(function()
    local prompt = (p and p.prompt) or ""
    if p and p.password then
      local ok, v = pcall(vim.fn.inputsecret, prompt)
      if ok then
        reply(nil, { value = v })
      else
        reply({ code = -32800, message = "input cancelled" })
      end
      return
    end
    vim.ui.input({ prompt = prompt }, function(v)
      if v == nil then
        reply({ code = -32800, message = "input cancelled" })
      else
        reply(nil, { value = v })
      end
    end)
  end)
end

--- Returns the connected client, starting and initializing it if needed (nil, err on failure).
function M.connect()
  if state.client and not state.client.closed then
    return state.client
  end
  util.define_highlights()
  local client, e = rpc.start(M.config.cmd, {
    env = M.config.env,
    on_exit = function(code)
      vim.schedule(function()
        if state.client and state.client.closed then
          local closed = state.client
          state.client = nil
          M._reset(closed, code)
        end
      end)
    end,
  })
  if not client then
    return nil, e
  end
  client:on(methods.KernelOutput, on_output)
  client:on(methods.KernelStatus, on_status)
  client:on(methods.Progress, on_progress)
  client:on(methods.PtyOutput, function(p)
    require("cellbox.terminal").on_output(p)
  end)
  client:on(methods.PtyExit, function(p)
    require("cellbox.terminal").on_exit(p)
  end)
  client:on_request(methods.KernelInputRequest, on_input_request)
  local err, res = client:request_sync(methods.Initialize, {
    protocolVersion = proto.version,
    clientInfo = { name = "cellbox.nvim", version = M.version },
    capabilities = { inputRequest = true, positionEncoding = proto.enums.PositionEncoding.UTF8 },
  }, 30000)
  if err then
    local tail = table.concat(client.stderr, "\n")
    client:stop()
    return nil, "initialize failed: " .. err_text(err) .. (tail ~= "" and ("\n" .. tail) or "")
  end
  client:notify(methods.Initialized, vim.empty_dict())
  state.client = client
  state.init = res
  return client
end

function M._reset(_, code)
  for id, exec in pairs(state.execs) do
    if not exec.done then
      exec.done = true
      exec.status = "dead"
      exec.result = { status = "dead", error = { ename = "Disconnected", evalue = "cellbox exited (" .. tostring(code) .. ")" } }
      M._render(exec)
    end
    state.execs[id] = exec
  end
  state.kernels = {}
  state.buf_kernel = {}
  state.lang_kernel = {}
  state.workspace = nil
  state.init = nil
end

local function client_or_err()
  local c, e = M.connect()
  if not c then
    notify(e or "not connected", vim.log.levels.ERROR)
  end
  return c
end

--- Sends a request and waits for the reply; notifies and returns nil on error.
local function call(method, params, timeout)
  local c = client_or_err()
  if not c then
    return nil
  end
  local err, res = c:request_sync(method, params, timeout or 30000)
  if err then
    notify(method .. ": " .. err_text(err), vim.log.levels.ERROR)
    return nil, err
  end
  return res
end
M._call = call
M._notify = notify
M._client_or_err = client_or_err

-- Workspace --------------------------------------------------------------------------------

function M.root()
  local r = M.config.root
  if type(r) == "function" then
    r = r()
  end
  return vim.fn.fnamemodify(r or vim.fn.getcwd(), ":p"):gsub("/$", "")
end

--- The workspace the kernels run in (opened on first use), or nil when config.workspace is false.
function M.workspace()
  if M.config.workspace == false then
    return nil
  end
  if state.workspace then
    return state.workspace
  end
  local res = call(methods.WorkspaceOpen, { root = M.root(), mode = M.config.workspace })
  if res then
    state.workspace = res
  end
  return res
end

-- Kernels ------------------------------------------------------------------------------------

function M.language(buf)
  buf = buf or api.nvim_get_current_buf()
  local ft = api.nvim_buf_get_option(buf, "filetype")
  return M.config.languages[ft]
end

local function start_kernel(language)
  local c = client_or_err()
  if not c then
    return nil
  end
  local params = { language = language, sandbox = M.config.sandbox, network = M.config.network, limits = M.config.limits }
  local ws = M.workspace()
  if M.config.workspace ~= false and not ws then
    return nil
  end
  if ws then
    params.workspaceId = ws.workspaceId
  end
  state.seq = state.seq + 1
  params.workDoneToken = "nvim-start-" .. state.seq
  local res = call(methods.KernelStart, params, 120000)
  if not res then
    return nil
  end
  state.kernels[res.kernelId] = { id = res.kernelId, language = res.language, state = "idle", info = res }
  return res.kernelId
end

--- The kernel of buffer buf, started if needed. Returns the kernelId or nil.
function M.kernel(buf, start)
  buf = (buf == nil or buf == 0) and api.nvim_get_current_buf() or buf
  local kid = state.buf_kernel[buf]
  if kid and state.kernels[kid] then
    return kid
  end
  if start == false then
    return nil
  end
  local lang = M.language(buf)
  if not lang then
    notify("no cellbox language for filetype '" .. api.nvim_buf_get_option(buf, "filetype") .. "' (see :h cellbox-languages)", vim.log.levels.ERROR)
    return nil
  end
  if M.config.share_kernel and state.lang_kernel[lang] and state.kernels[state.lang_kernel[lang]] then
    kid = state.lang_kernel[lang]
  else
    kid = start_kernel(lang)
    if not kid then
      return nil
    end
    state.lang_kernel[lang] = state.lang_kernel[lang] or kid
  end
  state.buf_kernel[buf] = kid
  return kid
end

--- :CellboxKernel [new|LANGUAGE|KERNELID]: without an argument, pick one of the running kernels
--- (or a new one) for this buffer; kernels can be shared by several buffers.
function M.select_kernel(arg, buf)
  buf = buf or api.nvim_get_current_buf()
  if arg == "new" then
    local lang = M.language(buf)
    if not lang then
      return notify("no language for this buffer", vim.log.levels.ERROR)
    end
    local kid = start_kernel(lang)
    if kid then
      state.buf_kernel[buf] = kid
    end
    return kid
  end
  if arg and arg ~= "" then
    if state.kernels[arg] then
      state.buf_kernel[buf] = arg
      return arg
    end
    -- A language: start a kernel of it for this buffer.
    local kid = start_kernel(arg)
    if kid then
      state.buf_kernel[buf] = kid
    end
    return kid
  end
  local res = call(methods.KernelList, vim.empty_dict())
  if not res then
    return
  end
  local items = {}
  for _, k in ipairs(res.kernels or {}) do
    table.insert(items, k)
    if not state.kernels[k.kernelId] then
      state.kernels[k.kernelId] = { id = k.kernelId, language = k.language, state = k.state }
    end
  end
  table.insert(items, { kernelId = "new" })
  vim.ui.select(items, {
    prompt = "cellbox kernel",
    format_item = function(k)
      if k.kernelId == "new" then
        return "new " .. (M.language(buf) or "?") .. " kernel"
      end
      return string.format("%s  %s  %s  [%d]", k.kernelId, k.language, k.state or "", k.executionCount or 0)
    end,
  }, function(k)
    if not k then
      return
    end
    if k.kernelId == "new" then
      M.select_kernel("new", buf)
    else
      if not state.kernels[k.kernelId] then
        state.kernels[k.kernelId] = { id = k.kernelId, language = k.language, state = k.state }
      end
      call(methods.KernelAttach, { kernelId = k.kernelId })
      state.buf_kernel[buf] = k.kernelId
    end
  end)
end

function M.interrupt(buf)
  local kid = M.kernel(buf, false)
  if not kid then
    return notify("no kernel for this buffer", vim.log.levels.WARN)
  end
  return call(methods.KernelInterrupt, { kernelId = kid })
end

function M.restart(buf)
  local kid = M.kernel(buf, false)
  if not kid then
    return notify("no kernel for this buffer", vim.log.levels.WARN)
  end
  return call(methods.KernelRestart, { kernelId = kid }, 60000)
end

function M.shutdown(buf)
  local kid = M.kernel(buf, false)
  if not kid then
    return notify("no kernel for this buffer", vim.log.levels.WARN)
  end
  local res = call(methods.KernelShutdown, { kernelId = kid }, 60000)
  state.kernels[kid] = nil
  for b, k in pairs(state.buf_kernel) do
    if k == kid then
      state.buf_kernel[b] = nil
    end
  end
  for l, k in pairs(state.lang_kernel) do
    if k == kid then
      state.lang_kernel[l] = nil
    end
  end
  return res
end

--- For the statusline: "cellbox python: idle" for the current buffer's kernel, with progress.
function M.status(buf)
  buf = buf or api.nvim_get_current_buf()
  local parts = {}
  local kid = state.buf_kernel[buf]
  local k = kid and state.kernels[kid]
  if k then
    local s = "cellbox " .. k.language .. ": " .. (k.state or "?")
    if k.reason then
      s = s .. " (" .. k.reason .. ")"
    end
    table.insert(parts, s)
  end
  for _, v in pairs(state.progress) do
    local p = v.title or ""
    if v.message then
      p = p .. (p ~= "" and ": " or "") .. v.message
    end
    if v.percentage then
      p = p .. string.format(" %d%%", v.percentage)
    end
    table.insert(parts, p)
  end
  return table.concat(parts, " | ")
end

-- Executions ---------------------------------------------------------------------------------

local function buf_path(buf)
  local name = api.nvim_buf_get_name(buf)
  if name == "" then
    return "untitled-" .. buf
  end
  return name
end

local function exec_range(exec)
  if not api.nvim_buf_is_valid(exec.buf) then
    return nil
  end
  local ok1, s = pcall(api.nvim_buf_get_extmark_by_id, exec.buf, ns, exec.start_mark, {})
  local ok2, e = pcall(api.nvim_buf_get_extmark_by_id, exec.buf, ns, exec.mark, {})
  if not ok1 or not ok2 or not s[1] or not e[1] then
    return nil
  end
  return s[1], e[1]
end
M._exec_range = exec_range

local function set_diagnostics(buf)
  local list = {}
  for _, exec in ipairs(state.buf_execs[buf] or {}) do
    if exec.diagnostic then
      table.insert(list, exec.diagnostic)
    end
  end
  vim.diagnostic.set(diag_ns, buf, list)
end

local function remove_exec(exec)
  pcall(api.nvim_buf_del_extmark, exec.buf, ns, exec.mark)
  pcall(api.nvim_buf_del_extmark, exec.buf, ns, exec.start_mark)
  exec.removed = true
  local list = state.buf_execs[exec.buf] or {}
  for i, e in ipairs(list) do
    if e == exec then
      table.remove(list, i)
      break
    end
  end
end

--- Clears the output of executions overlapping rows s..e (0-based), or all of buf's.
function M.clear(buf, s, e)
  buf = (buf == nil or buf == 0) and api.nvim_get_current_buf() or buf
  for _, exec in ipairs(vim.list_slice(state.buf_execs[buf] or {}, 1)) do
    local es, ee = exec_range(exec)
    if s == nil or es == nil or (es <= e and ee >= s) then
      remove_exec(exec)
    end
  end
  set_diagnostics(buf)
end

function M._render(exec)
  exec.dirty = false
  if exec.removed or not api.nvim_buf_is_valid(exec.buf) then
    return
  end
  local _, e = exec_range(exec)
  if not e then
    return
  end
  local lines = util.render_lines(exec, M.config)
  local max = M.config.virt_lines or 6
  local virt = {}
  for i, l in ipairs(lines) do
    if max > 0 and i > max - 1 and #lines > max then
      table.insert(virt, { { "  … " .. (#lines - i + 1) .. " more lines (:CellboxOutput)", "CellboxInfo" } })
      break
    end
    table.insert(virt, { { "  " .. l[1], l[2] } })
  end
  if exec.result and exec.result.outputTruncated and #lines > max and max > 0 then
    -- Always say that output was dropped, even when the virtual lines are cut short.
    table.insert(virt, { { "  " .. lines[#lines][1], lines[#lines][2] } })
  end
  local opts = { id = exec.mark, virt_text = { util.status_chunk(exec) }, virt_text_pos = "eol" }
  if #virt > 0 then
    opts.virt_lines = virt
  end
  pcall(api.nvim_buf_set_extmark, exec.buf, ns, e, 0, opts)
end

function M._render_later(exec)
  if exec.dirty then
    return
  end
  exec.dirty = true
  vim.schedule(function()
    if exec.dirty then
      M._render(exec)
    end
  end)
end

local function finish(exec, err, res)
  exec.done = true
  if err then
    if err.code == proto.error_codes.RequestCancelled then
      exec.status = "interrupted"
      exec.result = { status = "interrupted" }
    else
      exec.status = "failed"
      exec.result = { status = "failed", error = { ename = proto.error_names[err.code] or "Error", evalue = err_text(err) } }
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
  end
  local error = exec.result.error
  if error and exec.status ~= "interrupted" and exec.status ~= "aborted" then
    local s, e = exec_range(exec)
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
    set_diagnostics(exec.buf)
  end
  M._render(exec)
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
  local kid = M.kernel(buf)
  if not kid then
    return nil
  end
  M.clear(buf, s, e)
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
  M._render(exec)
  local params = {
    kernelId = kid,
    code = code,
    executionId = exec.id,
    source = { path = exec.path, line = s + 1 },
    allowStdin = true,
    timeoutMs = M.config.timeout_ms,
  }
  exec.request_id = state.client:request(methods.KernelExecute, params, function(err, res)
    finish(exec, err, res)
  end)
  M.last_exec = exec
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
  local cells, start = {}, 0
  for i, l in ipairs(lines) do
    if l:match(M.config.cell_pattern) and i - 1 > start then
      table.insert(cells, { start, i - 2 })
      start = i - 1
    elseif l:match(M.config.cell_pattern) then
      start = i - 1
    end
  end
  if start <= #lines - 1 then
    table.insert(cells, { start, #lines - 1 })
  end
  return cells
end

local function cell_at(buf, row)
  local cells = M.cells(buf)
  for i, c in ipairs(cells) do
    if row >= c[1] and row <= c[2] then
      return c, i, cells
    end
  end
  return nil, nil, cells
end

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

--- The execution whose range holds row (0-based) in buf, else the buffer's latest.
function M.exec_at(buf, row)
  buf = (buf == nil or buf == 0) and api.nvim_get_current_buf() or buf
  row = row or (api.nvim_win_get_cursor(0)[1] - 1)
  local list = state.buf_execs[buf] or {}
  for i = #list, 1, -1 do
    local s, e = exec_range(list[i])
    if s and row >= s and row <= e then
      return list[i]
    end
  end
  return list[#list]
end

--- Opens the full output of the execution under the cursor (or the latest) in a float.
--- Returns the float's buffer and window.
function M.show_output(exec, opts)
  opts = opts or {}
  exec = exec or M.exec_at()
  if not exec then
    notify("no output here", vim.log.levels.WARN)
    return nil
  end
  local lines = util.render_lines(exec, M.config, true)
  local header = util.status_chunk(exec)
  table.insert(lines, 1, { header[1], header[2] })
  return util.open_float(lines, M.config.float, opts.enter ~= false, "cellbox-output")
end

-- Completion and inspection ------------------------------------------------------------------

local function code_to_cursor()
  local buf = api.nvim_get_current_buf()
  local cur = api.nvim_win_get_cursor(0)
  local row, col = cur[1] - 1, cur[2]
  local c = cell_at(buf, row)
  local s = c and c[1] or row
  local lines = api.nvim_buf_get_lines(buf, s, row + 1, false)
  lines[#lines] = lines[#lines]:sub(1, col)
  local code = table.concat(lines, "\n")
  local line_offset = #code - #lines[#lines]
  return code, line_offset
end

M._complete = { col = -3, matches = {} }

--- Completion from the kernel: set 'omnifunc' to v:lua.require'cellbox'.omnifunc.
function M.omnifunc(findstart, base)
  if findstart == 1 then
    local kid = M.kernel(0)
    if not kid then
      return -3
    end
    local code, line_offset = code_to_cursor()
    local res = call(methods.KernelComplete, { kernelId = kid, code = code, cursorPos = #code }, 5000)
    if not res then
      return -3
    end
    M._complete = { col = math.max(0, (res.cursorStart or #code) - line_offset), matches = res.matches or {} }
    return M._complete.col
  end
  local out = {}
  for _, m in ipairs(M._complete.matches) do
    if base == nil or base == "" or vim.startswith(m, base) then
      table.insert(out, { word = m, menu = "[cellbox]" })
    end
  end
  return out
end

--- Completion candidates for the code before the cursor (for completion plugins):
--- returns {matches, cursorStart, cursorEnd} with byte offsets on the cursor line.
function M.complete()
  local kid = M.kernel(0)
  if not kid then
    return nil
  end
  local code, line_offset = code_to_cursor()
  local res = call(methods.KernelComplete, { kernelId = kid, code = code, cursorPos = #code }, 5000)
  if not res then
    return nil
  end
  return { matches = res.matches or {}, cursorStart = res.cursorStart - line_offset, cursorEnd = res.cursorEnd - line_offset }
end

--- K-style inspect of the name under the cursor, in a float. Returns the float's buf, win.
function M.inspect()
  local kid = M.kernel(0)
  if not kid then
    return nil
  end
  local line = api.nvim_get_current_line()
  local col = api.nvim_win_get_cursor(0)[2]
  -- Inspect the whole word under the cursor.
  local e = col
  while e < #line and line:sub(e + 1, e + 1):match("[%w_]") do
    e = e + 1
  end
  local res = call(methods.KernelInspect, { kernelId = kid, code = line, cursorPos = e, detailLevel = 0 }, 5000)
  if not res then
    return nil
  end
  if not res.found or not res.data then
    notify("nothing found", vim.log.levels.INFO)
    return nil
  end
  local text = res.data["text/plain"] or res.data["text/markdown"] or vim.inspect(res.data)
  local lines = {}
  for _, l in ipairs(vim.split(util.strip_ansi(text), "\n", { plain = true })) do
    table.insert(lines, { l, "Normal" })
  end
  return util.open_float(lines, M.config.float, false, "cellbox-inspect")
end

-- Workspace commands (lua/cellbox/workspace.lua) and the terminal (lua/cellbox/terminal.lua) --

for _, name in ipairs({ "changes", "diff", "commit", "discard", "checkpoint", "checkpoints", "restore" }) do
  M[name] = function(...)
    return require("cellbox.workspace")[name](...)
  end
end
for _, name in ipairs({ "terminal", "resize_terminals" }) do
  M[name] = function(...)
    return require("cellbox.terminal")[name](...)
  end
end

function M.stop()
  if state.client then
    state.client:stop()
  end
end

--- Closes the connection and forgets its kernels (they run on in a `cellbox connect` daemon;
--- :CellboxKernel lists them and attaches again).
function M.disconnect()
  local c = state.client
  if not c then
    return
  end
  c:stop()
  vim.wait(5000, function()
    return c.closed
  end, 10)
  state.client = nil
  M._reset(c, "disconnected")
end

return M
