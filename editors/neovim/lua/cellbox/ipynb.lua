-- Jupyter notebooks (.ipynb, nbformat 4) as `# %%` buffers, in Jupytext's percent format: each
-- cell starts with a `# %%` line (`# %% [markdown]` and `# %% [raw]` with their lines commented
-- out), cells separated by a blank line; the comment leader follows the notebook's language (`//`
-- for javascript). The buffer edits the project's file directly, like any other buffer (not the
-- workspace's copy). Writing parses the buffer's cells again and writes nbformat 4.5: a cell keeps
-- its id, metadata, attachments and stored outputs (an extmark on its `# %%` line follows it
-- through edits); a code cell run in this session as a whole (from its `# %%` line, not past the
-- next) gets that run's outputs and execution count instead; new cells get new ids.
local session = require("cellbox.session")

local api = vim.api
local state = session.state

local M = {}

M.ns = api.nvim_create_namespace("cellbox.ipynb")

-- bufnr -> {nb = the notebook read (cells replaced on write), comment = "#",
--           cells = {[extmark id] = {index, cell}}} or {raw = true} for a file that is not one.
M.buffers = {}

local comments = {
  javascript = "//", typescript = "//", c = "//", cpp = "//", ["c++"] = "//", java = "//", go = "//",
  rust = "//", scala = "//", kotlin = "//", csharp = "//", ["c#"] = "//", swift = "//",
  sql = "--", lua = "--", haskell = "--",
}
local filetypes = { bash = "sh", ["c++"] = "cpp", ["c#"] = "cs" }

--- The notebook's language (kernelspec's, else language_info's, else python).
function M.language(nb)
  local md = type(nb.metadata) == "table" and nb.metadata or {}
  local ks = type(md.kernelspec) == "table" and md.kernelspec or {}
  local li = type(md.language_info) == "table" and md.language_info or {}
  local lang = (type(ks.language) == "string" and ks.language) or (type(li.name) == "string" and li.name) or "python"
  return lang:lower()
end

function M.comment(lang)
  return comments[lang] or "#"
end

function M.filetype(lang)
  return filetypes[lang] or lang
end

-- nbformat's multiline strings: a string or a list of lines.
local function text_of(v)
  if type(v) == "table" then
    return table.concat(v)
  end
  return type(v) == "string" and v or ""
end

-- "a\nb\n" -> {"a\n", "b\n"}, as Jupyter writes sources and stream text.
local function lines_keep(s)
  local out = {}
  for line in s:gmatch("[^\n]*\n?") do
    if line ~= "" then
      table.insert(out, line)
    end
  end
  return out
end

--- The lines of a buffer for notebook nb (a decoded nbformat 4 table), and the rows of the cells'
--- `# %%` lines (0-based).
function M.to_lines(nb)
  local cm = M.comment(M.language(nb))
  local lines, rows = {}, {}
  for i, cell in ipairs(nb.cells or {}) do
    if i > 1 then
      table.insert(lines, "")
    end
    local kind = cell.cell_type
    table.insert(rows, #lines)
    table.insert(lines, cm .. " %%" .. ((kind == "markdown" or kind == "raw") and (" [" .. kind .. "]") or ""))
    local src = vim.split(text_of(cell.source), "\n", { plain = true })
    if #src == 1 and src[1] == "" then
      src = {}
    end
    for _, l in ipairs(src) do
      if kind == "code" then
        table.insert(lines, l)
      else
        table.insert(lines, l == "" and cm or (cm .. " " .. l))
      end
    end
  end
  return lines, rows
end

local function set_lines(buf, lines)
  local ul = api.nvim_buf_get_option(buf, "undolevels")
  -- Loading the file is not an undoable change.
  api.nvim_buf_set_option(buf, "undolevels", -1)
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  api.nvim_buf_set_option(buf, "undolevels", ul)
  api.nvim_buf_set_option(buf, "modified", false)
end

-- Puts an extmark on each cell's `# %%` line, so that the cell follows it through edits.
local function mark_cells(buf, info, rows)
  api.nvim_buf_clear_namespace(buf, M.ns, 0, -1)
  info.cells = {}
  for i, row in ipairs(rows) do
    local id = api.nvim_buf_set_extmark(buf, M.ns, row, 0, {})
    info.cells[id] = { index = i, cell = info.nb.cells[i] }
  end
end

-- A stored nbformat output as a kernel/output notification's params (for util.lua's model).
local function as_output(o)
  local data
  if type(o.data) == "table" then
    data = {}
    for mime, v in pairs(o.data) do
      -- Text is a string or a list of lines; application/json is any JSON.
      data[mime] = (mime:match("json") or type(v) ~= "table") and v or text_of(v)
    end
  end
  if o.output_type == "stream" then
    return { kind = "stream", name = o.name, text = text_of(o.text) }
  elseif o.output_type == "execute_result" then
    return { kind = "result", data = data }
  elseif o.output_type == "display_data" then
    return { kind = "display", data = data }
  elseif o.output_type == "error" then
    return { kind = "error", error = { ename = o.ename, evalue = o.evalue, traceback = type(o.traceback) == "table" and o.traceback or {} } }
  end
