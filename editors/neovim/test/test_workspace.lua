-- Workspace commands on a temp project: changes (quickfix), diff (split), commit, discard,
-- checkpoint and restore; files on disk checked after each.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":h") .. "/helpers.lua")

local function read(path)
  local f = io.open(path, "r")
  if not f then
    return nil
  end
  local s = f:read("*a")
  f:close()
  return s
end

local function write(path, s)
  local f = assert(io.open(path, "w"))
  f:write(s)
  f:close()
end

H.main(function()
  local cb = H.setup()
  local api = vim.api
  local root = H.project
  write(root .. "/keep.txt", "original\n")
  write(root .. "/edit.txt", "one\n")

  local buf = H.buffer("work.py", "python", {
    "open('edit.txt', 'w').write('two\\n')",
    "open('new.txt', 'w').write('fresh\\n')",
    "open('keep.txt', 'w').write('changed\\n')",
  })

  H.test("code writes to the overlay, not the project", function()
    local ex = H.done(cb.run_file(buf))
    H.eq("ok", ex.status)
    H.eq("one\n", read(root .. "/edit.txt"))
    H.eq(nil, read(root .. "/new.txt"))
    H.eq(root, cb.workspace().root)
  end)

  H.test(":CellboxChanges fills the quickfix list", function()
    vim.cmd("CellboxChanges")
    local qf = vim.fn.getqflist({ title = 1, items = 1 })
    H.eq("cellbox changes", qf.title)
    local got = {}
    for _, it in ipairs(qf.items) do
      got[vim.fn.fnamemodify(vim.fn.bufname(it.bufnr), ":p")] = it.text
    end
    H.check(got[root .. "/edit.txt"] and got[root .. "/edit.txt"]:match("^modified"), vim.inspect(got))
    H.check(got[root .. "/new.txt"] and got[root .. "/new.txt"]:match("^added"), vim.inspect(got))
    H.check(got[root .. "/keep.txt"], vim.inspect(got))
    H.eq(3, #qf.items)
    H.eq("quickfix", vim.bo[api.nvim_get_current_buf()].buftype, "quickfix window opened")
  end)

  H.test(":CellboxDiff shows the unified diff in a split", function()
    local before = #api.nvim_list_wins()
    vim.cmd("CellboxDiff")
    H.eq(before + 1, #api.nvim_list_wins())
    local d = api.nvim_get_current_buf()
    H.eq("diff", vim.bo[d].filetype)
    local lines = api.nvim_buf_get_lines(d, 0, -1, false)
    local text = table.concat(lines, "\n")
    H.check(text:find("+++ b/edit.txt", 1, true) and text:find("-one", 1, true) and text:find("+two", 1, true), text)
    H.check(text:find("+fresh", 1, true), text)
    -- One file.
    vim.cmd("CellboxDiff new.txt")
    text = table.concat(api.nvim_buf_get_lines(0, 0, -1, false), "\n")
    H.check(text:find("+fresh", 1, true) and not text:find("edit.txt", 1, true), text)
  end)

  H.test(":CellboxCheckpoint", function()
    vim.cmd("CellboxCheckpoint mine")
    -- The user's checkpoints (runs take automatic ones too).
    local cps = vim.tbl_filter(function(c)
      return not c.auto
    end, cb.checkpoints())
    H.eq(1, #cps)
    H.eq("mine", cps[1].name)
  end)

  H.test(":CellboxCommit path applies one file to the project", function()
    vim.cmd("CellboxCommit new.txt")
    H.eq("fresh\n", read(root .. "/new.txt"))
    H.eq("one\n", read(root .. "/edit.txt"), "others untouched")
    local changes = cb.changes(false)
    H.eq(2, #changes)
  end)

  H.test(":CellboxDiscard path drops one file's change", function()
    vim.cmd("CellboxDiscard " .. root .. "/keep.txt")
    local changes = cb.changes(false)
    H.eq(1, #changes)
    H.eq("edit.txt", changes[1].path)
    H.eq("original\n", read(root .. "/keep.txt"))
  end)

  H.test(":CellboxRestore brings the checkpoint back", function()
    vim.cmd("CellboxRestore mine")
    local paths = {}
    for _, c in ipairs(cb.changes(false)) do
      paths[c.path] = c.kind
    end
    H.eq("modified", paths["keep.txt"], vim.inspect(paths))
    H.eq("modified", paths["edit.txt"], vim.inspect(paths))
    -- Restore with the picker (vim.ui.select) to the automatic before-restore checkpoint.
    local orig = vim.ui.select
    local shown
    vim.ui.select = function(items, opts, on_choice)
      shown = {}
      for _, it in ipairs(items) do
        table.insert(shown, opts.format_item(it))
      end
      for _, it in ipairs(items) do
        if it.name == "before-restore" then
          return on_choice(it)
        end
      end
      on_choice(nil)
    end
    vim.cmd("CellboxRestore")
    vim.ui.select = orig
    H.check(shown and #shown >= 2, vim.inspect(shown))
    H.eq(1, #cb.changes(false))
  end)

  H.test(":CellboxCommit applies the rest; a changed project file is a conflict", function()
    H.done(cb.run_line(buf, 3))
    write(root .. "/keep.txt", "edited outside\n")
    vim.cmd("CellboxCommit")
    H.eq("two\n", read(root .. "/edit.txt"))
    H.eq("edited outside\n", read(root .. "/keep.txt"), "conflict not overwritten")
    vim.cmd("CellboxDiscard")
    H.eq(0, #cb.changes(false))
    H.eq("edited outside\n", read(root .. "/keep.txt"))
  end)
end)
