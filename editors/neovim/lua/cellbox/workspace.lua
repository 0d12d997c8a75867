-- Workspace commands of cellbox.nvim: changes, diff, commit, discard, checkpoints.
local proto = require("cellbox.protocol")
local methods = proto.methods
local api = vim.api

local M = {}

local session = require("cellbox.session")
local call, notify = session.call, session.notify
local state = session.state

local function ws_or_err()
  local ws = session.workspace()
  if not ws then
    notify("no workspace (config.workspace is false or opening it failed)", vim.log.levels.ERROR)
  end
  return ws
end

local function paths_arg(path)
  if path == nil or path == "" then
    return nil
  end
  local root = state.workspace.root or session.root()
  local abs = vim.fn.fnamemodify(path, ":p")
  if vim.startswith(abs, root .. "/") then
    return { abs:sub(#root + 2) }
  end
  return { path }
end

--- :CellboxChanges: the changed files of the workspace in the quickfix list. Returns the changes.
function M.changes(open)
  local ws = ws_or_err()
  if not ws then
    return
  end
  local res = call(methods.WorkspaceChanges, { workspaceId = ws.workspaceId })
  if not res then
    return
  end
  local items = {}
  for _, c in ipairs(res.changes or {}) do
    table.insert(items, {
      filename = ws.root .. "/" .. c.path,
      lnum = 1,
      text = c.kind .. (c.binary and " (binary)" or "") .. (c.size and (" " .. c.size .. " bytes") or ""),
    })
  end
  vim.fn.setqflist({}, " ", { title = "cellbox changes", items = items })
  if open ~= false then
    if #items > 0 then
      vim.cmd("copen")
    else
      notify("no changes")
    end
  end
  return res.changes
end

--- :CellboxDiff [path]: the workspace's diff in a new split. Returns the buffer.
function M.diff(path)
  local ws = ws_or_err()
  if not ws then
    return
  end
  local res = call(methods.WorkspaceDiff, { workspaceId = ws.workspaceId, paths = paths_arg(path) })
  if not res then
    return
  end
  local lines = {}
  for _, f in ipairs(res.files or {}) do
    if f.binary then
      table.insert(lines, "Binary file " .. f.path .. " " .. f.kind)
    else
      for _, l in ipairs(vim.split(f.diff or "", "\n", { plain = true })) do
        table.insert(lines, l)
      end
      if lines[#lines] == "" then
        table.remove(lines)
      end
    end
  end
  if #lines == 0 then
    notify("no changes")
    return
  end
  vim.cmd("new")
  local buf = api.nvim_get_current_buf()
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  api.nvim_buf_set_option(buf, "buftype", "nofile")
  api.nvim_buf_set_option(buf, "bufhidden", "wipe")
  api.nvim_buf_set_option(buf, "modifiable", false)
  api.nvim_buf_set_option(buf, "filetype", "diff")
  pcall(api.nvim_buf_set_name, buf, "cellbox://diff/" .. buf)
  return buf
end

--- :CellboxCommit [path]: apply the workspace's changes (or one file's) to the project.
function M.commit(path)
  local ws = ws_or_err()
  if not ws then
    return
  end
  local res = call(methods.WorkspaceCommit, { workspaceId = ws.workspaceId, paths = paths_arg(path) })
  if not res then
    return
  end
  local msg = "committed " .. #(res.applied or {}) .. " file(s)"
  if res.conflicts and #res.conflicts > 0 then
    local c = {}
    for _, x in ipairs(res.conflicts) do
      table.insert(c, x.path .. " (" .. (x.reason or "conflict") .. ")")
    end
    notify(msg .. "; conflicts, not overwritten: " .. table.concat(c, ", "), vim.log.levels.WARN)
  else
    notify(msg)
  end
  vim.cmd("checktime")
  return res
end

--- :CellboxDiscard [path]: drop the workspace's changes (or one file's).
function M.discard(path)
  local ws = ws_or_err()
  if not ws then
    return
  end
  local res = call(methods.WorkspaceDiscard, { workspaceId = ws.workspaceId, paths = paths_arg(path) })
  if res then
    notify("discarded " .. #(res.discarded or {}) .. " file(s)")
  end
  return res
end

--- :CellboxCheckpoint [name]
function M.checkpoint(name)
  local ws = ws_or_err()
  if not ws then
    return
  end
  local res = call(methods.WorkspaceCheckpoint, { workspaceId = ws.workspaceId, name = (name ~= "" and name) or nil })
  if res then
    notify("checkpoint " .. res.name .. " (" .. res.checkpointId .. ", " .. res.files .. " files)")
  end
  return res
end

function M.checkpoints()
  local ws = ws_or_err()
  if not ws then
    return
  end
  local res = call(methods.WorkspaceCheckpoints, { workspaceId = ws.workspaceId })
  return res and res.checkpoints or nil
end

--- :CellboxRestore [checkpointId|name]: without an argument, pick one.
function M.restore(id)
  local ws = ws_or_err()
  if not ws then
    return
  end
  local cps = M.checkpoints() or {}
  local function do_restore(cp)
    local res = call(methods.WorkspaceRestore, { workspaceId = ws.workspaceId, checkpointId = cp.checkpointId })
    if res then
      notify("restored " .. cp.name .. " (the state before is checkpoint 'before-restore')")
    end
    return res
  end
  if id and id ~= "" then
    for _, cp in ipairs(cps) do
      if cp.checkpointId == id or cp.name == id then
        return do_restore(cp)
      end
    end
    return notify("no checkpoint " .. id, vim.log.levels.ERROR)
  end
  if #cps == 0 then
    return notify("no checkpoints")
  end
  vim.ui.select(cps, {
    prompt = "restore checkpoint",
    format_item = function(cp)
      return cp.name .. "  " .. cp.checkpointId .. "  " .. cp.files .. " files"
    end,
  }, function(cp)
    if cp then
      do_restore(cp)
    end
  end)
end

return M
