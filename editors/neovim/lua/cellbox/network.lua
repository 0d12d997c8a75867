-- The network of the workspace's sandbox (PROTOCOL.md §9): the rules the plugin set for each
-- workspace (the daemon does not say what they are, and workspace/setNetwork replaces them, so
-- the plugin keeps the list and sends all of it), the prompt of a `network/blocked` notification
-- (vim.ui.select: "Allow once", "Always allow"; at most one per rule at a time, and never again
-- for a rule dismissed in this session), :CellboxAllow and :CellboxNetwork. "Always allow" keeps
-- the rule in stdpath('data')/cellbox/network.json, by workspace root.
local proto = require("cellbox.protocol")
local session = require("cellbox.session")

local methods = proto.methods
local state = session.state
local notify = session.notify

local M = {}

M.ALLOW_ONCE = "Allow once"
M.ALWAYS_ALLOW = "Always allow"

-- workspaceId -> {mode, allow = {rule...}, pending = {rule = true}, dismissed = {rule = true}}
M.workspaces = {}

--- config.network as {mode, allow}: a string is the mode (the older form).
function M.config()
  local n = session.config().network
  if type(n) == "string" then
    return { mode = n, allow = {} }
  end
  n = n or {}
  return { mode = n.mode or "none", allow = n.allow or {} }
end

--- The file that keeps "Always allow"'s rules, by workspace root.
function M.store_path()
  return vim.fn.stdpath("data") .. "/cellbox/network.json"
end

function M.read_store()
  local f = io.open(M.store_path(), "r")
  if not f then
    return {}
  end
  local text = f:read("*a")
  f:close()
  local ok, t = pcall(vim.json.decode, text)
  return (ok and type(t) == "table") and t or {}
end

local function write_store(t)
  local path = M.store_path()
  vim.fn.mkdir(vim.fn.fnamemodify(path, ":h"), "p")
  local f, e = io.open(path, "w")
  if not f then
    notify("cannot write " .. path .. ": " .. tostring(e), vim.log.levels.ERROR)
    return
  end
  f:write(vim.json.encode(t))
  f:close()
end

--- Keeps rule for root in the store (and the mode "allowlist").
function M.persist(root, rule)
  local t = M.read_store()
  local entry = t[root] or {}
  entry.allow = entry.allow or {}
  if not vim.tbl_contains(entry.allow, rule) then
    table.insert(entry.allow, rule)
  end
  entry.mode = "allowlist"
  t[root] = entry
  write_store(t)
end

--- What the plugin knows of a workspace's network: from the config and the store at first.
function M.state(workspace_id)
  local s = M.workspaces[workspace_id]
  if s then
    return s
  end
  local c = M.config()
  local ws = state.workspace
  local stored = (ws and ws.workspaceId == workspace_id) and M.read_store()[ws.root or session.root()] or nil
  s = { mode = c.mode, allow = vim.deepcopy(c.allow), pending = {}, dismissed = {} }
  if stored then
    if stored.mode then
      s.mode = stored.mode
    end
    for _, r in ipairs(stored.allow or {}) do
      if not vim.tbl_contains(s.allow, r) then
        table.insert(s.allow, r)
      end
    end
  end
  M.workspaces[workspace_id] = s
  return s
end

--- network and allow for kernel/start and pty/open: the workspace's live rules (kernel/start sets
--- the workspace's network as workspace/setNetwork does, so it carries every rule).
function M.start_params(workspace_id)
  local s = workspace_id and M.state(workspace_id) or M.config()
  if s.mode == "allowlist" then
    return "allowlist", vim.deepcopy(s.allow)
  end
  return s.mode, nil
end

--- The rule that allows a blocked connection: the daemon's `rule`, else host:port.
function M.rule_for(p)
  if p.rule and p.rule ~= "" then
    return p.rule
  end
  local host = p.host or "?"
  if host:find(":", 1, true) and host:sub(1, 1) ~= "[" then
    host = "[" .. host .. "]"
  end
  return p.port and (host .. ":" .. tostring(p.port)) or host
end

--- "the kernel of a.py", "the python kernel": whose kernel a kernelId is.
function M.describe_kernel(kernel_id)
  local k = state.kernels[kernel_id]
  if not k then
    return "kernel " .. kernel_id
  end
  local names = {}
  for buf, kid in pairs(state.buf_kernel) do
    if kid == kernel_id and vim.api.nvim_buf_is_valid(buf) then
      local name = vim.fn.fnamemodify(vim.api.nvim_buf_get_name(buf), ":t")
      if name ~= "" then
        table.insert(names, name)
      end
    end
  end
  table.sort(names)
  if #names == 1 then
    return "the kernel of " .. names[1]
  end
  return "the " .. (k.language or "") .. " kernel"
