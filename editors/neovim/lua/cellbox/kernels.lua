-- Kernels of cellbox.nvim: a buffer's language and kernel (started on first use, one per buffer
-- or shared per language), :CellboxKernel, interrupt, restart, shutdown, and the statusline.
local proto = require("cellbox.protocol")
local session = require("cellbox.session")

local methods = proto.methods
local api = vim.api
local state = session.state
local call, notify = session.call, session.notify

local M = {}

--- The cellbox language of buf: config.languages[filetype], else (connecting to learn the
--- daemon's languages) one whose fileExtensions fit the buffer's file or filetype, such as
--- `jupyter:ir` for R (session.language_for). nil if none.
function M.language(buf)
  buf = (buf == nil or buf == 0) and api.nvim_get_current_buf() or buf
  local ft = api.nvim_buf_get_option(buf, "filetype")
  local lang = session.config().languages[ft]
  if lang then
    return lang
  end
  return (session.language_for(ft, api.nvim_buf_get_name(buf)))
end

local function start_kernel(language)
  local c = session.client_or_err()
  if not c then
    return nil
  end
  local config = session.config()
  local params = { language = language, sandbox = config.sandbox, limits = config.limits }
  local ws = session.workspace()
  if config.workspace ~= false and not ws then
    return nil
  end
  if ws then
    params.workspaceId = ws.workspaceId
  end
  -- The workspace's network and every rule (kernel/start sets them as workspace/setNetwork does).
  params.network, params.allow = require("cellbox.network").start_params(ws and ws.workspaceId)
  state.seq = state.seq + 1
  params.workDoneToken = "nvim-start-" .. state.seq
  local res = call(methods.KernelStart, params, 120000)
  if not res then
    return nil
  end
  state.kernels[res.kernelId] = { id = res.kernelId, language = res.language, state = "idle", info = res }
  local interp = res.interpreter
  if interp and interp.warning then
    notify(interp.warning, vim.log.levels.WARN)
  end
  return res.kernelId
end

--- Makes kid buf's kernel, and remembers it for the file (reattach.lua).
local function set_kernel(buf, kid)
  state.buf_kernel[buf] = kid
  require("cellbox.reattach").remember(buf, kid)
end

--- The kernel of buffer buf, started if needed (or, after a restart of Neovim, the kernel the
--- file ran in before, if the daemon still runs it). Returns the kernelId or nil.
function M.kernel(buf, start)
  buf = (buf == nil or buf == 0) and api.nvim_get_current_buf() or buf
  local kid = state.buf_kernel[buf]
  if kid and state.kernels[kid] then
    return kid
  end
  if start == false then
    return nil
  end
  kid = require("cellbox.reattach").try(buf)
  if kid then
    return kid
  end
  local lang = M.language(buf)
  if not lang then
    if not session.client_or_err() then
      return nil
    end
    notify("no cellbox language for filetype '" .. api.nvim_buf_get_option(buf, "filetype") .. "' (see :h cellbox-languages)", vim.log.levels.ERROR)
    return nil
  end
  if session.config().share_kernel and state.lang_kernel[lang] and state.kernels[state.lang_kernel[lang]] then
    kid = state.lang_kernel[lang]
  else
    kid = start_kernel(lang)
    if not kid then
      return nil
    end
    state.lang_kernel[lang] = state.lang_kernel[lang] or kid
  end
  set_kernel(buf, kid)
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
      set_kernel(buf, kid)
    end
    return kid
  end
  if arg and arg ~= "" then
    if state.kernels[arg] then
      set_kernel(buf, arg)
      return arg
    end
    -- A language: start a kernel of it for this buffer.
    local kid = start_kernel(arg)
    if kid then
      set_kernel(buf, kid)
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
  local own = M.language(buf)
  if own then
    table.insert(items, { kernelId = "new" })
  end
  -- A new kernel of any available language: cellbox's own, then the host's Jupyter kernels.
  for _, jupyter in ipairs({ false, true }) do
    for _, l in ipairs(session.languages()) do
      if l.available and session.is_jupyter(l.id) == jupyter and l.id ~= own then
        table.insert(items, { kernelId = "new", language = l.id })
      end
    end
  end
  vim.ui.select(items, {
    prompt = "cellbox kernel",
    format_item = function(k)
      if k.kernelId == "new" then
        return "new " .. M.describe(k.language or own) .. " kernel"
      end
      return string.format("%s  %s  %s  [%d]", k.kernelId, k.language, k.state or "", k.executionCount or 0)
    end,
  }, function(k)
    if not k then
      return
    end
    if k.kernelId == "new" then
      M.select_kernel(k.language or "new", buf)
    else
      if not state.kernels[k.kernelId] then
        state.kernels[k.kernelId] = { id = k.kernelId, language = k.language, state = k.state }
      end
      call(methods.KernelAttach, { kernelId = k.kernelId })
      set_kernel(buf, k.kernelId)
    end
  end)
end

--- "python", or "R (jupyter:ir, Jupyter kernel, sandboxed)" for the pickers.
function M.describe(language)
  local l = language and session.capability(language)
  if not l then
    return language or "?"
  end
  if session.is_jupyter(l.id) then
    return string.format("%s (%s, Jupyter kernel, sandboxed)", l.displayName or l.id, l.id)
  end
  return l.id
end

--- Completion of :CellboxKernel: `new`, every available language of the daemon (Jupyter kernels
--- as jupyter:NAME) and the kernels the plugin knows.
function M.complete_kernel(arglead)
  session.connect()
  local out = { "new" }
  for _, l in ipairs(session.languages()) do
    if l.available then
      table.insert(out, l.id)
    end
  end
  local ids = vim.tbl_keys(state.kernels)
  table.sort(ids)
  vim.list_extend(out, ids)
  return vim.tbl_filter(function(x)
    return vim.startswith(x, arglead or "")
  end, out)
end

-- The buffer's kernel and whether its language answers method; says why not when it does not.
local function kernel_for(buf, method)
  local kid = M.kernel(buf, false)
  if not kid then
    notify("no kernel for this buffer", vim.log.levels.WARN)
    return nil
  end
  local k = state.kernels[kid]
  if k and not session.supports(k.language, method) then
    notify(session.unsupported_message(k.language, method), vim.log.levels.INFO)
    return nil
  end
  return kid
end

function M.interrupt(buf)
  local kid = kernel_for(buf, methods.KernelInterrupt)
  if kid then
    return call(methods.KernelInterrupt, { kernelId = kid })
  end
end

function M.restart(buf)
  local kid = kernel_for(buf, methods.KernelRestart)
  if kid then
    return call(methods.KernelRestart, { kernelId = kid }, 60000)
  end
end

--- :CellboxVariables: the variables of the buffer's kernel in a float (name, type, value).
--- A kernel whose language cannot list them (a Jupyter kernel: languages[].unsupported) is not
--- asked; a message says so. Returns the float's buf, win and the variables, or nil.
function M.variables(buf)
  local kid = kernel_for(buf, methods.KernelVariables)
  if not kid then
    return nil
  end
  local res = call(methods.KernelVariables, { kernelId = kid })
  if not res then
    return nil
  end
  local vars = res.variables or {}
  if #vars == 0 then
    notify("no variables defined yet", vim.log.levels.INFO)
    return nil, nil, vars
  end
  local wname, wtype = 4, 4
  for _, v in ipairs(vars) do
    wname = math.max(wname, #v.name)
    wtype = math.max(wtype, #(v.type or ""))
  end
  local lines = { { string.format("%-" .. wname .. "s  %-" .. wtype .. "s  %s", "name", "type", "value"), "CellboxInfo" } }
  for _, v in ipairs(vars) do
    local summary = (v.summary or ""):gsub("\n", " ")
    table.insert(lines, { string.format("%-" .. wname .. "s  %-" .. wtype .. "s  %s", v.name, v.type or "", summary), "Normal" })
  end
  local fbuf, fwin = require("cellbox.util").open_float(lines, session.config().float, false, "cellbox-variables")
  return fbuf, fwin, vars
end

function M.shutdown(buf)
  local kid = M.kernel(buf, false)
  if not kid then
    return notify("no kernel for this buffer", vim.log.levels.WARN)
  end
  local res = call(methods.KernelShutdown, { kernelId = kid }, 60000)
  require("cellbox.reattach").forget_kernel(kid)
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

--- " (.venv)" when a kernel runs the project's own interpreter ("venv": the environment's
--- directory) or one picked for it (its version); "" for the host's.
function M.interpreter_tag(interp)
  if not interp or interp.source == "system" then
    return ""
  end
  if interp.source == "venv" then
    return " (" .. (interp.path:match("([^/]+)/bin/[^/]+$") or "venv") .. ")"
  end
  return " (" .. (interp.version or interp.source) .. ")"
end

--- For the statusline: "cellbox python (.venv): idle" for the current buffer's kernel, with progress.
function M.status(buf)
  buf = buf or api.nvim_get_current_buf()
  local parts = {}
  local kid = state.buf_kernel[buf]
  local k = kid and state.kernels[kid]
  if k then
    local s = "cellbox " .. k.language .. M.interpreter_tag(k.info and k.info.interpreter) .. ": " .. (k.state or "?")
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

return M
