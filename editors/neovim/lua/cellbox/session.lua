-- The session of cellbox.nvim with the daemon: the connection (the job that speaks the protocol,
-- initialized once), what the plugin knows of the daemon's state (kernels, executions, progress,
-- terminals), the workspace the kernels run in, and requests that report their errors. Every
-- other module reaches the daemon through this one.
local proto = require("cellbox.protocol")
local rpc = require("cellbox.rpc")
local util = require("cellbox.util")

local methods = proto.methods

local M = {}

--- What the plugin knows of the daemon (require('cellbox')._state is this table).
M.state = {
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
  keys_mapped = {}, -- bufnr -> true once ]d and [d were considered (output.map_diagnostic_keys)
  reattach_tried = {}, -- bufnr -> true once its file's remembered kernel was looked for (reattach.lua)
  seq = 0,
}
local state = M.state

--- The options of require('cellbox').setup (read when used: setup replaces the table).
function M.config()
  return require("cellbox").config
end

function M.notify(msg, level)
  vim.notify("cellbox: " .. msg, level or vim.log.levels.INFO)
end
local notify = M.notify

--- The message of a JSON-RPC error, with its data.detail.
function M.err_text(err)
  if type(err) ~= "table" then
    return tostring(err)
  end
  local s = err.message or ("error " .. tostring(err.code))
  if err.data and err.data.detail and err.data.detail ~= "" and not s:find(err.data.detail, 1, true) then
    s = s .. ": " .. err.data.detail
  end
  return s
end
local err_text = M.err_text

-- Notifications and requests from the daemon -------------------------------------------------

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
  if type(p.token) == "string" and p.token:sub(1, 13) == "nvim-install-" then
    require("cellbox.install").on_progress(p)
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

-- The connection -----------------------------------------------------------------------------

