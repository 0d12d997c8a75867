-- Output of cellbox.nvim's executions in the buffer: the status at the end of the last line
-- run, the output in virtual lines under it, errors as diagnostics, the full output in a float,
-- and clearing it. (The output model and its lines are in util.lua.)
local session = require("cellbox.session")
local util = require("cellbox.util")
local kitty = require("cellbox.kitty")

local api = vim.api
local state = session.state

local M = {}

M.ns = api.nvim_create_namespace("cellbox")
M.diag_ns = api.nvim_create_namespace("cellbox.diagnostics")
local ns = M.ns

--- Rows (0-based) of the code an execution ran, as its extmarks have moved with edits; nil when
--- the buffer or the marks are gone.
function M.exec_range(exec)
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
local exec_range = M.exec_range

--- Sets buf's diagnostics to the errors of its executions.
function M.set_diagnostics(buf)
  local list = {}
  for _, exec in ipairs(state.buf_execs[buf] or {}) do
    if exec.diagnostic then
      table.insert(list, exec.diagnostic)
    end
  end
  vim.diagnostic.set(M.diag_ns, buf, list)
end

--- Maps ]d and [d in buf (buffer-local, normal mode) to vim.diagnostic.goto_next/goto_prev,
--- once, unless config.diagnostic_keys is false or the key is mapped already (by the user, or
--- by Neovim 0.10's defaults): Neovim 0.7.2 has no default for them.
function M.map_diagnostic_keys(buf)
  if session.config().diagnostic_keys == false or state.keys_mapped[buf] then
    return
  end
  state.keys_mapped[buf] = true
  for lhs, fn in pairs({ ["]d"] = "goto_next", ["[d"] = "goto_prev" }) do
    local taken = api.nvim_buf_call(buf, function()
      return vim.fn.maparg(lhs, "n") ~= ""
    end)
    if not taken then
      vim.keymap.set("n", lhs, function()
        vim.diagnostic[fn]()
      end, { buffer = buf, silent = true, desc = "cellbox: vim.diagnostic." .. fn })
    end
  end
end

local function remove_exec(exec)
  kitty.forget(exec)
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
  M.set_diagnostics(buf)
end

--- Shows an execution's status and output under the last line it ran.
function M.render(exec)
  exec.dirty = false
  if exec.removed or not api.nvim_buf_is_valid(exec.buf) then
    return
  end
  local _, e = exec_range(exec)
  if not e then
    return
  end
  local config = session.config()
  local lines = util.render_lines(exec, config)
  local max = config.virt_lines or 6
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
  if exec.files_line then
    -- The files the execution changed, always shown (like a truncation note).
    table.insert(virt, { { "  ↳ " .. exec.files_line, "CellboxInfo" } })
  end
  if kitty.enabled(config) then
    -- The image inline (kitty graphics protocol), over blank lines reserved under the output.
    local img = kitty.image_for(exec, config)
    if img then
      img.offset = #virt
      for _ = 1, img.rows do
        table.insert(virt, { { " ", "CellboxOutput" } })
      end
      kitty.schedule_refresh()
    end
  end
  local opts = { id = exec.mark, virt_text = { util.status_chunk(exec) }, virt_text_pos = "eol" }
  if #virt > 0 then
    opts.virt_lines = virt
  end
  pcall(api.nvim_buf_set_extmark, exec.buf, ns, e, 0, opts)
end

--- Renders an execution once the current batch of notifications is handled.
function M.render_later(exec)
  if exec.dirty then
    return
  end
  exec.dirty = true
  vim.schedule(function()
    if exec.dirty then
      M.render(exec)
    end
  end)
end

--- kernel/output: adds the output to its execution.
function M.on_output(p)
  local exec = state.execs[p.executionId]
  if not exec then
    return
  end
  util.add_output(exec, p)
  M.render_later(exec)
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
    session.notify("no output here", vim.log.levels.WARN)
    return nil
  end
  local config = session.config()
  local lines = util.render_lines(exec, config)
  local header = util.status_chunk(exec)
  table.insert(lines, 1, { header[1], header[2] })
  if exec.files_line then
    table.insert(lines, { exec.files_line, "CellboxInfo" })
  end
  return util.open_float(lines, config.float, opts.enter ~= false, "cellbox-output")
end

return M
