-- Test helpers: each test file is run by run.sh as
--   nvim --headless -u NONE -i NONE --cmd 'set rtp+=editors/neovim' -c 'luafile TEST'
-- with CELLBOX_BIN (the built binary) and CELLBOX_STATE_DIR set; it exits 0 when every case
-- passes and 1 otherwise.
local H = {}
H.bin = assert(os.getenv("CELLBOX_BIN"), "CELLBOX_BIN is not set")
H.failures = 0
H.api = vim.api

function H.log(msg)
  io.stdout:write(msg .. "\n")
end

--- A fresh project dir as the cwd, the plugin loaded and pointed at the binary.
function H.setup(opts)
  H.project = vim.fn.tempname() .. "-proj"
  vim.fn.mkdir(H.project, "p")
  vim.cmd("cd " .. vim.fn.fnameescape(H.project))
  vim.cmd("runtime plugin/cellbox.lua")
  local cb = require("cellbox")
  cb.setup(vim.tbl_extend("force", {
    cmd = { H.bin, "serve", "--stdio" },
    sandbox = "best-effort",
    image_dir = H.project .. "-images",
    -- A first completion loads modules; on a loaded machine it takes longer than an editor waits.
    complete_timeout_ms = 60000,
  }, opts or {}))
  return cb
end

--- A buffer for file NAME in the project with LINES and filetype FT, shown in the current window.
function H.buffer(name, ft, lines)
  vim.cmd("enew!")
  local buf = vim.api.nvim_get_current_buf()
  vim.api.nvim_buf_set_name(buf, H.project .. "/" .. name)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.api.nvim_buf_set_option(buf, "filetype", ft)
  vim.api.nvim_buf_set_option(buf, "buftype", "nofile")
  return buf
end

function H.check(cond, msg)
  if not cond then
    error(msg or "check failed", 2)
  end
end

function H.eq(want, got, msg)
  if not vim.deep_equal(want, got) then
    error((msg or "not equal") .. "\n  want: " .. vim.inspect(want) .. "\n  got:  " .. vim.inspect(got), 2)
  end
end

function H.wait(cond, ms, msg)
  if not vim.wait(ms or 10000, cond, 10) then
    error("timed out waiting: " .. (msg or "?"), 2)
  end
end

--- Waits for an execution to finish and to be rendered.
function H.done(exec, ms)
  H.check(exec ~= nil, "no execution was started")
  H.wait(function()
    return exec.done
  end, ms or 15000, "execution " .. tostring(exec.id))
  vim.wait(20, function() return false end)
  return exec
end

--- The cellbox extmarks of buf: list of {row, text = virt_text joined, lines = {virt line texts}}.
function H.marks(buf)
  local cb = require("cellbox")
  local out = {}
  for _, m in ipairs(vim.api.nvim_buf_get_extmarks(buf, cb.ns, 0, -1, { details = true })) do
    local d = m[4]
    if d.virt_text or d.virt_lines then
      local t = {}
      for _, c in ipairs(d.virt_text or {}) do
        table.insert(t, c[1])
      end
      local lines = {}
      for _, l in ipairs(d.virt_lines or {}) do
        local s = {}
        for _, c in ipairs(l) do
          table.insert(s, c[1])
        end
        table.insert(lines, table.concat(s))
      end
      table.insert(out, { row = m[2], text = table.concat(t), lines = lines })
    end
  end
  return out
end

--- The mark on row (0-based) or nil.
function H.mark_at(buf, row)
  for _, m in ipairs(H.marks(buf)) do
    if m.row == row then
      return m
    end
  end
end

--- Closes the floating windows (a diagnostic's float after ]d).
function H.test_close_floats()
  for _, w in ipairs(vim.api.nvim_list_wins()) do
    if vim.api.nvim_win_get_config(w).relative ~= "" then
      pcall(vim.api.nvim_win_close, w, true)
    end
  end
end

function H.test(name, fn)
  local t0 = vim.loop.hrtime()
  local ok, err = xpcall(fn, debug.traceback)
  local ms = math.floor((vim.loop.hrtime() - t0) / 1e6)
  if ok then
    H.log(string.format("ok   %s (%d ms)", name, ms))
  else
    H.failures = H.failures + 1
    H.log(string.format("FAIL %s (%d ms)\n%s", name, ms, tostring(err)))
  end
  -- Close floats and extra windows between cases.
  H.test_close_floats()
  pcall(vim.cmd, "silent! only!")
end

function H.finish()
  pcall(require("cellbox").stop)
  if H.failures > 0 then
    H.log(H.failures .. " failure(s)")
    vim.cmd("cquit 1")
  else
    vim.cmd("qall!")
  end
end

--- Runs the test file body; any error outside a case fails the file.
function H.main(fn, keep_running)
  local ok, err = xpcall(fn, debug.traceback)
  if not ok then
    H.failures = H.failures + 1
    H.log("FAIL (file)\n" .. tostring(err))
  end
  if not keep_running then
    H.finish()
  end
end

--- A case that needs Neovim's main loop (typed input in terminal mode): start() runs now and
--- returns; check() is polled every 50 ms from a timer until it returns true (pass) or ms pass
--- (fail); then the file finishes.
function H.async_test(name, start, check, ms)
  local t0 = vim.loop.hrtime()
  local ok, err = xpcall(start, debug.traceback)
  if not ok then
    H.failures = H.failures + 1
    H.log("FAIL " .. name .. "\n" .. tostring(err))
    return H.finish()
  end
  local function poll()
    local elapsed = (vim.loop.hrtime() - t0) / 1e6
    local ok2, res = xpcall(check, debug.traceback)
    if ok2 and res == true then
      H.log(string.format("ok   %s (%d ms)", name, elapsed))
      return H.finish()
    end
    if not ok2 or elapsed > (ms or 10000) then
      H.failures = H.failures + 1
      H.log(string.format("FAIL %s (%d ms)\n%s", name, elapsed, ok2 and ("timed out: " .. tostring(res)) or tostring(res)))
      return H.finish()
    end
    vim.defer_fn(poll, 50)
  end
  vim.defer_fn(poll, 50)
end

return H
