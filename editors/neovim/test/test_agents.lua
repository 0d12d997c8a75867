-- PROTOCOL.md §10 in the plugin, on a temp git project: a run's "wrote" line and message,
-- :CellboxExecutions in the quickfix list, :CellboxUndo (from the list, confirmed or not),
-- automatic checkpoints marked in the restore picker, renames and ignored changes in
-- :CellboxChanges, :CellboxExportPatch's buffer, :CellboxExportGit, :CellboxFork!.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":h") .. "/helpers.lua")

local function write(path, s)
  local f = assert(io.open(path, "w"))
  f:write(s)
  f:close()
end

local function git(...)
  local args = { "git", "-C", H.project, ... }
  local out = vim.fn.system(args)
  H.check(vim.v.shell_error == 0, table.concat(args, " ") .. ": " .. out)
  return vim.trim(out)
end

H.main(function()
  local cb = H.setup()
  local api = vim.api
  local root = H.project
  write(root .. "/keep.txt", "original\n")
  write(root .. "/old.txt", "renamed content\n")
  write(root .. "/.gitignore", "*.log\n")
  vim.env.GIT_AUTHOR_NAME, vim.env.GIT_AUTHOR_EMAIL = "t", "t@example.com"
  vim.env.GIT_COMMITTER_NAME, vim.env.GIT_COMMITTER_EMAIL = "t", "t@example.com"
  git("init", "-q", "-b", "main")
  git("add", "-A")
  git("commit", "-q", "-m", "initial")

  local messages = {}
  local orig_notify = vim.notify
  vim.notify = function(msg, level)
    table.insert(messages, msg)
    return orig_notify(msg, level)
  end
  local ws = require("cellbox.workspace")
  local answers = {}
  ws.confirm = function(q)
    table.insert(answers, q)
    return answers.yes
  end

  local buf = H.buffer("work.py", "python", {
    "open('out.txt', 'w').write('new\\n')",
    "import os; os.remove('keep.txt')",
    "1 + 1",
    "os.rename('old.txt', 'new.txt'); open('debug.log', 'w').write('noise')",
    "open('feature.py', 'w').write('print(1)\\n')",
  })

  H.test("a run that writes a file says so under its output and in a message", function()
    local ex = H.done(cb.run_line(buf, 1))
    H.eq("ok", ex.status)
    H.check(ex.result.checkpoint, "the run asked for an automatic checkpoint: " .. vim.inspect(ex.result))
    H.eq("execution 1 wrote out.txt (new)", ex.files_line)
    local m = H.mark_at(buf, 0)
    H.check(m and vim.tbl_contains(m.lines, "  ↳ execution 1 wrote out.txt (new)"), vim.inspect(m))
    H.check(vim.tbl_contains(messages, "cellbox: execution 1 wrote out.txt (new) (:CellboxUndo undoes it)"), vim.inspect(messages))
    local ex2 = H.done(cb.run_line(buf, 2))
    H.eq("execution 2 deleted keep.txt", ex2.files_line)
    -- A run that changes nothing says nothing.
    local ex3 = H.done(cb.run_line(buf, 3))
    H.eq(nil, ex3.files_line)
    for _, l in ipairs(H.mark_at(buf, 2).lines) do
      H.check(not l:find("↳", 1, true), l)
    end
  end)

  H.test(":CellboxExecutions lists each execution's files in the quickfix list, newest first", function()
    vim.cmd("CellboxExecutions")
    local qf = vim.fn.getqflist({ title = 1, items = 1 })
    H.eq("cellbox executions", qf.title)
    local got = {}
    for _, it in ipairs(qf.items) do
      table.insert(got, { vim.fn.fnamemodify(vim.fn.bufname(it.bufnr), ":p"), it.text })
    end
    H.eq({
      { root .. "/keep.txt", "execution 2 (python) [undo: :CellboxUndo] deleted" },
      { root .. "/out.txt", "execution 1 (python) [undo: :CellboxUndo] wrote (new)" },
    }, got)
    H.eq("quickfix", vim.bo[api.nvim_get_current_buf()].buftype)
  end)

  H.test(":CellboxUndo on a quickfix entry asks, then restores to before that execution", function()
    -- Declined: nothing changes.
    answers.yes = false
    api.nvim_win_set_cursor(0, { 2, 0 })
    vim.cmd("CellboxUndo")
    H.check(answers[#answers]:find("before execution 1 (python)", 1, true) and answers[#answers]:find("not rolled back", 1, true), answers[#answers])
    H.eq(2, #cb.changes(false))
    -- Confirmed: the files are as before execution 1 (cb.changes replaced the quickfix list).
    vim.cmd("CellboxExecutions")
    api.nvim_win_set_cursor(0, { 2, 0 })
    answers.yes = true
    vim.cmd("CellboxUndo")
    H.eq(0, #cb.changes(false))
    H.check(messages[#messages]:find("not rolled back", 1, true), messages[#messages])
    -- By number: nothing to undo for an unknown one.
    pcall(vim.cmd, "CellboxUndo 99") -- an error message
    H.check(messages[#messages]:find("no execution 99", 1, true), messages[#messages])
  end)

  H.test("automatic checkpoints are marked in :CellboxRestore's list, after the user's", function()
    vim.cmd("CellboxCheckpoint mine")
    local orig = vim.ui.select
    local shown
    vim.ui.select = function(items, opts, on_choice)
      shown = {}
      for _, it in ipairs(items) do
        table.insert(shown, opts.format_item(it))
      end
      on_choice(nil)
    end
    vim.cmd("CellboxRestore")
    vim.ui.select = orig
    H.check(shown and shown[1]:match("^mine "), vim.inspect(shown))
    local auto = vim.tbl_filter(function(l)
      return l:match("^%[automatic%] ")
    end, shown)
    H.check(#auto >= 2, vim.inspect(shown))
    H.check(not shown[#shown]:match("^mine") and shown[#shown]:match("^%[automatic%]"), vim.inspect(shown))
  end)

  H.test(":CellboxChanges shows a rename as old → new; ignored changes are counted, ! shows them", function()
    H.done(cb.run_line(buf, 4))
    local changes, hidden = cb.changes(true)
    H.eq(1, hidden)
    local qf = vim.fn.getqflist({ title = 1, items = 1 })
    H.eq("cellbox changes · 1 ignored change hidden (:CellboxChanges! shows them)", qf.title)
    H.eq(1, #qf.items, vim.inspect(qf.items))
    H.eq("renamed old.txt → new.txt", qf.items[1].text:match("^renamed [^ ]+ → [^ ]+"))
    H.eq(2, #changes, "both entries of the rename are returned")
    H.check(messages[#messages]:find("1 ignored change hidden", 1, true), messages[#messages])
    vim.cmd("CellboxChanges!")
    qf = vim.fn.getqflist({ title = 1, items = 1 })
    H.eq("cellbox changes", qf.title)
    local texts = {}
    for _, it in ipairs(qf.items) do
      texts[vim.fn.fnamemodify(vim.fn.bufname(it.bufnr), ":t")] = it.text
    end
    H.check(texts["debug.log"] and texts["debug.log"]:match("^added"), vim.inspect(texts))
  end)

  H.test(":CellboxExportPatch opens the patch in a scratch diff buffer", function()
    H.done(cb.run_line(buf, 5))
    vim.cmd("CellboxExportPatch")
    local b = api.nvim_get_current_buf()
    H.eq("diff", vim.bo[b].filetype)
    H.eq("nofile", vim.bo[b].buftype)
    local text = table.concat(api.nvim_buf_get_lines(b, 0, -1, false), "\n")
    H.check(text:find("+++ b/feature.py", 1, true) and text:find("+print(1)", 1, true), text)
    H.check(not text:find("debug.log", 1, true), "ignored paths are left out")
  end)

  H.test(":CellboxExportGit writes a branch and says which commit", function()
    vim.cmd("CellboxExportGit cellbox/nvim")
    local sha = git("rev-parse", "cellbox/nvim")
    H.check(messages[#messages]:find("to branch cellbox/nvim: commit " .. sha:sub(1, 10), 1, true), messages[#messages])
    H.eq("main", git("rev-parse", "--abbrev-ref", "HEAD"))
    local files = git("show", "--name-only", "--format=", sha)
    H.check(files:find("feature.py", 1, true) and files:find("new.txt", 1, true), files)
  end)

  H.test(":CellboxFork! makes a fork with the changes and runs there from now on", function()
    local before = cb.workspace().workspaceId
    vim.cmd("CellboxFork! experiment")
    local after = cb.workspace()
    H.check(after.workspaceId ~= before, "switched")
    H.check(messages[#messages]:find("(" .. after.workspaceId .. ")", 1, true), messages[#messages])
    local paths = {}
    for _, c in ipairs(cb.changes(false)) do
      paths[c.path] = c.kind
    end
    H.eq("added", paths["feature.py"], vim.inspect(paths))
  end)
  vim.notify = orig_notify
end)
