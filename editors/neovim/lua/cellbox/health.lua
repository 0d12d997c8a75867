-- :checkhealth cellbox: the binary, its version, the protocol handshake and `cellbox doctor`.
local M = {}

local function reporter()
  local h = vim.health or {}
  if h.start then
    return { start = h.start, ok = h.ok, warn = h.warn, error = h.error, info = h.info }
  end
  if h.report_start then
    return { start = h.report_start, ok = h.report_ok, warn = h.report_warn, error = h.report_error, info = h.report_info }
  end
  local old = require("health") -- Neovim 0.7
  return { start = old.report_start, ok = old.report_ok, warn = old.report_warn, error = old.report_error, info = old.report_info }
end

local function run(argv)
  local out = vim.fn.systemlist(argv)
  return vim.v.shell_error, out
end

function M.check()
  local r = reporter()
  local cb = require("cellbox")
  r.start("cellbox")
  if vim.fn.has("nvim-0.7") == 1 then
    r.ok("Neovim " .. tostring(vim.version().major) .. "." .. tostring(vim.version().minor) .. "." .. tostring(vim.version().patch))
  else
    r.error("Neovim 0.7 or later is needed")
  end
  local cmd = cb.config.cmd
  local bin = cmd[1]
  local path = vim.fn.exepath(bin)
  if path == "" then
    r.error("cellbox binary not found: " .. bin, { "Install cellbox, or set require('cellbox').setup{cmd = {'/path/to/cellbox', 'connect'}}" })
    return
  end
  r.ok("binary: " .. path .. " (cmd: " .. table.concat(cmd, " ") .. ")")
  local code, out = run({ path, "version" })
  if code == 0 then
    r.ok("version: " .. table.concat(out, " "))
  else
    r.warn("`cellbox version` failed: " .. table.concat(out, " "))
  end

  r.start("cellbox protocol")
  local client, err = cb.connect()
  if not client then
    r.error("cannot connect: " .. tostring(err))
  else
    local init = cb._state.init or {}
    local si = init.serverInfo or {}
    r.ok(string.format("connected: %s %s, protocol version %s", si.name or "?", si.version or "?", tostring(init.protocolVersion)))
    local caps = init.capabilities or {}
    for _, l in ipairs(caps.languages or {}) do
      if l.available then
        local about = (l.displayName or "") .. ((l.version or "") ~= "" and (" " .. l.version) or "")
        if l.id:sub(1, 8) == "jupyter:" then
          about = about .. ", Jupyter kernel"
        end
        if l.unsupported and #l.unsupported > 0 then
          about = about .. "; cannot: " .. table.concat(l.unsupported, ", ")
        end
        r.ok(string.format("language %s (%s)", l.id, about))
      else
        r.warn(string.format("language %s unavailable: %s", l.id, l.reason or "?"))
      end
    end
    local sb = caps.sandbox or {}
    if sb.reason then
      r.warn("sandbox: " .. sb.reason)
    end
  end

  r.start("cellbox doctor")
  code, out = run({ path, "doctor" })
  for _, l in ipairs(out) do
    if l ~= "" then
      r.info(l)
    end
  end
  if code == 0 then
    r.ok("`cellbox doctor` passed")
  else
    r.warn("`cellbox doctor` exited with " .. code .. " (see above)")
  end
end

return M
