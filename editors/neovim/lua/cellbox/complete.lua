-- Completion and inspection of cellbox.nvim from the buffer's kernel: 'omnifunc', complete()
-- for completion plugins, and :CellboxInspect in a float.
local proto = require("cellbox.protocol")
local session = require("cellbox.session")
local kernels = require("cellbox.kernels")
local run = require("cellbox.run")
local util = require("cellbox.util")

local methods = proto.methods
local api = vim.api
local call = session.call

-- How long completion and help wait for the kernel (config complete_timeout_ms).
local function wait_ms()
  return session.config().complete_timeout_ms or 5000
end

local M = {}

-- The code of the cell under the cursor up to the cursor, and the byte offset in it of the
-- cursor's line.
local function code_to_cursor()
  local buf = api.nvim_get_current_buf()
  local cur = api.nvim_win_get_cursor(0)
  local row, col = cur[1] - 1, cur[2]
  local c = run.cell_at(buf, row)
  local s = c and c[1] or row
  local lines = api.nvim_buf_get_lines(buf, s, row + 1, false)
  lines[#lines] = lines[#lines]:sub(1, col)
  local code = table.concat(lines, "\n")
  local line_offset = #code - #lines[#lines]
  return code, line_offset
end

-- The buffer's kernel if it exists and its language answers method (languages[].unsupported);
-- quiet otherwise unless tell: completion that the kernel cannot give is just none.
local function kernel_that(method, tell)
  local kid = kernels.kernel(0)
  if not kid then
    return nil
  end
  local k = session.state.kernels[kid]
  if k and not session.supports(k.language, method) then
    if tell then
      session.notify(session.unsupported_message(k.language, method), vim.log.levels.INFO)
    end
    return nil
  end
  return kid
end

-- The matches of the last omnifunc(1) and the column they start at.
local last = { col = -3, matches = {} }

--- Completion from the kernel: set 'omnifunc' to v:lua.require'cellbox'.omnifunc.
function M.omnifunc(findstart, base)
  if findstart == 1 then
    local kid = kernel_that(methods.KernelComplete)
    if not kid then
      return -3
    end
    local code, line_offset = code_to_cursor()
    local res = call(methods.KernelComplete, { kernelId = kid, code = code, cursorPos = #code }, wait_ms())
    if not res then
      return -3
    end
    last = { col = math.max(0, (res.cursorStart or #code) - line_offset), matches = res.matches or {} }
    return last.col
  end
  local out = {}
  for _, m in ipairs(last.matches) do
    if base == nil or base == "" or vim.startswith(m, base) then
      table.insert(out, { word = m, menu = "[cellbox]" })
    end
  end
  return out
end

--- Completion candidates for the code before the cursor (for completion plugins):
--- returns {matches, cursorStart, cursorEnd} with byte offsets on the cursor line.
function M.complete()
  local kid = kernel_that(methods.KernelComplete)
  if not kid then
    return nil
  end
  local code, line_offset = code_to_cursor()
  local res = call(methods.KernelComplete, { kernelId = kid, code = code, cursorPos = #code }, wait_ms())
  if not res then
    return nil
  end
  return { matches = res.matches or {}, cursorStart = res.cursorStart - line_offset, cursorEnd = res.cursorEnd - line_offset }
end

--- K-style inspect of the name under the cursor, in a float. Returns the float's buf, win.
function M.inspect()
  local kid = kernel_that(methods.KernelInspect, true)
  if not kid then
    return nil
  end
  local line = api.nvim_get_current_line()
  local col = api.nvim_win_get_cursor(0)[2]
  -- Inspect the whole word under the cursor.
  local e = col
  while e < #line and line:sub(e + 1, e + 1):match("[%w_]") do
    e = e + 1
  end
  local res = call(methods.KernelInspect, { kernelId = kid, code = line, cursorPos = e, detailLevel = 0 }, wait_ms())
  if not res then
    return nil
  end
  if not res.found or not res.data then
    session.notify("nothing found", vim.log.levels.INFO)
    return nil
  end
  local text = res.data["text/plain"] or res.data["text/markdown"] or vim.inspect(res.data)
  -- R's help marks bold and underline with overstrikes ("_\bP"): keep the letters.
  text = util.strip_ansi(text):gsub("[^\n]\b", "")
  local lines = {}
  for _, l in ipairs(vim.split(text, "\n", { plain = true })) do
    table.insert(lines, { l, "Normal" })
  end
  return util.open_float(lines, session.config().float, false, "cellbox-inspect")
end

return M