end

-- Shows the outputs stored in the notebook under their cells, as executions of status "stored"
-- (:CellboxOutput shows them in full; running the cell replaces them).
local function show_stored(buf, nb, rows)
  local output = require("cellbox.output")
  local util = require("cellbox.util")
  output.clear(buf)
  local list = {}
  for i, cell in ipairs(nb.cells) do
    if cell.cell_type == "code" and type(cell.outputs) == "table" and #cell.outputs > 0 then
      local nsrc = #vim.split(text_of(cell.source), "\n", { plain = true })
      if text_of(cell.source) == "" then
        nsrc = 0
      end
      local exec = {
        id = "ipynb-" .. buf .. "-" .. i,
        buf = buf,
        path = api.nvim_buf_get_name(buf),
        first_line = rows[i] + 1,
        outputs = {},
        status = "stored",
        stored = true,
        done = true,
        result = { executionCount = type(cell.execution_count) == "number" and cell.execution_count or nil },
      }
      exec.start_mark = api.nvim_buf_set_extmark(buf, output.ns, rows[i], 0, {})
      exec.mark = api.nvim_buf_set_extmark(buf, output.ns, rows[i] + nsrc, 0, {})
      for _, o in ipairs(cell.outputs) do
        local p = type(o) == "table" and as_output(o)
        if p then
          util.add_output(exec, p)
        end
      end
      table.insert(list, exec)
    end
  end
  state.buf_execs[buf] = list
  for _, exec in ipairs(list) do
    output.render(exec)
  end
end

--- BufReadCmd: reads the notebook at path into buf.
-- The file's modification time and size, to tell whether it changed since it was read.
local function stamp(path)
  local st = vim.loop.fs_stat(path)
  return st and string.format("%d.%d:%d", st.mtime.sec, st.mtime.nsec or 0, st.size) or nil
end

