-- Kernels of cellbox.nvim: a buffer's language and kernel (started on first use, one per buffer
-- or shared per language), :CellboxKernel, interrupt, restart, shutdown, and the statusline.
local proto = require("cellbox.protocol")
local session = require("cellbox.session")

local methods = proto.methods
local api = vim.api
local state = session.state
local call, notify = session.call, session.notify

local M = {}

--- The cellbox language of buf's filetype (config.languages), or nil.
function M.language(buf)
  buf = buf or api.nvim_get_current_buf()
  local ft = api.nvim_buf_get_option(buf, "filetype")
  return session.config().languages[ft]
end

local function start_kernel(language)
  local c = session.client_or_err()
  if not c then
    return nil
  end
  local config = session.config()
  local params = { language = language, sandbox = config.sandbox, network = config.network, limits = config.limits }
  local ws = session.workspace()
  if config.workspace ~= false and not ws then
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
  if session.config().share_kernel and state.lang_kernel[lang] and state.kernels[state.lang_kernel[lang]] then
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

return M