end

--- "cellbox blocked pypi.org:443 (pypi.org is not in the allowlist) from the kernel of nb.py. Allow?"
function M.message(p)
  local s = "cellbox blocked " .. M.rule_for(p)
  if p.reason and p.reason ~= "" then
    s = s .. " (" .. p.reason .. ")"
  end
  if p.kernelId then
    s = s .. " from " .. M.describe_kernel(p.kernelId)
  end
  return s .. ". Allow?"
end

--- Sends the workspace's mode and every rule. cb(err) when given; else errors are notified.
function M.apply(workspace_id, cb)
  local s = M.state(workspace_id)
  local c = session.client_or_err()
  if not c then
    return
  end
  local network = s.mode == "allowlist" and "allowlist" or "none"
  local params = { workspaceId = workspace_id, network = network }
  if network == "allowlist" then
    params.allow = vim.deepcopy(s.allow)
  end
  c:request(methods.WorkspaceSetNetwork, params, function(err)
    if err then
      notify(methods.WorkspaceSetNetwork .. ": " .. session.err_text(err), vim.log.levels.ERROR)
    end
    if cb then
      cb(err)
    end
  end)
end

--- Allows rule in the workspace (switching it to "allowlist"); persist: for later sessions too.
function M.allow(workspace_id, rule, persist, cb)
  local s = M.state(workspace_id)
  if not vim.tbl_contains(s.allow, rule) then
    table.insert(s.allow, rule)
  end
  s.mode = "allowlist"
  s.dismissed[rule] = nil
  if persist then
    local ws = state.workspace
    M.persist((ws and ws.root) or session.root(), rule)
  end
  M.apply(workspace_id, cb)
end

--- A network/blocked notification: asks (scheduled: it arrives in a job callback) unless a prompt
--- for the rule shows, the user dismissed it this session, or it is allowed already.
function M.on_blocked(p)
  if not p or not p.workspaceId then
    return
  end
  local s = M.state(p.workspaceId)
  local rule = M.rule_for(p)
  if s.pending[rule] or s.dismissed[rule] or (s.mode == "allowlist" and vim.tbl_contains(s.allow, rule)) then
    return
  end
  s.pending[rule] = true
  local prompt = M.message(p)
  vim.schedule(function()
    vim.ui.select({ M.ALLOW_ONCE, M.ALWAYS_ALLOW }, { prompt = prompt, kind = "cellbox.network" }, function(choice)
      s.pending[rule] = nil
      if choice == M.ALLOW_ONCE or choice == M.ALWAYS_ALLOW then
        M.allow(p.workspaceId, rule, choice == M.ALWAYS_ALLOW, function(err)
          if not err then
            notify("allowed " .. rule .. (choice == M.ALWAYS_ALLOW and " (kept for this project)" or " (this session)"))
          end
        end)
      else
        s.dismissed[rule] = true
      end
    end)
  end)
end

--- :CellboxAllow {rule}: allows rule now and keeps it for the project.
function M.allow_cmd(rule)
  rule = vim.trim(rule or "")
  if rule == "" then
    local ws = session.workspace_or_err()
    if ws then
      local s = M.state(ws.workspaceId)
      notify("network " .. s.mode .. "; allowed: " .. (#s.allow > 0 and table.concat(s.allow, ", ") or "nothing"))
    end
    return
  end
  local ws = session.workspace_or_err()
  if ws then
    M.allow(ws.workspaceId, rule, true, function(err)
      if not err then
        notify("allowed " .. rule)
      end
    end)
  end
end

--- :CellboxNetwork none|allowlist: sets the workspace's network, keeping its rules.
function M.set_cmd(mode)
  if mode ~= "none" and mode ~= "allowlist" then
    notify("usage: :CellboxNetwork none|allowlist", vim.log.levels.ERROR)
    return
  end
  local ws = session.workspace_or_err()
  if not ws then
    return
  end
  M.state(ws.workspaceId).mode = mode
  M.apply(ws.workspaceId, function(err)
    if not err then
      notify("network " .. mode)
    end
  end)
end

return M
