-- Previews of servers that run in the workspace's sandbox (PROTOCOL.md §11): the daemon says which
-- TCP ports servers listen on in the sandbox (`workspace/ports`, whenever that set changes); a
-- port that starts listening is announced with vim.notify (config.previews = "notify", the
-- default: nothing is exposed until :CellboxPreview), or exposed at once (`workspace/exposePort`:
-- a loopback origin of its own, with its own token) and its URL shown ("auto": every port, up to the
-- daemon's limit of previews per workspace), or offered with vim.ui.select ("ask"), or left alone
-- (false). :CellboxPreview[!] [port] exposes a port and shows its URL (! opens it in the
-- browser; no port: one of the listening ports, picked), :CellboxPreviews lists the ports and
-- previews, :CellboxUnpreview[!] [port] ends a preview (! every one). The URL shown and opened is
-- the preview's browserUrl (http://pv-ID.localhost:PORT/: a name of its own, which browsers resolve
-- to the loopback, a site whose cookies no other preview or loopback service shares), else its url
-- (curl resolves such names too; other programs take the loopback url of M.list).
local proto = require("cellbox.protocol")
local session = require("cellbox.session")

local methods = proto.methods
local notify = session.notify

local M = {}

M.PREVIEW = "Preview (show the URL)"
M.OPEN = "Open in the browser"

-- workspaceId -> {ports = {port...} (ascending), dismissed = {port = true}, asking = {port = true},
-- full = true once "auto" met the daemon's limit of previews (warned once, until a preview ends
-- or one is made)}
M.workspaces = {}

local function wstate(workspace_id)
  local s = M.workspaces[workspace_id]
  if not s then
    s = { ports = {}, dismissed = {}, asking = {}, full = false }
    M.workspaces[workspace_id] = s
  end
  return s
end

--- The ports servers listen on in the workspace's sandbox, as last notified.
function M.ports(workspace_id)
  return vim.deepcopy(wstate(workspace_id).ports)
end

--- Where a browser opens a preview: its own name when the daemon gives one, else its url.
function M.url(p)
  return (p.browserUrl ~= nil and p.browserUrl ~= vim.NIL and p.browserUrl ~= "") and p.browserUrl or p.url
end

--- "port 8000 of the sandbox: http://pv-1c2d3e4f5a6b.localhost:41234/?cellbox-preview=..."
function M.message(p)
  return string.format("port %d of the sandbox: %s", p.port, M.url(p))
end

--- Opens url in the browser: config.browser (a function, or a command list the URL is appended
--- to), else vim.ui.open (Neovim 0.10), else xdg-open (open on macOS).
function M.open_url(url)
  local b = session.config().browser
  if type(b) == "function" then
    return b(url)
  end
  if type(b) == "table" then
    local cmd = vim.deepcopy(b)
    table.insert(cmd, url)
    return vim.fn.jobstart(cmd, { detach = true })
  end
  if vim.ui.open then
    return vim.ui.open(url)
  end
  local opener = vim.fn.has("mac") == 1 and "open" or "xdg-open"
  if vim.fn.executable(opener) ~= 1 then
    notify("cannot open " .. url .. ": " .. opener .. " not found (set the option browser)", vim.log.levels.ERROR)
    return
  end
  return vim.fn.jobstart({ opener, url }, { detach = true })
end

--- workspace/exposePort, asynchronously: cb(err, preview).
local function expose_async(workspace_id, port, cb)
  local c = session.client_or_err()
  if not c then
    return
  end
  c:request(methods.WorkspaceExposePort, { workspaceId = workspace_id, port = port, protocol = "http" }, cb)
end

--- "a server listens on port 8000 — :CellboxPreview 8000 to preview it"
function M.listening_message(port)
  return string.format("a server listens on port %d — :CellboxPreview %d to preview it", port, port)
end

--- Whether err is the daemon's LimitExceeded (the workspace has as many previews as it may).
local function is_limit(err)
  return type(err) == "table" and err.code == proto.error_codes.LimitExceeded
end

