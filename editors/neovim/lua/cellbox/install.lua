-- :CellboxInstall pip|npm {package...}: workspace/install (PROTOCOL.md §9) into the workspace's
-- environment (/env in the sandbox), its `$/progress` and result shown with vim.notify.
local proto = require("cellbox.protocol")
local session = require("cellbox.session")

local methods = proto.methods
local state = session.state
local notify = session.notify

local M = {}

M.token_prefix = "nvim-install-"

-- workDoneToken -> "pip install requests"
M.running = {}

--- "1.2 MB", "340 kB", "12 B".
function M.format_bytes(n)
  n = n or 0
  if n < 1000 then
    return string.format("%d B", n)
  elseif n < 1e6 then
    return string.format(n < 1e4 and "%.1f kB" or "%.0f kB", n / 1e3)
  elseif n < 1e9 then
    return string.format("%.1f MB", n / 1e6)
  end
  return string.format("%.1f GB", n / 1e9)
end

--- "installed requests 2.31.0, urllib3 2.0.7 (3 from cache, 1.2 MB downloaded, 2.1 s)"
function M.message(r)
  local names = {}
  for _, p in ipairs(r.installed or {}) do
    table.insert(names, vim.trim((p.name or "") .. " " .. (p.version or "")))
  end
  return string.format(
    "installed %s (%d from cache, %s downloaded, %.1f s)",
    #names > 0 and table.concat(names, ", ") or "nothing new",
    r.cacheHits or 0,
    M.format_bytes(r.downloadedBytes),
    (r.durationMs or 0) / 1000
  )
end

--- $/progress of an install's token: each begin and report as a notification.
function M.on_progress(p)
  local what = M.running[p.token]
  if not what or not p.value or p.value.kind == "end" then
    return
  end
  local text = table.concat(vim.tbl_filter(function(x)
    return x ~= nil and x ~= ""
  end, { p.value.title, p.value.message }), ": ")
  if text ~= "" then
    notify(what .. ": " .. text)
  end
end

--- Installs packages with manager ("pip" or "npm"); cb(err, result) when given. Returns the token.
function M.install(manager, packages, cb)
  if manager ~= "pip" and manager ~= "npm" then
    notify("usage: :CellboxInstall pip|npm {package...}", vim.log.levels.ERROR)
    return
  end
  if not packages or #packages == 0 then
    notify("usage: :CellboxInstall " .. manager .. " {package...}", vim.log.levels.ERROR)
    return
  end
  local c = session.client_or_err()
  if not c then
    return
  end
  local ws = session.workspace_or_err()
  if not ws then
    return
  end
  state.seq = state.seq + 1
  local token = M.token_prefix .. state.seq
  local what = manager .. " install " .. table.concat(packages, " ")
  M.running[token] = what
  notify(what .. " ...")
  c:request(methods.WorkspaceInstall, { workspaceId = ws.workspaceId, manager = manager, packages = packages, workDoneToken = token }, function(err, res)
    M.running[token] = nil
    if err then
      notify(what .. ": " .. session.err_text(err), vim.log.levels.ERROR)
    else
      notify(M.message(res))
    end
    if cb then
      cb(err, res)
    end
  end)
  return token
end

--- :CellboxInstall {manager} {package...}
function M.command(fargs)
  local manager = fargs[1]
  return M.install(manager, vim.list_slice(fargs, 2))
end

return M