function M.read(buf, path)
  local info
  local f = io.open(path, "rb")
  if not f then
    -- A new notebook.
    info = { nb = { cells = {}, metadata = vim.empty_dict(), nbformat = 4, nbformat_minor = 5 }, comment = "#" }
    info.stamp = stamp(path)
  M.buffers[buf] = info
    set_lines(buf, { "# %%", "" })
    mark_cells(buf, info, {})
    api.nvim_buf_set_option(buf, "filetype", "python")
    return
  end
  local text = f:read("*a")
  f:close()
  local ok, nb = pcall(vim.json.decode, text)
  local why
  if not ok then
    why = "not JSON: " .. tostring(nb)
  elseif type(nb) ~= "table" or nb.nbformat ~= 4 or type(nb.cells) ~= "table" then
    why = "not an nbformat 4 notebook (nbformat " .. tostring(type(nb) == "table" and nb.nbformat or "?") .. ")"
  end
  if why then
    -- Shown and written back as it is.
    M.buffers[buf] = { raw = true, stamp = stamp(path) }
    set_lines(buf, vim.split(text:gsub("\n$", ""), "\n", { plain = true }))
    api.nvim_buf_set_option(buf, "filetype", "json")
    session.notify(vim.fn.fnamemodify(path, ":t") .. " is " .. why .. "; editing it as text", vim.log.levels.WARN)
    return
  end
  local lang = M.language(nb)
  info = { nb = nb, comment = M.comment(lang) }
  if not M.buffers[buf] then
    api.nvim_create_autocmd("BufWipeout", {
      buffer = buf,
      once = true,
      callback = function()
        M.buffers[buf] = nil
      end,
    })
  end
  info.stamp = stamp(path)
  M.buffers[buf] = info
  local lines, rows = M.to_lines(nb)
  set_lines(buf, lines)
  mark_cells(buf, info, rows)
  api.nvim_buf_set_option(buf, "filetype", M.filetype(lang))
  show_stored(buf, nb, rows)
  require("cellbox.reattach").on_read(buf)
end

-- Outputs ------------------------------------------------------------------------------------

local function bundle(data)
  if type(data) ~= "table" or next(data) == nil then
    return vim.empty_dict()
  end
  return data
end

--- An execution's outputs as nbformat outputs.
function M.outputs(exec)
  local out = {}
  local has_error = false
  for _, o in ipairs(exec.outputs or {}) do
    if o.kind == "stream" then
      table.insert(out, { output_type = "stream", name = o.name or "stdout", text = lines_keep(o.text or "") })
    elseif o.kind == "result" then
      table.insert(out, { output_type = "execute_result", execution_count = exec.count or vim.NIL, data = bundle(o.data), metadata = bundle(o.metadata) })
    elseif o.kind == "display" then
      table.insert(out, { output_type = "display_data", data = bundle(o.data), metadata = bundle(o.metadata) })
    elseif o.kind == "error" then
      local e = o.error or (exec.result and exec.result.error) or {}
      has_error = true
      table.insert(out, { output_type = "error", ename = e.ename or "Error", evalue = e.evalue or "", traceback = e.traceback or (o.text and { o.text }) or {} })
    end
  end
  local e = exec.result and exec.result.error
  if e and not has_error and exec.status ~= "aborted" then
    table.insert(out, { output_type = "error", ename = e.ename or "Error", evalue = e.evalue or "", traceback = e.traceback or {} })
  end
  return out
end

-- The latest execution of buf that ran the cell whose `# %%` line is row and that ends before
-- row next (exclusive): a run of that cell as a whole.
local function cell_exec(buf, row, next_row)
  local output = require("cellbox.output")
  local list = state.buf_execs[buf] or {}
  for i = #list, 1, -1 do
    local s, e = output.exec_range(list[i])
    if s == row and e < next_row and not list[i].stored then
      return list[i]
    end
  end
end

-- Writing ------------------------------------------------------------------------------------

-- A deep copy that keeps vim.NIL (JSON null, which vim.deepcopy of 0.7 cannot copy) and the
-- metatable of empty JSON objects.
local function copy(v)
  if type(v) ~= "table" then
    return v
  end
  local t = {}
  for k, x in pairs(v) do
    t[k] = copy(x)
  end
  return setmetatable(t, getmetatable(v))
end

local id_seq = 0
local function new_id(used)
  while true do
    id_seq = id_seq + 1
    local id = vim.fn.sha256(string.format("%d-%d-%d", vim.fn.getpid(), vim.loop.hrtime(), id_seq)):sub(1, 8)
    if not used[id] then
      used[id] = true
      return id
    end
  end
end