--- Exposes port and shows its URL (and opens it when open); scheduled, for notifications. auto:
--- the port appeared with previews = "auto", where the daemon's limit of previews is warned
--- about once (not an error per port).
local function expose_and_show(workspace_id, port, open, auto)
  expose_async(workspace_id, port, function(err, p)
    vim.schedule(function()
      local s = wstate(workspace_id)
      if err then
        if auto and is_limit(err) then
          if not s.full then
            s.full = true
            notify(
              "port "
                .. port
                .. " and the ports after it are not previewed: "
                .. session.err_text(err)
                .. ". Free previews with :CellboxUnpreview {port} or :CellboxUnpreview! (:CellboxPreviews lists them)",
              vim.log.levels.WARN
            )
          end
          return
        end
        notify("cannot preview port " .. port .. ": " .. session.err_text(err), vim.log.levels.ERROR)
        return
      end
      s.full = false
      notify(M.message(p) .. (open and "" or " (:CellboxPreview! " .. port .. " opens it)"))
      if open then
        M.open_url(M.url(p))
      end
    end)
  end)
end

--- A workspace/ports notification: each port that was not listening before is announced
--- (config.previews "notify", the default), previewed ("auto"), offered ("ask"; not again while
--- it listens once dismissed), or left alone (false).
function M.on_ports(p)
  if not p or not p.workspaceId then
    return
  end
  local s = wstate(p.workspaceId)
  local before = {}
  for _, port in ipairs(s.ports) do
    before[port] = true
  end
  local ports = vim.deepcopy(p.ports or {})
  table.sort(ports)
  s.ports = ports
  local now = {}
  for _, port in ipairs(ports) do
    now[port] = true
  end
  for port in pairs(s.dismissed) do
    if not now[port] then
      s.dismissed[port] = nil
    end
  end
  local mode = session.config().previews
  if mode == false then
    return
  end
  for _, port in ipairs(ports) do
    if not before[port] and not s.dismissed[port] and not s.asking[port] then
      if mode == "ask" then
        s.asking[port] = true
        vim.schedule(function()
          local prompt = string.format("cellbox: a server listens on port %d in the sandbox", port)
          vim.ui.select({ M.PREVIEW, M.OPEN }, { prompt = prompt, kind = "cellbox.preview" }, function(choice)
            s.asking[port] = nil
            if choice == M.PREVIEW or choice == M.OPEN then
              expose_and_show(p.workspaceId, port, choice == M.OPEN, false)
            else
              s.dismissed[port] = true
            end
          end)
        end)
      elseif mode == "auto" then
        expose_and_show(p.workspaceId, port, false, true)
      else
        vim.schedule(function()
          notify(M.listening_message(port))
        end)
      end
    end
  end
end

--- workspace/previews of the workspace, by port; nil on error (notified).
function M.list(workspace_id)
  local res = session.call(methods.WorkspacePreviews, { workspaceId = workspace_id })
  if not res then
    return nil
  end
  local list = type(res.previews) == "table" and vim.deepcopy(res.previews) or {}
  table.sort(list, function(a, b)
    return a.port < b.port
  end)
  return list
end

--- Exposes a valid port and shows its URL (opens it when open); returns the preview.
local function expose_sync(workspace_id, port, open)
  local p = session.call(methods.WorkspaceExposePort, { workspaceId = workspace_id, port = port, protocol = "http" })
  if not p then
    return nil
  end
  wstate(workspace_id).full = false
  notify(M.message(p))
  if open then
    M.open_url(M.url(p))
  end
  return p
end

