-- One Neovim of test_reattach.lua (not a test file of its own): run.sh's environment, and
--   CELLBOX_TEST_FILE  the file to open (its project is its directory)
--   CELLBOX_TEST_LINE  the line to run
--   CELLBOX_TEST_WAIT  "reattach": wait for the buffer to attach to its kernel when opened
--   CELLBOX_TEST_OUT   where to write what happened, as JSON
-- Then it quits, as a user would (the `cellbox connect` daemon and its kernels stay).
local file = assert(os.getenv("CELLBOX_TEST_FILE"))
local out = { messages = {} }
local ok, err = xpcall(function()
  vim.cmd("cd " .. vim.fn.fnameescape(vim.fn.fnamemodify(file, ":h")))
  vim.cmd("runtime plugin/cellbox.lua")
  local orig = vim.notify
  vim.notify = function(m, level)
    table.insert(out.messages, m)
    return orig(m, level)
  end
  local cb = require("cellbox").setup({ cmd = { os.getenv("CELLBOX_BIN"), "connect" }, sandbox = "best-effort" })
  vim.cmd("edit " .. vim.fn.fnameescape(file))
  local buf = vim.api.nvim_get_current_buf()
  if os.getenv("CELLBOX_TEST_WAIT") == "reattach" then
    -- BufReadPost looks for the file's kernel once Neovim is idle, before anything runs.
    assert(vim.wait(30000, function()
      return cb._state.reattach_tried[buf]
    end, 20), "BufReadPost did not look for the file's kernel")
    out.reattached = cb.kernel(buf, false) ~= nil
    out.status = cb.status(buf)
  end
  local ex = cb.run_line(buf, tonumber(os.getenv("CELLBOX_TEST_LINE")))
  assert(vim.wait(30000, function()
    return ex.done
  end, 20), "the run did not finish")
  out.kernel = ex.kernel
  out.exec_status = ex.status
  out.output = require("cellbox.util").render_lines(ex, cb.config)
end, debug.traceback)
out.error = not ok and tostring(err) or nil
vim.fn.writefile({ vim.json.encode(out) }, assert(os.getenv("CELLBOX_TEST_OUT")))
vim.cmd("qall!")
