-- Workspace commands of cellbox.nvim: changes, diff, commit, discard, checkpoints; what each
-- execution changed and undoing one; export to a git branch or a patch, fork (PROTOCOL.md §10).
local proto = require("cellbox.protocol")
local util = require("cellbox.util")
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

--- :CellboxChanges[!]: the changed files of the workspace in the quickfix list; a rename is one
--- entry, "renamed old → new"; the changes of paths the project's .gitignore ignores are left
--- out (the title and a message say how many) unless ignored (:CellboxChanges!). Returns the
--- changes (both entries of a rename) and how many were left out.
function M.changes(open, ignored)
  local ws = ws_or_err()
  if not ws then
    return
  end
  local res = call(methods.WorkspaceChanges, { workspaceId = ws.workspaceId, ignored = ignored or nil })
  if not res then
    return
  end
  local changes = res.changes or {}
  local by_path = {}
  for _, c in ipairs(changes) do
    by_path[c.path] = c
  end
  local items = {}
  for _, c in ipairs(changes) do
    local pair = c.kind == "deleted" and c.renamedTo and by_path[c.renamedTo] and by_path[c.renamedTo].renamedFrom == c.path
    if not pair then
      local what = c.kind
      if c.kind == "added" and c.renamedFrom and by_path[c.renamedFrom] and by_path[c.renamedFrom].renamedTo == c.path then
        what = "renamed " .. c.renamedFrom .. " → " .. c.path
      end
      table.insert(items, {
        filename = ws.root .. "/" .. c.path,
        lnum = 1,
        text = what .. (c.binary and " (binary)" or "") .. (c.size and (" " .. c.size .. " bytes") or ""),
      })
    end
  end
  local hidden = res.ignored or 0
  local note = hidden > 0 and (hidden .. " ignored change" .. (hidden == 1 and "" or "s") .. " hidden (:CellboxChanges! shows them)") or nil
  vim.fn.setqflist({}, " ", { title = "cellbox changes" .. (note and (" · " .. note) or ""), items = items })
  if open ~= false then
    if #items > 0 then
      vim.cmd("copen")
    end
    if note then
      notify(#items == 0 and ("no changes; " .. note) or note)
    elseif #items == 0 then
      notify("no changes")
    end
  end
  return changes, hidden
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
  -- Newest first, the user's before the automatic ones (taken before executions).
  local list = {}
  for i = #cps, 1, -1 do
    if not cps[i].auto then
      table.insert(list, cps[i])
    end
  end
  for i = #cps, 1, -1 do
    if cps[i].auto then
      table.insert(list, cps[i])
    end
  end
  cps = list
  vim.ui.select(cps, {
    prompt = "restore checkpoint",
    format_item = function(cp)
      return (cp.auto and "[automatic] " or "") .. cp.name .. "  " .. cp.checkpointId .. "  " .. cp.files .. " files"
    end,
  }, function(cp)
    if cp then
      do_restore(cp)
    end
  end)
end

-- What executions changed (PROTOCOL.md §10) ----------------------------------------------------

--- Asks a yes/no question (tests replace it).
function M.confirm(question, yes)
  return vim.fn.confirm(question, "&" .. (yes or "Yes") .. "\n&Cancel", 2) == 1
end

--- workspace/executions: the records of the recent executions that changed files, oldest first.
function M.executions()
  local ws = ws_or_err()
  if not ws then
    return
  end
  local res = call(methods.WorkspaceExecutions, { workspaceId = ws.workspaceId })
  return res and res.executions or nil
end

--- The records of the quickfix list :CellboxExecutions made, by item.
M.qf_records = {}
local executions_title = "cellbox executions"

--- :CellboxExecutions: the recent executions of the workspace (this editor's and any other
--- client's, such as an agent's through `cellbox mcp`), newest first, with the files each
--- changed, in the quickfix list. Returns the records (oldest first).
function M.executions_qf(open)
  local ws = ws_or_err()
  if not ws then
    return
  end
  local recs = M.executions()
  if not recs then
    return
  end
  local items, by_item = {}, {}
  for i = #recs, 1, -1 do
    local r = recs[i]
    local title = util.execution_title(r) .. (r.checkpoint and " [undo: :CellboxUndo]" or "")
    for _, f in ipairs(r.filesChanged or {}) do
      table.insert(items, { filename = ws.root .. "/" .. f.path, lnum = 1, text = title .. " " .. (f.kind == "deleted" and "deleted" or "wrote") .. (f.kind == "added" and " (new)" or "") })
      table.insert(by_item, r)
    end
    if r.more and r.more > 0 then
      table.insert(items, { text = title .. " and " .. r.more .. " more files" })
      table.insert(by_item, r)
    end
  end
  M.qf_records = by_item
  vim.fn.setqflist({}, " ", { title = executions_title, items = items })
  if open ~= false then
    if #items > 0 then
      vim.cmd("copen")
    else
      notify("no execution of this workspace changed files yet")
    end
  end
  return recs
end

--- Restores the workspace to before an execution (its automatic checkpoint), after asking.
local function undo_record(ws, r)
  if not r.checkpoint then
    notify(util.execution_title(r) .. " has no checkpoint to restore (it ran without one)", vim.log.levels.WARN)
    return
  end
  local q = "Restore the workspace's files to how they were before " .. util.execution_title(r) .. "?\n" .. "What it and every later execution or edit changed is undone (the state before is kept as checkpoint 'before-restore').\n" .. "The kernel's memory (variables, imports) is not rolled back."
  if not M.confirm(q, "Restore") then
    return
  end
  local res = call(methods.WorkspaceRestore, { workspaceId = ws.workspaceId, checkpointId = r.checkpoint })
  if res then
    notify("the files are as before " .. util.execution_title(r) .. "; the kernel's variables were not rolled back")
    vim.cmd("checktime")
  end
  return res
end

--- :CellboxUndo [N|executionId]: restores the workspace to before execution N (the newest of
--- that count) or executionId; without one, the execution of the quickfix entry under the
--- cursor (in :CellboxExecutions's list), else one picked from those that can be undone.
function M.undo(arg)
  local ws = ws_or_err()
  if not ws then
    return
  end
  arg = arg ~= "" and arg or nil
  if not arg and vim.bo.buftype == "quickfix" and vim.fn.getqflist({ title = 1 }).title == executions_title then
    local r = M.qf_records[vim.fn.line(".")]
    if r then
      return undo_record(ws, r)
    end
  end
  local recs = M.executions() or {}
  if arg then
    for i = #recs, 1, -1 do
      local r = recs[i]
      if r.executionId == arg or tostring(r.executionCount) == arg then
        return undo_record(ws, r)
      end
    end
    return notify("no execution " .. arg .. " among the workspace's recent ones", vim.log.levels.ERROR)
  end
  local undoable = {}
  for i = #recs, 1, -1 do
    if recs[i].checkpoint and #(recs[i].filesChanged or {}) > 0 then
      table.insert(undoable, recs[i])
    end
  end
  if #undoable == 0 then
    return notify("no execution to undo")
  end
  vim.ui.select(undoable, {
    prompt = "restore to before",
    format_item = function(r)
      return util.execution_title(r) .. ": " .. util.describe_files(r.filesChanged, r.more)
    end,
  }, function(r)
    if r then
      undo_record(ws, r)
    end
  end)
end

-- Hand-off (PROTOCOL.md §10) ---------------------------------------------------------------------

--- :CellboxExportGit [branch]: a commit of the workspace's changes written to the project's git
--- repository as branch (its working tree, index and current branch untouched). Without a
--- branch, asks. A branch that points elsewhere is overwritten only when confirmed. Returns the
--- result.
function M.export_git(branch)
  local ws = ws_or_err()
  if not ws then
    return
  end
  if not branch or branch == "" then
    branch = vim.fn.input("cellbox: export the changes to branch: ", "cellbox/" .. os.date("%Y-%m-%d"))
    if branch == "" then
      return
    end
  end
  local c = session.client_or_err()
  if not c then
    return
  end
  local params = { workspaceId = ws.workspaceId, branch = branch }
  local err, res = c:request_sync(methods.WorkspaceExportGit, params, 60000)
  if err and err.code == proto.error_codes.Conflict and M.confirm("Branch " .. branch .. " exists and points elsewhere (" .. session.err_text(err) .. "). Overwrite it?", "Overwrite") then
    params.force = true
    err, res = c:request_sync(methods.WorkspaceExportGit, params, 60000)
  end
  if err then
    notify(methods.WorkspaceExportGit .. ": " .. session.err_text(err), vim.log.levels.ERROR)
    return nil, err
  end
  if not res then
    return
  end
  local base = res.baseline and (", on top of " .. res.baseline:sub(1, 10) .. " (a commit of the project's uncommitted work)") or ""
  notify("exported " .. res.files .. " file(s) to branch " .. res.branch .. ": commit " .. res.commit:sub(1, 10) .. base)
  return res
end

--- :CellboxExportPatch: the workspace's changes as one patch (`git apply` takes it) in a scratch
--- buffer of filetype diff (`:w name.patch` saves it). Returns the buffer.
function M.export_patch()
  local ws = ws_or_err()
  if not ws then
    return
  end
  local res = call(methods.WorkspaceExportPatch, { workspaceId = ws.workspaceId }, 60000)
  if not res then
    return
  end
  if (res.files or 0) == 0 then
    notify("no changes to export")
    return
  end
  local lines = vim.split(res.patch or "", "\n", { plain = true })
  if lines[#lines] == "" then
    table.remove(lines)
  end
  vim.cmd("new")
  local buf = api.nvim_get_current_buf()
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  api.nvim_buf_set_option(buf, "buftype", "nofile")
  api.nvim_buf_set_option(buf, "bufhidden", "wipe")
  api.nvim_buf_set_option(buf, "filetype", "diff")
  pcall(api.nvim_buf_set_name, buf, "cellbox://patch/" .. buf)
  notify("patch of " .. res.files .. " file(s)")
  return buf
end

--- :CellboxFork[!] [name]: a new workspace with a copy of this one's changes; says its name and
--- id. With !, the plugin uses it from now on: buffers' kernels start there (the kernels of the
--- workspace before keep running; :CellboxKernel lists them). Returns the new workspace.
function M.fork(name, switch)
  local ws = ws_or_err()
  if not ws then
    return
  end
  local res = call(methods.WorkspaceFork, { workspaceId = ws.workspaceId, name = (name and name ~= "") and name or nil })
  if not res then
    return
  end
  local msg = "forked workspace " .. (ws.name or ws.workspaceId) .. " as " .. (res.name or res.workspaceId) .. " (" .. res.workspaceId .. ")"
  if switch then
    state.workspace = res
    state.buf_kernel = {}
    state.lang_kernel = {}
    msg = msg .. "; runs use it from now on"
  else
    msg = msg .. " (:CellboxFork! switches to a fork)"
  end
  notify(msg)
  return res
end

return M
