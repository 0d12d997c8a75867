-- A file's kernel across restarts of Neovim. Under `cellbox connect` kernels belong to the user's
-- long-lived daemon and outlive the editor; the plugin keeps, for each file it ran code from, the
-- kernel it used (stdpath('data')/cellbox/kernels.json, by workspace root, then by file path),
-- and when the file is opened again (or first runs code) attaches to that kernel again: if
-- kernel/list still has it, of the same language, in the workspace the plugin now uses. Otherwise
-- the entry is dropped and the buffer gets a fresh kernel as usual.
local proto = require("cellbox.protocol")
local session = require("cellbox.session")

local methods = proto.methods
local api = vim.api
local state = session.state

local M = {}

-- At most this many files are remembered; the least recently used go first.
M.max_entries = 500

--- Whether kernels are remembered: config.reattach true or false, or "auto" (the default): when
--- the command is `cellbox connect` (a private `serve --stdio` daemon ends with Neovim).
function M.enabled()
  local r = session.config().reattach
  if r == nil or r == "auto" then
    return vim.tbl_contains(session.config().cmd or {}, "connect")
  end
  return r == true
end

function M.store_path()
  return vim.fn.stdpath("data") .. "/cellbox/kernels.json"
end

--- The store: {version = 1, roots = {[root] = {[path] = {kernelId, language, workspaceId, time}}}}.
function M.read()
  local f = io.open(M.store_path(), "r")
  if not f then
    return { version = 1, roots = {} }
  end
  local text = f:read("*a")
  f:close()
  local ok, t = pcall(vim.json.decode, text)
  if not ok or type(t) ~= "table" or type(t.roots) ~= "table" then
    return { version = 1, roots = {} }
  end
  return t
end

local function write(t)
  -- Only the newest max_entries files.
  local all = {}
  for root, files in pairs(t.roots) do
    if type(files) == "table" then
      for path, e in pairs(files) do
        table.insert(all, { root = root, path = path, time = tonumber(type(e) == "table" and e.time) or 0 })
      end
    end
  end
  if #all > M.max_entries then
    table.sort(all, function(a, b)
      return a.time > b.time
    end)
    for i = M.max_entries + 1, #all do
      t.roots[all[i].root][all[i].path] = nil
    end
  end
  for root, files in pairs(t.roots) do
    if next(files) == nil then
      t.roots[root] = nil
    end
  end
  if next(t.roots) == nil then
    t.roots = vim.empty_dict()
  end
  local path = M.store_path()
  vim.fn.mkdir(vim.fn.fnamemodify(path, ":h"), "p")
  local tmp = path .. ".tmp" .. vim.fn.getpid()
  local f, e = io.open(tmp, "w")
  if not f then
    session.notify("cannot write " .. tmp .. ": " .. tostring(e), vim.log.levels.WARN)
    return
  end
  f:write(vim.json.encode(t))
  f:close()
  local ok, re = os.rename(tmp, path)
  if not ok then
    os.remove(tmp)
    session.notify("cannot replace " .. path .. ": " .. tostring(re), vim.log.levels.WARN)
  end
end

--- The file of buf (its absolute path), or nil for a buffer without a name.
local function file_of(buf)
  if not api.nvim_buf_is_valid(buf) or api.nvim_buf_get_name(buf) == "" then
    return nil
  end
  return vim.fn.fnamemodify(api.nvim_buf_get_name(buf), ":p")
end

--- The remembered kernel of buf's file in the current project, or nil.
function M.entry(buf)
  local path = file_of(buf)
  if not path then
    return nil
  end
  local files = M.read().roots[session.root()]
  local e = type(files) == "table" and files[path] or nil
  if type(e) == "table" and type(e.kernelId) == "string" then
    return e
  end
end

--- Remembers that buf's file runs in kernel kid.
function M.remember(buf, kid)
  local path = file_of(buf)
  local k = state.kernels[kid]
  if not path or not k or not M.enabled() then
    return
  end
  local t = M.read()
  local root = session.root()
  t.roots[root] = type(t.roots[root]) == "table" and t.roots[root] or {}
  local prev = t.roots[root][path]
  if type(prev) == "table" and prev.kernelId == kid then
    return
  end
  t.roots[root][path] = {
    kernelId = kid,
    language = k.language,
    workspaceId = state.workspace and state.workspace.workspaceId or nil,
    time = os.time(),
  }
  write(t)
end

--- Forgets the files that ran in kernel kid (it was shut down).
function M.forget_kernel(kid)
  local t = M.read()
  local changed = false
  for _, files in pairs(t.roots) do
    for path, e in pairs(files) do
      if type(e) == "table" and e.kernelId == kid then
        files[path] = nil
        changed = true
      end
    end
  end
  if changed then
    write(t)
  end
end

local function forget(buf)
  local path = file_of(buf)
  local t = M.read()
  local files = t.roots[session.root()]
  if path and type(files) == "table" and files[path] then
    files[path] = nil
    write(t)
  end
end

--- Attaches buf to its file's remembered kernel if the daemon still runs it (once per buffer).
--- Returns the kernelId, or nil (the entry is dropped when its kernel is gone). quiet: say
--- nothing when the daemon cannot be reached (opening a file should not complain).
function M.try(buf, quiet)
  if state.reattach_tried[buf] or not M.enabled() then
    return nil
  end
  state.reattach_tried[buf] = true
  local e = M.entry(buf)
  if not e then
    return nil
  end
  local c, err = session.connect()
  if not c then
    if not quiet then
      session.notify(err or "not connected", vim.log.levels.ERROR)
    end
    state.reattach_tried[buf] = nil
    return nil
  end
  local lerr, res = c:request_sync(methods.KernelList, vim.empty_dict(), 30000)
  if lerr then
    session.notify("kernel/list: " .. session.err_text(lerr), vim.log.levels.WARN)
    return nil
  end
  local found
  for _, k in ipairs((res and res.kernels) or {}) do
    if k.kernelId == e.kernelId then
      found = k
    end
  end
  local ws = session.config().workspace ~= false and session.workspace() or nil
  if not found or found.state == "dead" or found.language ~= e.language or (ws and found.workspaceId ~= ws.workspaceId) then
    forget(buf)
    return nil
  end
  local aerr = c:request_sync(methods.KernelAttach, { kernelId = found.kernelId }, 30000)
  if aerr then
    session.notify("kernel/attach: " .. session.err_text(aerr), vim.log.levels.WARN)
    forget(buf)
    return nil
  end
  local kid = found.kernelId
  state.kernels[kid] = state.kernels[kid] or { id = kid, language = found.language }
  state.kernels[kid].state = found.state
  state.buf_kernel[buf] = kid
  state.lang_kernel[found.language] = state.lang_kernel[found.language] or kid
  local n = found.executionCount or 0
  session.notify(string.format("%s: attached to kernel %s again (%s, %d execution%s)", vim.fn.fnamemodify(api.nvim_buf_get_name(buf), ":t"), kid, found.language, n, n == 1 and "" or "s"))
  pcall(vim.cmd, "redrawstatus")
  return kid
end

--- BufReadPost: when the file has a remembered kernel, attach to it once Neovim is idle.
function M.on_read(buf)
  if not M.enabled() or state.buf_kernel[buf] or not M.entry(buf) then
    return
  end
  vim.schedule(function()
    if api.nvim_buf_is_valid(buf) and not state.buf_kernel[buf] then
      M.try(buf, true)
    end
  end)
end

return M
