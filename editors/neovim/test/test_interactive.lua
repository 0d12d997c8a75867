-- Interrupt, input(), the statusline, completion, inspect and outputTruncated.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":h") .. "/helpers.lua")

H.main(function()
  local cb = H.setup()
  local api = vim.api

  H.test("python: interrupt a busy loop; status() shows busy then idle", function()
    local buf = H.buffer("loop.py", "python", { "i = 0", "while True: i += 1", "print(i > 0)" })
    H.done(cb.run_line(buf, 1))
    local ex = cb.run_line(buf, 2)
    H.wait(function()
      return cb.status(buf) == "cellbox python: busy"
    end, 5000, "kernel busy")
    H.check(H.mark_at(buf, 1).text:find("running", 1, true), "running mark")
    vim.wait(200, function() return false end)
    vim.cmd("CellboxInterrupt")
    H.done(ex, 5000)
    H.eq("interrupted", ex.status)
    H.check(H.mark_at(buf, 1).text:find("interrupted", 1, true), H.mark_at(buf, 1).text)
    H.eq(0, #vim.diagnostic.get(buf), "an interrupt is not a diagnostic")
    H.wait(function()
      return cb.status(buf) == "cellbox python: idle"
    end, 5000, "kernel idle")
    -- The kernel survives, with its state.
    H.done(cb.run_line(buf, 3))
    H.eq({ "  True" }, H.mark_at(buf, 2).lines)
  end)

  H.test("bash: interrupt sleep", function()
    local buf = H.buffer("sleep.sh", "sh", { "sleep 30; echo never", "echo back" })
    local ex = cb.run_line(buf, 1)
    vim.wait(300, function() return false end)
    cb.interrupt(buf)
    H.done(ex, 5000)
    H.eq("interrupted", ex.status)
    H.done(cb.run_line(buf, 2))
    H.eq({ "  back" }, H.mark_at(buf, 1).lines)
  end)

  H.test("input() is answered with vim.ui.input", function()
    local prompts = {}
    local orig = vim.ui.input
    vim.ui.input = function(opts, on_confirm)
      table.insert(prompts, opts.prompt)
      on_confirm("Ada")
    end
    local buf = H.buffer("in.py", "python", { "name = input('name? ')", "print('hi', name)" })
    local ex = H.done(cb.run_file(buf))
    vim.ui.input = orig
    H.eq("ok", ex.status)
    H.eq({ "name? " }, prompts)
    local lines = H.mark_at(buf, 1).lines
    H.eq("  hi Ada", lines[#lines])
  end)

  H.test("input() cancelled reads end of file", function()
    local orig = vim.ui.input
    vim.ui.input = function(_, on_confirm)
      on_confirm(nil)
    end
    local buf = H.buffer("in2.py", "python", { "input('? ')" })
    local ex = H.done(cb.run_line(buf, 1))
    vim.ui.input = orig
    H.eq("error", ex.status)
    H.eq("EOFError", ex.result.error.ename)
  end)

  H.test("completion from the kernel as omnifunc", function()
    local buf = H.buffer("comp.py", "python", { "import os", "x = os.pa" })
    H.done(cb.run_line(buf, 1))
    vim.bo[buf].omnifunc = "v:lua.require'cellbox'.omnifunc"
    api.nvim_win_set_cursor(0, { 2, 9 })
    local col = vim.fn.eval("v:lua.require'cellbox'.omnifunc(1, '')")
    H.eq(7, col, "start column of 'pa'")
    local items = cb.omnifunc(0, "pa")
    local words = {}
    for _, it in ipairs(items) do
      words[it.word] = true
    end
    H.check(words["path"] and words["pardir"], vim.inspect(items))
    -- Through the real insert-mode <C-x><C-o>.
    api.nvim_feedkeys(api.nvim_replace_termcodes("A<C-x><C-o><Esc>", true, false, true), "x", false)
    local line = api.nvim_buf_get_lines(buf, 1, 2, false)[1]
    local word = line:match("^x = os%.(%w+)$")
    H.check(word and word ~= "pa" and words[word], "completed line: " .. line)
    -- The completion-plugin API.
    local r = cb.complete()
    H.check(#r.matches > 0)
  end)

  H.test("javascript completion", function()
    H.buffer("comp.js", "javascript", { "console.lo" })
    api.nvim_win_set_cursor(0, { 1, 10 })
    H.eq(8, cb.omnifunc(1, ""))
    local items = cb.omnifunc(0, "lo")
    H.eq("log", items[1].word)
  end)

  H.test("inspect in a float", function()
    H.buffer("insp.py", "python", { "n = len([1, 2])" })
    api.nvim_win_set_cursor(0, { 1, 5 })
    local fbuf, fwin = cb.inspect()
    H.check(fbuf, "no float")
    local text = table.concat(api.nvim_buf_get_lines(fbuf, 0, -1, false), "\n")
    H.check(text:find("Return the number of items", 1, true), text)
    H.check(api.nvim_win_get_config(fwin).relative ~= "")
  end)

  H.test("outputTruncated is shown", function()
    cb.config.limits = { outputBytes = 4096 }
    local buf = H.buffer("big.py", "python", { "for i in range(2000): print('x' * 50)" })
    vim.cmd("CellboxKernel new")
    cb.config.limits = nil
    local ex = H.done(cb.run_line(buf, 1))
    H.eq(true, ex.result.outputTruncated)
    local m = H.mark_at(buf, 0)
    H.check(m.lines[#m.lines]:find("truncated", 1, true), vim.inspect(m.lines))
    local fbuf = cb.show_output(ex)
    local fl = api.nvim_buf_get_lines(fbuf, 0, -1, false)
    H.check(fl[#fl]:find("output truncated", 1, true), fl[#fl])
    H.check(#fl < 200, "head kept only")
  end)
end)
