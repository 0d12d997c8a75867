-- :CellboxTerminal: a sandboxed pty of the workspace in a terminal buffer.
local proto = require("cellbox.protocol")
local methods = proto.methods
local api = vim.api

local M = {}

local session = require("cellbox.session")
local call = session.call
local state = session.state

-- Notifications of a pty that arrive before its pty/open reply has been handled (they can share
-- a read) are kept here and replayed once the terminal buffer exists.
local pty_early = {}

function M.on_output(p)
  local t = state.ptys[p.ptyId]
  if not t then
    pty_early[p.ptyId] = pty_early[p.ptyId] or {}
    table.insert(pty_early[p.ptyId], { "output", p })
    return
  end
  if t.chan then
    pcall(api.nvim_chan_send, t.chan, p.data or "")
  end
  t.received = (t.received or "") .. (p.data or "")
  if #t.received > 65536 then
    t.received = t.received:sub(-32768)
  end
  if state.client then
    state.client:request(methods.PtyAck, { ptyId = p.ptyId, seq = p.seq })
  end
end

function M.on_exit(p)
  local t = state.ptys[p.ptyId]
  if not t then
    pty_early[p.ptyId] = pty_early[p.ptyId] or {}
    table.insert(pty_early[p.ptyId], { "exit", p })
    return
  end
  t.exited = true
  t.exit_code = p.exitCode
  if t.chan then
    pcall(api.nvim_chan_send, t.chan, "\r\n[process exited " .. tostring(p.exitCode) .. "]\r\n")
  end
end


--- :CellboxTerminal [command...]: a sandboxed pty of the workspace in a terminal buffer.
--- Returns the buffer and the ptyId.
function M.terminal(command)
  local c = session.client_or_err()
  if not c then
    return
  end
  local ws = session.workspace()
  vim.cmd("botright new")
  local buf = api.nvim_get_current_buf()
  local win = api.nvim_get_current_win()
  local params = {
    cols = api.nvim_win_get_width(win),
    rows = api.nvim_win_get_height(win),
    workspaceId = ws and ws.workspaceId or nil,
    command = (command and #command > 0) and command or nil,
  }
  params.network, params.allow = require("cellbox.network").start_params(ws and ws.workspaceId)
  local res = call(methods.PtyOpen, params)
  if not res then
    vim.cmd("bwipeout! " .. buf)
    return
  end
  local pty = res.ptyId
  local t = { buf = buf, win = win, cols = params.cols, rows = params.rows }
  state.ptys[pty] = t
  t.chan = api.nvim_open_term(buf, {
    on_input = function(_, _, _, data)
      if state.client and not t.exited then
        state.client:request(methods.PtyWrite, { ptyId = pty, data = data })
      end
    end,
  })
  local early = pty_early[pty] or {}
  pty_early[pty] = nil
  for _, ev in ipairs(early) do
    if ev[1] == "output" then
      M.on_output(ev[2])
    else
      M.on_exit(ev[2])
    end
  end
  pcall(api.nvim_buf_set_name, buf, "cellbox://terminal/" .. pty)
  api.nvim_create_autocmd("BufWipeout", {
    buffer = buf,
    once = true,
    callback = function()
      state.ptys[pty] = nil
      if state.client and not t.exited then
        state.client:request(methods.PtyClose, { ptyId = pty })
      end
    end,
  })
  return buf, pty
end

function M.resize_terminals()
  for id, t in pairs(state.ptys) do
    local win = vim.fn.bufwinid(t.buf)
    if win ~= -1 and not t.exited and state.client then
      local cols, rows = api.nvim_win_get_width(win), api.nvim_win_get_height(win)
      if cols ~= t.cols or rows ~= t.rows then
        t.cols, t.rows = cols, rows
        state.client:request(methods.PtyResize, { ptyId = id, cols = cols, rows = rows })
      end
    end
  end
end

return M
