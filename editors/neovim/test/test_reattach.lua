-- A buffer attaches to its kernel again after Neovim restarts: under `cellbox connect` kernels
-- outlive the editor. Each "session" is a Neovim of its own (child_reattach.lua) on the same
-- file; the daemon started by the first keeps running (run.sh stops it at the end).
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":h") .. "/helpers.lua")
local here = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h")
local plugin = vim.fn.fnamemodify(here, ":h")

-- Runs line `line` of file in a new Neovim and returns what child_reattach.lua wrote.
local function session(file, line, wait)
  local out = vim.fn.tempname()
  local cmd = string.format(
    "CELLBOX_TEST_FILE=%s CELLBOX_TEST_LINE=%d CELLBOX_TEST_WAIT=%s CELLBOX_TEST_OUT=%s timeout -k 5 50 nvim --headless -u NONE -i NONE --cmd %s -c %s </dev/null",
    vim.fn.shellescape(file), line, wait or "", vim.fn.shellescape(out),
    vim.fn.shellescape("set rtp+=" .. plugin), vim.fn.shellescape("luafile " .. here .. "/child_reattach.lua"))
  local log = vim.fn.system(cmd)
  H.check(vim.fn.filereadable(out) == 1, "the Neovim session wrote nothing (exit " .. vim.v.shell_error .. "): " .. log)
  local res = vim.json.decode(table.concat(vim.fn.readfile(out), "\n"))
  H.check(res.error == nil, "in the Neovim session: " .. tostring(res.error))
  return res
end

local function text(res)
  local t = {}
  for _, l in ipairs(res.output or {}) do
    table.insert(t, l[1])
  end
  return table.concat(t, "\n")
end

H.main(function()
  local cb = H.setup({ cmd = { H.bin, "connect" } })
  local file = H.project .. "/state.py"
  vim.fn.writefile({ "x = 41", "print(x + 1)" }, file)

  local first
  H.test("x = 41, quit, start again on the file: print(x + 1) is 42 in the same kernel", function()
    first = session(file, 1)
    H.eq("ok", first.exec_status)
    local store = vim.json.decode(table.concat(vim.fn.readfile(vim.fn.stdpath("data") .. "/cellbox/kernels.json"), "\n"))
    H.eq(first.kernel, store.roots[H.project][file].kernelId, "kernels.json keeps the file's kernel")
    H.eq("python", store.roots[H.project][file].language)
    local second = session(file, 2, "reattach")
    H.eq(true, second.reattached, "attached when the file was opened")
    H.eq("cellbox python: idle", second.status)
    H.eq(first.kernel, second.kernel)
    H.eq("ok", second.exec_status)
    H.eq("42", text(second))
    H.check(table.concat(second.messages, "\n"):find("state.py: attached to kernel " .. first.kernel .. " again (python, 1 execution)", 1, true), vim.inspect(second.messages))
  end)

  H.test("a kernel that is gone: a fresh one, and the file remembers it", function()
    H.check(first, "the case before failed")
    -- Shut the kernel down from this Neovim, connected to the same daemon.
    H.eq(nil, (assert(cb.connect()):request_sync("kernel/shutdown", { kernelId = first.kernel }, 30000)))
    local third = session(file, 2, "reattach")
    H.eq(false, third.reattached, "nothing to attach to")
    H.check(third.kernel ~= first.kernel, "a new kernel")
    H.eq("error", third.exec_status)
    H.check(text(third):find("NameError", 1, true), text(third))
    local store = vim.json.decode(table.concat(vim.fn.readfile(vim.fn.stdpath("data") .. "/cellbox/kernels.json"), "\n"))
    H.eq(third.kernel, store.roots[H.project][file].kernelId)
    -- Running at once, before BufReadPost's attach had its turn, attaches too.
    local fourth = session(file, 1)
    H.eq(third.kernel, fourth.kernel, "attached when the file first ran code")
    H.eq("ok", fourth.exec_status)
  end)
end)
