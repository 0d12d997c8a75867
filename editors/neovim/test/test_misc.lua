-- The help file (tags build, every command and Lua function documented), $/progress in
-- status(), the framing of messages split across reads, and the statusline snippet of the
-- README and the help file evaluated in a real statusline while a kernel is busy.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":h") .. "/helpers.lua")
local plugin = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h:h")

H.main(function()
  local cb = H.setup()

  H.test("doc/cellbox.txt: helptags, every command and <Plug> mapping documented", function()
    local dir = vim.fn.tempname()
    vim.fn.mkdir(dir, "p")
    vim.fn.writefile(vim.fn.readfile(plugin .. "/doc/cellbox.txt"), dir .. "/cellbox.txt")
    vim.cmd("helptags " .. vim.fn.fnameescape(dir))
    local tags = table.concat(vim.fn.readfile(dir .. "/tags"), "\n")
    local doc = table.concat(vim.fn.readfile(plugin .. "/doc/cellbox.txt"), "\n")
    local n = 0
    for name, _ in pairs(vim.api.nvim_get_commands({})) do
      if name:match("^Cellbox") then
        n = n + 1
        H.check(tags:find(":" .. name .. "\t", 1, true), "no help tag for :" .. name)
      end
    end
    H.check(n >= 20, "commands defined: " .. n)
    for _, m in ipairs(vim.api.nvim_get_keymap("n")) do
      local p = m.lhs:match("<Plug>%((Cellbox%w+)%)")
      if p then
        H.check(doc:find("<Plug>(" .. p .. ")", 1, true), "undocumented <Plug>(" .. p .. ")")
      end
    end
    H.check(tags:find("cellbox-config", 1, true))
  end)

  H.test("doc/cellbox.txt: every function of the Lua API is require('cellbox')'s", function()
    local doc = table.concat(vim.fn.readfile(plugin .. "/doc/cellbox.txt"), "\n")
    local list = assert(doc:match("require%('cellbox'%) has:(.-)The run functions"), "no Lua API section")
    local n = 0
    for name in list:gmatch("([%a_]+)%(") do
      n = n + 1
      H.eq("function", type(cb[name]), "require('cellbox')." .. name)
    end
    H.check(n >= 25, "functions documented: " .. n)
    H.eq("function", type(cb.omnifunc), "require('cellbox').omnifunc")
  end)

  H.test("$/progress shows in status() until it ends; frames split across reads", function()
    local c = assert(cb.connect())
    local function frame(msg)
      local body = vim.json.encode(msg)
      return "Content-Length: " .. #body .. "\r\n\r\n" .. body
    end
    local data = frame({ jsonrpc = "2.0", method = "$/progress", params = { token = "t1", value = { kind = "begin", title = "starting python", percentage = 10 } } })
      .. frame({ jsonrpc = "2.0", method = "$/progress", params = { token = "t1", value = { kind = "report", message = "sandbox" } } })
    -- Deliver it in pieces, as a pipe may.
    for i = 1, #data, 7 do
      c:_on_data(data:sub(i, i + 6))
    end
    local s = cb.status()
    H.eq("starting python: sandbox 10%", s)
    c:_on_data(frame({ jsonrpc = "2.0", method = "$/progress", params = { token = "t1", value = { kind = "end" } } }))
    H.eq("", cb.status())
  end)

  H.test("the documented statusline shows a busy kernel, without an error", function()
    -- The snippet verbatim from both documents, so that this fails when they drift.
    local function snippet(path)
      for _, l in ipairs(vim.fn.readfile(plugin .. "/" .. path)) do
        local s = l:match("^%s*(vim%.o%.statusline = .*)$")
        if s then
          return s
        end
      end
      error("no statusline snippet in " .. path)
    end
    local readme, doc = snippet("README.md"), snippet("doc/cellbox.txt")
    H.eq(readme, doc, "README.md and doc/cellbox.txt give the same statusline")
    local buf = H.buffer("busy.py", "python", { "import time", "time.sleep(60)" })
    local ex = cb.run_file(buf)
    local kid = cb.kernel(buf, false)
    H.wait(function()
      return cb._state.kernels[kid].state == "busy"
    end, 15000, "the kernel to be busy")
    assert(loadstring(readme))()
    vim.v.errmsg = ""
    local res = vim.api.nvim_eval_statusline(vim.o.statusline, { winid = vim.api.nvim_get_current_win() })
    H.eq("", vim.v.errmsg, "evaluating the statusline")
    H.check(res.str:find("busy.py cellbox python: busy", 1, true), res.str)
    -- What the documents said before: Vimscript calls require() and converts the module (whose
    -- tables now have numeric keys) to a Dictionary, which fails.
    vim.v.errmsg = ""
    vim.api.nvim_eval_statusline([[%f %{v:lua.require("cellbox").status()}]], {})
    H.check(vim.v.errmsg ~= "", "the old snippet no longer fails: is the test still right?")
    cb.interrupt(buf)
    H.eq("interrupted", H.done(ex).status)
    vim.o.statusline = ""
  end)

  H.test("a kernel that cannot start says why", function()
    local buf = H.buffer("x.cob", "cobol", { "DISPLAY 1." })
    local msgs = {}
    local orig = vim.notify
    vim.notify = function(m)
      table.insert(msgs, m)
    end
    local ex = cb.run_line(buf, 1)
    cb.config.languages.cobol = "cobol"
    local ex2 = cb.run_line(buf, 1)
    cb.config.languages.cobol = nil
    vim.notify = orig
    H.eq(nil, ex)
    H.eq(nil, ex2)
    H.check(msgs[1]:find("no cellbox language for filetype 'cobol'", 1, true), msgs[1])
    H.check(msgs[2]:find("kernel/start", 1, true), msgs[2])
  end)
end)
