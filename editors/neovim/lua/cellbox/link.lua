-- How the plugin's modules reach init.lua's connection without a require cycle
-- at load time: each call looks the module up when it runs.
local M = {}

function M.cb()
  return require("cellbox")
end

function M.call(...)
  return require("cellbox")._call(...)
end

function M.notify(...)
  return require("cellbox")._notify(...)
end

return M
