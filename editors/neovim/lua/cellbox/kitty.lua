-- Images inline with the kitty graphics protocol
-- (https://sw.kovidgoyal.net/kitty/graphics-protocol/), where the terminal speaks it. An
-- execution's last PNG output is sent to the terminal once (a=t: base64 in chunks of 4096 bytes,
-- the last with m=0) under an image id of its own, and placed (a=p) over blank virtual lines
-- reserved under the output, 'image_rows' rows high: the cursor is saved, moved to the screen
-- row of the first blank line, the image placed without moving the cursor (C=1), the cursor
-- restored. When the window scrolls or the text moves, the placement is moved (same image and
-- placement id: kitty replaces it) or deleted when it would not fit in the window; clearing the
-- output deletes the image. Other terminals get the image file's path (util.lua).
local api = vim.api

local M = {}

M.chunk_size = 4096

--- Writes escape sequences to the terminal (replaced by the tests, which have no terminal).
function M.write(s)
  io.stdout:write(s)
  io.stdout:flush()
end

local ESC = "\27"
local function apc(control, payload)
  return ESC .. "_G" .. control .. (payload and (";" .. payload) or "") .. ESC .. "\\"
end

--- The escape sequences that send PNG data (base64) as image id: a list, one a chunk.
function M.transmit_chunks(id, b64, chunk)
  chunk = chunk or M.chunk_size
  b64 = b64:gsub("%s", "")
  local out = {}
  local n = math.max(1, math.ceil(#b64 / chunk))
  for i = 1, n do
    local part = b64:sub((i - 1) * chunk + 1, i * chunk)
    local more = i < n and 1 or 0
    if i == 1 then
      table.insert(out, apc(string.format("a=t,f=100,t=d,i=%d,q=2,m=%d", id, more), part))
    else
      table.insert(out, apc(string.format("m=%d", more), part))
    end
  end
  return out
end

--- The escape sequences that send PNG data (base64) as image id, in chunks.
function M.transmit(id, b64, chunk)
  return table.concat(M.transmit_chunks(id, b64, chunk))
end

--- The escape sequences that show image id at screen row and col (1-based), rows high, without
--- moving the cursor.
function M.place(id, row, col, rows)
  return ESC .. "7" .. string.format("%s[%d;%dH", ESC, row, col)
    .. apc(string.format("a=p,i=%d,p=1,r=%d,C=1,q=2", id, rows)) .. ESC .. "8"
end

--- The escape sequence that removes image id's placements (d=i; d=I also frees its data).
function M.delete(id, free)
  return apc(string.format("a=d,d=%s,i=%d,q=2", free and "I" or "i", id))
end

--- Whether images are shown with the kitty protocol: config.images "kitty" (forced), "path"
--- (never), or "auto": a terminal UI in kitty ($TERM xterm-kitty or $KITTY_WINDOW_ID), not
--- inside tmux (which does not pass the sequences on), with a terminal UI on standard output.
function M.enabled(config)
  local mode = config.images or "auto"
  if mode == "kitty" then
    return true
  end
  if mode ~= "auto" then
    return false
  end
  if vim.env.TMUX or #api.nvim_list_uis() == 0 or vim.loop.guess_handle(1) ~= "tty" then
    return false
  end
  return vim.env.TERM == "xterm-kitty" or vim.env.KITTY_WINDOW_ID ~= nil
end

local next_id = 0
-- image id -> {exec, b64, rows, placed = "row:col" or nil}
M.images = {}

--- The last PNG output of an execution (its base64), or nil.
function M.png_of(exec)
  for i = #exec.outputs, 1, -1 do
    local d = exec.outputs[i].data
    -- Only base64 goes to the terminal: a stored output of a notebook someone sent could
    -- carry escape sequences of its own (ESC \\ ends the image, then OSC 52 sets the clipboard).
    if type(d) == "table" and type(d["image/png"]) == "string" then
      local b64 = d["image/png"]:gsub("%s", "")
      if b64:match("^[A-Za-z0-9+/]*=*$") then
        return b64
      end
      return nil
    end
  end
end

--- The image of exec to show under its output (sent to the terminal when new or changed), or
--- nil. Returns the image's record.
function M.image_for(exec, config)
  local b64 = M.png_of(exec)
  local img = exec.kitty
  if img and img.b64 == b64 then
    return img
  end
  if img then
    M.forget(exec)
  end
  if not b64 then
    return nil
  end
  next_id = next_id % 0xFFFFFF + 1
  img = { id = next_id, exec = exec, b64 = b64, rows = config.image_rows or 10 }
  M.images[img.id] = img
  exec.kitty = img
  -- One write a chunk: what Neovim draws meanwhile comes between whole sequences.
  for _, c in ipairs(M.transmit_chunks(img.id, b64)) do
    M.write(c)
  end
  return img
end

--- Deletes exec's image from the terminal.
function M.forget(exec)
  local img = exec.kitty
  if not img then
    return
  end
  exec.kitty = nil
  M.images[img.id] = nil
  M.write(M.delete(img.id, true))
end

-- The screen position (1-based row, col) where img goes in window win, or nil when it does not
-- fit in the window: under the exec's last line and the img.offset virtual lines before it.
local function position(win, img, row0)
  local first = vim.fn.screenpos(win, row0 + 1, 1)
  -- The virtual lines come after the last screen row of a line that wraps.
  local text = api.nvim_buf_get_lines(api.nvim_win_get_buf(win), row0, row0 + 1, false)[1] or ""
  local pos = vim.fn.screenpos(win, row0 + 1, math.max(1, #text))
  if not pos or pos.row == 0 or first.row == 0 then
    return nil
  end
  pos.col = first.col
  local wpos = vim.fn.win_screenpos(win)
  local top, height = wpos[1], api.nvim_win_get_height(win)
  local r = pos.row + 1 + (img.offset or 0)
  if r < top or r + img.rows - 1 > top + height - 1 then
    return nil
  end
  return r, pos.col
end

--- Places every image where its output is on screen now, and removes those that are not.
function M.refresh()
  local exec_range = require("cellbox.output").exec_range
  for id, img in pairs(vim.tbl_extend("force", {}, M.images)) do
    local exec = img.exec
    local r, c
    if not api.nvim_buf_is_valid(exec.buf) then
      -- Its buffer is gone: free the image.
      M.forget(exec)
      goto continue
    end
    local _, e = exec_range(exec)
    if e and not exec.removed then
      for _, win in ipairs(api.nvim_list_wins()) do
        if api.nvim_win_get_buf(win) == exec.buf and api.nvim_win_get_config(win).relative == "" then
          r, c = position(win, img, e)
          if r then
            break
          end
        end
      end
    end
    local at = r and (r .. ":" .. c) or nil
    if at ~= img.placed then
      M.write(at and M.place(id, r, c, img.rows) or M.delete(id))
      img.placed = at
    end
    ::continue::
  end
end

local group
--- Refreshes the placements once the screen is redrawn, and when windows scroll or text moves.
function M.schedule_refresh()
  if not group then
    group = api.nvim_create_augroup("cellbox.kitty", { clear = true })
    api.nvim_create_autocmd({ "WinScrolled", "VimResized", "TextChanged", "TextChangedI", "BufWinEnter", "BufWinLeave", "WinClosed", "WinNew" }, {
      group = group,
      callback = function()
        M.schedule_refresh()
      end,
    })
  end
  if M.pending then
    return
  end
  M.pending = true
  vim.schedule(function()
    M.pending = false
    -- Where lines are on screen is known once it is drawn.
    pcall(vim.cmd, "redraw")
    M.refresh()
  end)
end

return M