--- Exposes port and shows its URL; open: opens it in the browser too. Returns the preview. No
--- port: the only listening port, or one picked with vim.ui.select among the listening ports (the
--- preview is then made when picked, and nil returned).
function M.preview(port, open)
  local ws = session.workspace_or_err()
  if not ws then
    return nil
  end
  if port == nil or port == "" then
    local listening = wstate(ws.workspaceId).ports
    if #listening == 0 then
      notify("no server listens in the sandbox: :CellboxPreview {port} previews a port", vim.log.levels.WARN)
      return nil
    end
    if #listening == 1 then
      return expose_sync(ws.workspaceId, listening[1], open)
    end
    local have = {}
    for _, p in ipairs(M.list(ws.workspaceId) or {}) do
      have[p.port] = p
    end
    vim.ui.select(vim.deepcopy(listening), {
      prompt = "cellbox: preview port",
      kind = "cellbox.preview",
      format_item = function(l)
        return have[l] and string.format("port %d  %s", l, M.url(have[l])) or string.format("port %d", l)
      end,
    }, function(l)
      if l then
        expose_sync(ws.workspaceId, l, open)
      end
    end)
    return nil
  end
  port = tonumber(port)
  if not port or port < 1 or port > 65535 or port % 1 ~= 0 then
    notify("a port: 1 to 65535", vim.log.levels.ERROR)
    return nil
  end
  return expose_sync(ws.workspaceId, port, open)
end

--- The lines :CellboxPreviews shows: every listening port and every preview.
function M.lines(workspace_id)
  local list = M.list(workspace_id)
  if not list then
    return nil
  end
  local by_port = {}
  for _, p in ipairs(list) do
    by_port[p.port] = p
  end
  local listening = {}
  local ports = {}
  for _, port in ipairs(wstate(workspace_id).ports) do
    listening[port] = true
    table.insert(ports, port)
  end
  for _, p in ipairs(list) do
    if not listening[p.port] then
      table.insert(ports, p.port)
    end
  end
  table.sort(ports)
  local lines = {}
  for _, port in ipairs(ports) do
    local p = by_port[port]
    if p then
      table.insert(lines, string.format("%5d  %s%s", port, M.url(p), listening[port] and "" or "  (not listening)"))
    else
      table.insert(lines, string.format("%5d  listening, not previewed", port))
    end
  end
  return lines
end

--- :CellboxPreviews: the listening ports and the previews with their URLs. Returns the lines.
function M.show()
  local ws = session.workspace_or_err()
  if not ws then
    return nil
  end
  local lines = M.lines(ws.workspaceId)
  if not lines then
    return nil
  end
  if #lines == 0 then
    notify("no server listens in the sandbox, and no port is previewed")
  else
    notify("ports of the sandbox:\n" .. table.concat(lines, "\n"))
  end
  return lines
end

local function unexpose(p)
  if session.call(methods.WorkspaceUnexposePort, { previewId = p.previewId }) then
    local ws = session.state.workspace
    if ws then
      wstate(ws.workspaceId).full = false
    end
    notify("stopped the preview of port " .. p.port)
    return true
  end
  return false
end

--- :CellboxUnpreview [port]: ends the preview of port (no port: the only one, or one picked with
--- vim.ui.select); all: every preview. Returns the ports whose preview ended.
function M.unpreview(port, all)
  local ws = session.workspace_or_err()
  if not ws then
    return nil
  end
  local list = M.list(ws.workspaceId)
  if not list then
    return nil
  end
  if #list == 0 then
    notify("no port is previewed")
    return {}
  end
  local stopped = {}
  if all then
    for _, p in ipairs(list) do
      if unexpose(p) then
        table.insert(stopped, p.port)
      end
    end
    return stopped
  end
  if port ~= nil and port ~= "" then
    port = tonumber(port)
    for _, p in ipairs(list) do
      if p.port == port then
        return unexpose(p) and { p.port } or {}
      end
    end
    notify("port " .. tostring(port) .. " is not previewed", vim.log.levels.ERROR)
    return {}
  end
  if #list == 1 then
    return unexpose(list[1]) and { list[1].port } or {}
  end
  vim.ui.select(list, {
    prompt = "cellbox: stop the preview of",
    kind = "cellbox.preview",
    format_item = function(p)
      return string.format("port %d  %s", p.port, M.url(p))
    end,
  }, function(p)
    if p then
      unexpose(p)
    end
  end)
  return stopped
end

--- Completion of :CellboxPreview and :CellboxUnpreview: the listening ports.
function M.complete()
  local ws = session.state.workspace
  if not ws then
    return {}
  end
  return vim.tbl_map(tostring, wstate(ws.workspaceId).ports)
end

return M