--- Returns the connected client, starting and initializing it if needed (nil, err on failure).
function M.connect()
  if state.client and not state.client.closed then
    return state.client
  end
  util.define_highlights()
  local config = M.config()
  local client, e = rpc.start(config.cmd, {
    env = config.env,
    on_exit = function(code)
      vim.schedule(function()
        if state.client and state.client.closed then
          local closed = state.client
          state.client = nil
          M.reset(closed, code)
        end
      end)
    end,
  })
  if not client then
    return nil, e
  end
  client:on(methods.KernelOutput, function(p)
    require("cellbox.output").on_output(p)
  end)
  client:on(methods.KernelStatus, on_status)
  client:on(methods.Progress, on_progress)
  client:on(methods.PtyOutput, function(p)
    require("cellbox.terminal").on_output(p)
  end)
  client:on(methods.PtyExit, function(p)
    require("cellbox.terminal").on_exit(p)
  end)
  client:on(methods.NetworkBlocked, function(p)
    require("cellbox.network").on_blocked(p)
  end)
  client:on(methods.WorkspacePorts, function(p)
    require("cellbox.preview").on_ports(p)
  end)
  client:on_request(methods.KernelInputRequest, on_input_request)
  local err, res = client:request_sync(methods.Initialize, {
    protocolVersion = proto.version,
    clientInfo = { name = "cellbox.nvim", version = require("cellbox").version },
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

--- Forgets what the plugin knew of a connection that ended: its unfinished executions end as
--- dead, its kernels and workspace are no longer known.
function M.reset(_, code)
  for id, exec in pairs(state.execs) do
    if not exec.done then
      exec.done = true
      exec.status = "dead"
      exec.result = { status = "dead", error = { ename = "Disconnected", evalue = "cellbox exited (" .. tostring(code) .. ")" } }
      require("cellbox.output").render(exec)
    end
    state.execs[id] = exec
  end
  state.kernels = {}
  state.buf_kernel = {}
  state.lang_kernel = {}
  state.reattach_tried = {}
  state.workspace = nil
  state.init = nil
end

--- The connected client, or nil after notifying why there is none.
function M.client_or_err()
  local c, e = M.connect()
  if not c then
    notify(e or "not connected", vim.log.levels.ERROR)
  end
  return c
end

--- Sends a request and waits for the reply; notifies and returns nil on error.
function M.call(method, params, timeout)
  local c = M.client_or_err()
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
  M.reset(c, "disconnected")
end

-- The daemon's languages ---------------------------------------------------------------------

--- The prefix of an installed Jupyter kernel's language id: jupyter:NAME (PROTOCOL.md §8).
M.jupyter_prefix = "jupyter:"

function M.is_jupyter(id)
  return type(id) == "string" and id:sub(1, #M.jupyter_prefix) == M.jupyter_prefix
end

--- initialize's capabilities.languages ({} before the connection is up).
function M.languages()
  local init = state.init or {}
  return (init.capabilities or {}).languages or {}
end

--- The capability of language id, if the daemon lists it.
function M.capability(id)
  for _, l in ipairs(M.languages()) do
    if l.id == id then
      return l
    end
  end
end

--- Whether the kernels of language id answer method (languages[].unsupported, PROTOCOL.md §8).
function M.supports(id, method)
  local l = M.capability(id)
  return not (l and l.unsupported and vim.tbl_contains(l.unsupported, method))
end

local actions = {
  [methods.KernelVariables] = "list variables",
  [methods.KernelComplete] = "complete code",
  [methods.KernelInspect] = "show documentation",
  [methods.KernelIsComplete] = "tell whether code is complete",
  [methods.KernelInterrupt] = "be interrupted",
  [methods.KernelRestart] = "be restarted",
  [methods.KernelHistory] = "list its history",
}

--- "this kernel (jupyter:ir, R) cannot list variables"
function M.unsupported_message(id, method)
  local l = M.capability(id)
  local name = id
  if l and l.displayName and l.displayName ~= "" then
    name = id .. ", " .. l.displayName
  end
  return string.format("this kernel (%s) cannot %s", name, actions[method] or ("answer " .. method))
end

-- 'filetype' -> the extension of that language, as the daemon gives it to a Jupyter kernel from
-- its kernelspec's language (other filetypes try "." .. filetype: r -> .r).
local filetype_extensions = { julia = ".jl", ruby = ".rb", typescript = ".ts", cpp = ".cpp", sh = ".sh", bash = ".sh", python = ".py", javascript = ".js" }

--- The extension of a file name with its dot (".R"), or nil ("Makefile", ".bashrc").
function M.extension(name)
  return vim.fn.fnamemodify(name or "", ":t"):match("^.+(%.[^.]+)$")
end

--- The language a buffer of filetype ft and file name runs in when config.languages has no
--- entry for ft: the language of id ft, else one whose fileExtensions include the file's extension
--- (or the filetype's: an `r` buffer runs in `jupyter:ir`). Available before unavailable, and
--- cellbox's own languages before Jupyter kernels (`.py` runs in `python`, not `jupyter:python3`);
--- one that is not available only when nothing else fits, so that starting it says why.
--- Needs the connection (initialize lists the languages): nil, err when there is none.
function M.language_for(ft, name)
  local _, e = M.connect()
  if e then
    return nil, e
  end
  local langs = M.languages()
  local by_id
  for _, l in ipairs(langs) do
    if ft and ft ~= "" and l.id == ft then
      by_id = l
    end
  end
  if by_id and by_id.available then
    return by_id.id
  end
  local exts = {}
  local ext = M.extension(name)
  if ext then
    table.insert(exts, ext)
  end
  if ft and ft ~= "" then
    table.insert(exts, filetype_extensions[ft] or ("." .. ft))
  end
  local function rank(l)
    return (l.available and 0 or 2) + (M.is_jupyter(l.id) and 1 or 0)
  end
  for _, exact in ipairs({ true, false }) do
    local best
    for _, l in ipairs(langs) do
      for _, le in ipairs(l.fileExtensions or {}) do
        for _, x in ipairs(exts) do
          if (exact and le == x) or (not exact and le:lower() == x:lower()) then
            if not best or rank(l) < rank(best) then
              best = l
            end
          end
        end
      end
    end
    if best and (best.available or not by_id) then
      return best.id
    end
  end
  return by_id and by_id.id or nil
end

-- The workspace ------------------------------------------------------------------------------

--- The project the workspace overlays: config.root (a path or a function) or the cwd.
function M.root()
  local r = M.config().root
  if type(r) == "function" then
    r = r()
  end
  return vim.fn.fnamemodify(r or vim.fn.getcwd(), ":p"):gsub("/$", "")
end

--- The workspace the kernels run in (opened on first use), or nil when config.workspace is false.
function M.workspace()
  local config = M.config()
  if config.workspace == false then
    return nil
  end
  if state.workspace then
    return state.workspace
  end
  local res = M.call(methods.WorkspaceOpen, { root = M.root(), mode = config.workspace })
  if res then
    state.workspace = res
  end
  return res
end

--- The workspace, as M.workspace; nil (with an error notified) when the option workspace is false.
function M.workspace_or_err()
  local ws = M.workspace()
  if not ws and M.config().workspace == false then
    notify("no workspace (the workspace option is false)", vim.log.levels.ERROR)
  end
  return ws
end

return M
