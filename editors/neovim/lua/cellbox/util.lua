-- Output model and rendering helpers of cellbox.nvim.
local api = vim.api
local M = {}

M.float_ns = api.nvim_create_namespace("cellbox.float")

function M.define_highlights()
  local links = {
    CellboxOutput = "Comment",
    CellboxStderr = "WarningMsg",
    CellboxError = "ErrorMsg",
    CellboxInfo = "NonText",
    CellboxOk = "DiagnosticOk",
    CellboxRunning = "DiagnosticInfo",
    CellboxFailed = "DiagnosticError",
  }
  for name, target in pairs(links) do
    -- DiagnosticOk is newer than 0.7; fall back to a group every version has.
    if target == "DiagnosticOk" and vim.fn.hlexists("DiagnosticOk") == 0 then
      target = "String"
    end
    pcall(vim.cmd, string.format("highlight default link %s %s", name, target))
  end
end

function M.strip_ansi(s)
  s = s:gsub("\27%[[%d;?]*[%a]", "")
  s = s:gsub("\27%][^\7]*\7", "")
  return s
end

local b64chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local b64idx = {}
for i = 1, #b64chars do
  b64idx[b64chars:byte(i)] = i - 1
end

function M.base64_decode(s)
  s = s:gsub("[^%w%+/=]", "")
  local out, bits, nbits = {}, 0, 0
  for i = 1, #s do
    local c = s:byte(i)
    local v = b64idx[c]
    if v then
      bits = bits * 64 + v
      nbits = nbits + 6
      if nbits >= 8 then
        nbits = nbits - 8
        local byte = math.floor(bits / 2 ^ nbits) % 256
        out[#out + 1] = string.char(byte)
        bits = bits % (2 ^ nbits)
      end
    end
  end
  return table.concat(out)
end

local image_seq = 0

local function save_image(exec, data, ext, config)
  local dir = config.image_dir or (vim.fn.stdpath("cache") .. "/cellbox")
  vim.fn.mkdir(dir, "p")
  image_seq = image_seq + 1
  local path = string.format("%s/%s-%d.%s", dir, exec.id, image_seq, ext)
  local f = io.open(path, "wb")
  if not f then
    return nil
  end
  f:write(data)
  f:close()
  return path
end

--- Adds a kernel/output notification to an execution's outputs.
function M.add_output(exec, p)
  if p.kind == "clear" then
    if p.wait then
      exec.clear_pending = true
    else
      exec.outputs = {}
    end
    return
  end
  if exec.clear_pending then
    exec.outputs = {}
    exec.clear_pending = false
  end
  if p.kind == "display" and p.update and p.displayId then
    for i, o in ipairs(exec.outputs) do
      if o.displayId == p.displayId then
        exec.outputs[i] = p
        return
      end
    end
  end
  local last = exec.outputs[#exec.outputs]
  if p.kind == "stream" and last and last.kind == "stream" and last.name == p.name then
    last.text = (last.text or "") .. (p.text or "")
    return
  end
  if p.kind == "stream" then
    p = { kind = "stream", name = p.name, text = p.text or "" }
  end
  table.insert(exec.outputs, p)
end

local function bundle_text(exec, o, config)
  local data = o.data or {}
  if data["image/png"] then
    o._image = o._image or save_image(exec, M.base64_decode(data["image/png"]), "png", config)
    return "[image: " .. (o._image or "could not save") .. "]"
  end
  if data["image/svg+xml"] then
    o._image = o._image or save_image(exec, data["image/svg+xml"], "svg", config)
    return "[image: " .. (o._image or "could not save") .. "]"
  end
  if data["text/plain"] then
    return data["text/plain"]
  end
  if data["text/markdown"] then
    return data["text/markdown"]
  end
  if data["application/json"] then
    return vim.json.encode(data["application/json"])
  end
  if data["text/html"] then
    return "[text/html] " .. data["text/html"]:gsub("<[^>]*>", "")
  end
  local mimes = vim.tbl_keys(data)
  return "[" .. table.concat(mimes, ", ") .. "]"
end

local function push_text(lines, text, hl)
  text = M.strip_ansi(text)
  local parts = vim.split(text, "\n", { plain = true })
  if #parts > 1 and parts[#parts] == "" then
    table.remove(parts)
  end
  for _, l in ipairs(parts) do
    -- A carriage return rewrites the line, as in a terminal (progress bars).
    local after = l:match("^.*\r(.*)$")
    if after then
      l = after
    end
    table.insert(lines, { l, hl })
  end
end

--- The output of an execution as {text, highlight} lines.
function M.render_lines(exec, config)
  local lines = {}
  for _, o in ipairs(exec.outputs) do
    if o.kind == "stream" then
      push_text(lines, o.text or "", o.name == "stderr" and "CellboxStderr" or "CellboxOutput")
    elseif o.kind == "error" then
      local text = o.text
      if not text or text == "" then
        local e = o.error or {}
        text = table.concat(e.traceback or { (e.ename or "Error") .. ": " .. (e.evalue or "") }, "\n")
      end
      push_text(lines, text, "CellboxError")
    elseif o.kind == "result" or o.kind == "display" then
      push_text(lines, bundle_text(exec, o, config), "CellboxOutput")
    end
  end
  local r = exec.result
  if r and r.error and (exec.status == "failed" or exec.status == "dead" or exec.status == "timeout") then
    -- Errors that came only in the result (the request failed, a timeout, a lost connection).
    local seen = false
    for _, o in ipairs(exec.outputs) do
      if o.kind == "error" then
        seen = true
      end
    end
    if not seen then
      push_text(lines, (r.error.ename or "Error") .. ": " .. (r.error.evalue or ""), "CellboxError")
    end
  end
  if r and r.outputTruncated then
    table.insert(lines, { "[output truncated: the execution's output limit was reached]", "CellboxStderr" })
  end
  return lines
end

--- The status text shown at the end of the last line that ran.
function M.status_chunk(exec)
  local st = exec.status
  local r = exec.result or {}
  local count = r.executionCount and ("[" .. r.executionCount .. "] ") or ""
  local dur = r.durationMs and (" " .. r.durationMs .. " ms") or ""
  if st == "running" then
    return { "… running", "CellboxRunning" }
  elseif st == "ok" then
    return { "✓ " .. count .. "ok" .. dur, "CellboxOk" }
  elseif st == "error" or st == "failed" or st == "dead" then
    local e = r.error or {}
    return { "✗ " .. count .. (e.ename or "error") .. ((e.evalue and e.evalue ~= "") and (": " .. e.evalue) or ""), "CellboxFailed" }
  elseif st == "interrupted" then
    return { "⏹ " .. count .. "interrupted" .. dur, "CellboxFailed" }
  elseif st == "timeout" then
    return { "⏱ " .. count .. "timeout" .. ((r.error and r.error.ename == "KernelRestarted") and " (kernel restarted)" or ""), "CellboxFailed" }
  elseif st == "stored" then
    return { count .. "saved in the notebook", "CellboxInfo" }
  elseif st == "aborted" then
    return { "∅ aborted (an earlier execution failed)", "CellboxFailed" }
  end
  return { tostring(st), "CellboxInfo" }
end

--- The 1-based line of exec.path that an error points at, from its traceback.
function M.error_line(exec, err)
  local found = {}
  local path = exec.path
  local lines = {}
  for _, l in ipairs(err.traceback or {}) do
    for _, x in ipairs(vim.split(l, "\n", { plain = true })) do
      table.insert(lines, x)
    end
  end
  for _, l in ipairs(lines) do
    local init = 1
    while true do
      local i, j = l:find(path, init, true)
      if not i then
        break
      end
      local rest = l:sub(j + 1)
      local n = rest:match('^"?,%s*line (%d+)') or rest:match("^:(%d+)") or rest:match("^: line (%d+)")
        or rest:match("^%)?:(%d+)")
      if n then
        table.insert(found, tonumber(n))
      end
      init = j + 1
    end
  end
  if #found == 0 then
    return nil
  end
  -- Python lists the innermost frame last; Node.js and bash first.
  if exec.language == "python" then
    return found[#found]
  end
  return found[1]
end

--- Opens a float with {text, hl} lines. Returns buf, win.
function M.open_float(lines, fopts, enter, ft)
  fopts = fopts or {}
  local buf = api.nvim_create_buf(false, true)
  local text = {}
  local width = 20
  for _, l in ipairs(lines) do
    local t = l[1]:gsub("\n", " ")
    table.insert(text, t)
    width = math.max(width, vim.fn.strdisplaywidth(t))
  end
  if #text == 0 then
    text = { "(no output)" }
  end
  api.nvim_buf_set_lines(buf, 0, -1, false, text)
  for i, l in ipairs(lines) do
    if l[2] then
      api.nvim_buf_add_highlight(buf, M.float_ns, l[2], i - 1, 0, -1)
    end
  end
  api.nvim_buf_set_option(buf, "modifiable", false)
  api.nvim_buf_set_option(buf, "bufhidden", "wipe")
  if ft then
    api.nvim_buf_set_option(buf, "filetype", ft)
  end
  local maxw = math.min(fopts.max_width or 120, vim.o.columns - 4)
  local maxh = math.min(fopts.max_height or 30, vim.o.lines - 4)
  local win = api.nvim_open_win(buf, enter, {
    relative = "cursor",
    row = 1,
    col = 0,
    width = math.max(1, math.min(width, maxw)),
    height = math.max(1, math.min(#text, maxh)),
    style = "minimal",
    border = fopts.border or "rounded",
  })
  api.nvim_win_set_option(win, "wrap", true)
  for _, key in ipairs({ "q", "<Esc>" }) do
    api.nvim_buf_set_keymap(buf, "n", key, "<cmd>close<cr>", { nowait = true, noremap = true, silent = true })
  end
  if not enter then
    -- Close it when the cursor moves in the window it was opened from.
    local src = api.nvim_get_current_buf()
    api.nvim_create_autocmd({ "CursorMoved", "InsertEnter", "BufLeave" }, {
      buffer = src,
      once = true,
      callback = function()
        pcall(api.nvim_win_close, win, true)
      end,
    })
  end
  return buf, win
end

-- What executions changed (PROTOCOL.md §10) ----------------------------------------------------

--- A path as a summary names it: "a.py (new)" for one the execution created.
function M.file_label(f)
  return f.kind == "added" and (f.path .. " (new)") or f.path
end

--- "wrote a.py (new), b.txt, deleted c.txt and 3 more" (at most max paths named, default 5);
--- "" when nothing changed.
function M.describe_files(files, more, max)
  files = files or {}
  max = max or 5
  local wrote, deleted = {}, {}
  for _, f in ipairs(files) do
    table.insert(f.kind == "deleted" and deleted or wrote, f)
  end
  local parts, named = {}, 0
  for _, g in ipairs({ { "wrote", wrote }, { "deleted", deleted } }) do
    local names = {}
    for _, f in ipairs(g[2]) do
      if named >= max then
        break
      end
      named = named + 1
      table.insert(names, M.file_label(f))
    end
    if #names > 0 then
      table.insert(parts, g[1] .. " " .. table.concat(names, ", "))
    end
  end
  local hidden = #files - named + ((more and more > 0) and more or 0)
  local text = table.concat(parts, ", ")
  if text == "" then
    return hidden > 0 and ("changed " .. hidden .. " files") or ""
  end
  return hidden > 0 and (text .. " and " .. hidden .. " more") or text
end

--- "execution 7 (python)": an execution (a record of workspace/executions, or a result).
function M.execution_title(r)
  local n = (r.executionCount and r.executionCount > 0) and ("execution " .. r.executionCount) or ("execution " .. tostring(r.executionId))
  return (r.language and r.language ~= "") and (n .. " (" .. r.language .. ")") or n
end

return M