local function uncomment(l, cm)
  if l == cm then
    return ""
  end
  if vim.startswith(l, cm .. " ") then
    return l:sub(#cm + 2)
  end
  if vim.startswith(l, cm) then
    return l:sub(#cm + 1)
  end
  return l
end

local function source(lines)
  while #lines > 0 and lines[#lines]:match("^%s*$") do
    table.remove(lines)
  end
  return lines_keep(table.concat(lines, "\n"))
end

--- The notebook of buf's text: the cells parsed from its lines, with what the original cells
--- (info.cells, by the extmarks on their `# %%` lines) and this session's runs give them.
--- Returns the notebook and the rows of its cells' `# %%` lines.
function M.from_buffer(buf, info)
  local lines = api.nvim_buf_get_lines(buf, 0, -1, false)
  local pattern = session.config().cell_pattern
  local heads = {}
  for i, l in ipairs(lines) do
    if l:match(pattern) then
      table.insert(heads, i - 1)
    end
  end
  local cm = info.comment or "#"
  -- Text above the first `# %%` line is a code cell of its own.
  local spans = {}
  local first = heads[1] or #lines
  local above = {}
  for r = 1, first do
    table.insert(above, lines[r])
  end
  if #source(above) > 0 then
    table.insert(spans, { head = nil, s = 0, e = first })
  end
  for i, h in ipairs(heads) do
    table.insert(spans, { head = h, s = h + 1, e = heads[i + 1] or #lines })
  end
  local used = {}
  local cells, rows = {}, {}
  local taken = {}
  for _, sp in ipairs(spans) do
    local header = sp.head and lines[sp.head + 1] or ""
    local kind = header:match("%[markdown%]") and "markdown" or header:match("%[raw%]") and "raw" or "code"
    -- The original cell: the mark on this line (several, when the lines between were deleted: the
    -- last cell's, whose line this was).
    local orig
    if sp.head then
      local best
      for _, m in ipairs(api.nvim_buf_get_extmarks(buf, M.ns, { sp.head, 0 }, { sp.head, -1 }, {})) do
        local c = info.cells and info.cells[m[1]]
        if c and not taken[c.index] and (not best or c.index > best.index) then
          best = c
        end
      end
      if best then
        taken[best.index] = true
        orig = best.cell
      end
    end
    local body = {}
    for r = sp.s + 1, sp.e do
      table.insert(body, kind == "code" and lines[r] or uncomment(lines[r], cm))
    end
    local cell = orig and copy(orig) or { metadata = vim.empty_dict() }
    cell.cell_type = kind
    cell.source = source(body)
    if type(cell.metadata) ~= "table" then
      cell.metadata = vim.empty_dict()
    end
    if kind == "code" then
      cell.attachments = nil
      local exec = sp.head and cell_exec(buf, sp.head, sp.e)
      if exec then
        cell.outputs = M.outputs(exec)
        cell.execution_count = exec.count or vim.NIL
      elseif not orig or orig.cell_type ~= "code" then
        cell.outputs = {}
        cell.execution_count = vim.NIL
      end
      cell.outputs = cell.outputs or {}
      if cell.execution_count == nil then
        cell.execution_count = vim.NIL
      end
    else
      cell.outputs = nil
      cell.execution_count = nil
    end
    if type(cell.id) == "string" and cell.id ~= "" and not used[cell.id] then
      used[cell.id] = true
    else
      cell.id = nil
    end
    table.insert(cells, cell)
    table.insert(rows, sp.head)
  end
  for _, cell in ipairs(cells) do
    cell.id = cell.id or new_id(used)
  end
  local nb = copy(info.nb or {})
  nb.cells = cells
  nb.nbformat = 4
  nb.nbformat_minor = math.max(5, tonumber(nb.nbformat_minor) or 0)
  if type(nb.metadata) ~= "table" then
    nb.metadata = vim.empty_dict()
  end
  return nb, rows
end

--- BufWriteCmd: writes buf as the notebook at path.
function M.write(buf, path)
  local info = M.buffers[buf]
  local text
  local nb, rows
  if info and info.raw then
    text = table.concat(api.nvim_buf_get_lines(buf, 0, -1, false), "\n") .. "\n"
  else
    if not info then
      -- Another buffer written as a notebook: its filetype is the notebook's language.
      local ft = api.nvim_buf_get_option(buf, "filetype")
      info = { nb = { metadata = { language_info = { name = ft ~= "" and ft or "python" } } }, comment = M.comment(ft) }
    end
    nb, rows = M.from_buffer(buf, info)
    text = M.encode(nb) .. "\n"
  end
  local same = vim.fn.fnamemodify(api.nvim_buf_get_name(buf), ":p") == vim.fn.fnamemodify(path, ":p")
  -- Never over newer work unasked (JupyterLab, the browser IDE, :CellboxCommit or git wrote
  -- the file since it was read): as Vim's own W12, :w refuses and :w! overwrites.
  if same and M.buffers[buf] and M.buffers[buf].stamp and stamp(path) ~= M.buffers[buf].stamp and vim.v.cmdbang ~= 1 then
    session.notify(vim.fn.fnamemodify(path, ":t") .. " changed on disk since it was read; :w! overwrites it, :e! reads it again", vim.log.levels.ERROR)
    return false
  end
  local f, e = io.open(path, "wb")
  if not f then
    session.notify("cannot write " .. path .. ": " .. tostring(e), vim.log.levels.ERROR)
    return false
  end
  local ok, we = f:write(text)
  f:close()
  if not ok then
    session.notify("cannot write " .. path .. ": " .. tostring(we), vim.log.levels.ERROR)
    return false
  end
  if same then
    api.nvim_buf_set_option(buf, "modified", false)
    if nb then
      -- The cells as written are the originals from now on (new cells keep their new ids).
      info.nb = nb
      M.buffers[buf] = info
      api.nvim_buf_clear_namespace(buf, M.ns, 0, -1)
      info.cells = {}
      for i, row in ipairs(rows) do
        if row then
          local id = api.nvim_buf_set_extmark(buf, M.ns, row, 0, {})
          info.cells[id] = { index = i, cell = nb.cells[i] }
        end
      end
    end
  end
  if same and M.buffers[buf] then
    M.buffers[buf].stamp = stamp(path)
  end
  vim.api.nvim_echo({ { string.format('"%s" %dL, %dB written', vim.fn.fnamemodify(path, ":~:."), api.nvim_buf_line_count(buf), #text) } }, false, {})
  return true
end

-- JSON as Jupyter writes it: keys sorted, one space of indent, "/" unescaped ------------------

local empty_dict_mt = getmetatable(vim.empty_dict())

local function scalar(v)
  local s = vim.json.encode(v)
  if type(v) == "string" then
    -- cjson escapes "/"; a "\/" preceded by an even number of backslashes is that escape.
    s = s:gsub("(\\*)\\/", function(bs)
      if #bs % 2 == 0 then
        return bs .. "/"
      end
    end)
  end
  return s
end

local function is_object(t)
  if getmetatable(t) == empty_dict_mt then
    return true
  end
  return next(t) ~= nil and not vim.tbl_islist(t)
end

local function encode(v, indent)
  if v == nil or v == vim.NIL then
    return "null"
  end
  if type(v) ~= "table" then
    return scalar(v)
  end
  local pad = string.rep(" ", indent + 1)
  local parts = {}
  if is_object(v) then
    local keys = vim.tbl_keys(v)
    table.sort(keys, function(a, b)
      return tostring(a) < tostring(b)
    end)
    for _, k in ipairs(keys) do
      table.insert(parts, pad .. scalar(tostring(k)) .. ": " .. encode(v[k], indent + 1))
    end
    if #parts == 0 then
      return "{}"
    end
    return "{\n" .. table.concat(parts, ",\n") .. "\n" .. string.rep(" ", indent) .. "}"
  end
  for _, x in ipairs(v) do
    table.insert(parts, pad .. encode(x, indent + 1))
  end
  if #parts == 0 then
    return "[]"
  end
  return "[\n" .. table.concat(parts, ",\n") .. "\n" .. string.rep(" ", indent) .. "]"
end

--- v as JSON the way Jupyter writes notebooks (sorted keys, indent 1).
function M.encode(v)
  return encode(v, 0)
end

return M
