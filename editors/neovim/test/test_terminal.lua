-- :CellboxTerminal: a sandboxed pty in a terminal buffer; typed keys go to pty/write, output
-- comes back, VimResized resizes; and :checkhealth cellbox.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":h") .. "/helpers.lua")

local function buftext(buf)
  return table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n")
end

local cb
local api = vim.api

H.main(function()
  cb = H.setup()

  H.test("terminal runs a command in the workspace sandbox", function()
    local buf, pty = cb.terminal({ "bash", "-c", "echo term-$((6*7)); pwd" })
    H.check(buf and pty, "no terminal")
    H.eq("terminal", vim.bo[buf].buftype)
    H.wait(function()
      local t = buftext(buf)
      return t:find("term-42", 1, true) and t:find("/workspace", 1, true)
    end, 10000, "command output in the terminal buffer:\n" .. buftext(buf))
    H.wait(function()
      return cb._state.ptys[pty].exited
    end, 10000, "pty/exit")
    H.eq(0, cb._state.ptys[pty].exit_code)
    -- The exit line is written into the buffer after the state changes.
    H.wait(function()
      return buftext(buf):find("[process exited 0]", 1, true)
    end, 10000, "the exit line in the terminal buffer:\n" .. buftext(buf))
  end)

  H.test("VimResized resizes the pty", function()
    local buf, pty = cb.terminal({ "bash", "-c", "sleep 0.5; stty size" })
    vim.cmd("resize 7")
    vim.cmd("doautocmd VimResized")
    H.eq(7, cb._state.ptys[pty].rows)
    H.wait(function()
      return buftext(buf):find("7 %d+")
    end, 10000, "stty size after resize:\n" .. buftext(buf))
    vim.cmd("bwipeout! " .. buf)
    H.eq(nil, cb._state.ptys[pty])
  end)

  H.test(":checkhealth cellbox", function()
    vim.cmd("checkhealth cellbox")
    local text = buftext(0)
    H.check(text:find("OK: binary: ", 1, true), text)
    H.check(text:find("OK: version: ", 1, true), text)
    H.check(text:find("OK: connected: cellbox", 1, true), text)
    H.check(text:find("OK: language python", 1, true), text)
    H.check(text:find("cellbox doctor", 1, true), text)
    H.check(not text:find("ERROR", 1, true), text)
    vim.cmd("bwipeout!")
  end)
end, true)

-- Keys typed in terminal mode reach the shell through pty/write (needs the main loop).
local tbuf
H.async_test("typed keys reach the sandboxed shell", function()
  vim.cmd("silent! only!")
  tbuf = cb.terminal()
  H.check(tbuf, "no terminal")
  vim.cmd("startinsert")
  api.nvim_input("echo typed-$((40+2))<CR>")
end, function()
  return buftext(tbuf):find("typed-42", 1, true) ~= nil or buftext(tbuf)
end, 10000)
