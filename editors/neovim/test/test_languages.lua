-- The languages of PROTOCOL.md §8 from Neovim buffers, against the real daemon: `.rb`, `.R`,
-- `.sql`, `.ts` and `.go` buffers run in cellbox's own kernels by their filetypes, with no
-- config.languages entry; a project's .venv is the python kernel's interpreter, which the
-- statusline names.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":h") .. "/helpers.lua")

-- R starts in a second or two on an idle machine, Go builds its first cell in a few; far longer
-- on a loaded one (70 s seen), so the file gets more than run.sh's 60 s:
-- run.sh timeout: 300
local START_MS = 90000

H.main(function()
  local cb = H.setup()
  -- The project's virtual environment, made before the daemon opens the workspace.
  vim.fn.system({ "/usr/bin/python3", "-m", "venv", "--without-pip", H.project .. "/.venv" })
  H.check(vim.v.shell_error == 0, "python3 -m venv failed")
  assert(cb.connect())
  local available = {}
  for _, l in ipairs(cb._state.init.capabilities.languages) do
    available[l.id] = l.available
  end

  local cases = {
    { "app.rb", "ruby", "ruby", "puts 6 * 7", "42" },
    { "model.R", "r", "r", "cat(6 * 7)", "42" },
    { "q.sql", "sql", "sql", "SELECT 6 * 7 AS answer;", "42" },
    { "index.ts", "typescript", "typescript", "const n: number = 6 * 7; console.log(n)", "42" },
    { "main.go", "go", "go", "6 * 7", "42" },
  }
  for _, c in ipairs(cases) do
    local file, ft, lang, code, want = c[1], c[2], c[3], c[4], c[5]
    H.test(file .. " (filetype " .. ft .. ") runs in cellbox's " .. lang, function()
      if not available[lang] then
        if os.getenv("CI") == "true" then
          error(lang .. " is not available")
        end
        H.log("SKIP " .. lang .. " is not available on this host")
        return
      end
      local buf = H.buffer(file, ft, { code })
      H.eq(lang, cb.language(buf))
      local ex = H.done(cb.run_line(buf, 1), START_MS)
      H.eq("ok", ex.status, vim.inspect(ex.result))
      local text = table.concat(H.mark_at(buf, 0).lines, "\n")
      H.check(text:find(want, 1, true), text)
      H.check(cb.status(buf):find("cellbox " .. lang .. ": idle", 1, true), cb.status(buf))
    end)
  end

  H.test("a python buffer runs in the project's .venv, and the statusline says (.venv)", function()
    local buf = H.buffer("main.py", "python", { "import sys; print(sys.prefix)" })
    local ex = H.done(cb.run_line(buf, 1), START_MS)
    H.eq("ok", ex.status, vim.inspect(ex.result))
    H.eq({ "  /workspace/.venv" }, H.mark_at(buf, 0).lines)
    H.check(cb.status(buf):find("cellbox python (.venv): idle", 1, true), cb.status(buf))
  end)
end)
