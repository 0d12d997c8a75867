-- JSON-RPC 2.0 over a job's stdio with LSP framing (Content-Length: N\r\n\r\n + N bytes).
-- Written by hand rather than reusing vim.lsp.rpc: in Neovim 0.7 that drops -32800
-- RequestCancelled replies, and cellbox uses them to end interrupted executions.
local M = {}

local json_decode_opts = { luanil = { object = true, array = true } }

local function encode(msg)
  return vim.json.encode(msg)
end

local function decode(s)
  return vim.json.decode(s, json_decode_opts)
end

---@class cellbox.Client
---@field job integer
---@field next_id integer
---@field pending table<integer, fun(err: table|nil, result: any)>
---@field handlers table<string, fun(params: any)> notification handlers by method
---@field request_handlers table<string, fun(params: any, reply: fun(err: table|nil, result: any))>
---@field buffer string
---@field closed boolean
local Client = {}
Client.__index = Client

--- Starts cmd as a job and returns a client speaking JSON-RPC over its stdio.
---@param cmd string[]
---@param opts? {env?: table<string,string>, on_exit?: fun(code: integer), on_stderr?: fun(lines: string[])}
function M.start(cmd, opts)
  opts = opts or {}
  local self = setmetatable({
    next_id = 1,
    pending = {},
    handlers = {},
    request_handlers = {},
    buffer = "",
    closed = false,
    stderr = {},
  }, Client)
  local jobopts = {
    on_stdout = function(_, data)
      self:_on_data(table.concat(data, "\n"))
    end,
    on_stderr = function(_, data)
      for _, l in ipairs(data) do
        if l ~= "" then
          table.insert(self.stderr, l)
          if #self.stderr > 200 then
            table.remove(self.stderr, 1)
          end
        end
      end
      if opts.on_stderr then
        opts.on_stderr(data)
      end
    end,
    on_exit = function(_, code)
      self.closed = true
      local pending = self.pending
      self.pending = {}
      for _, cb in pairs(pending) do
        pcall(cb, { code = -32099, message = "cellbox exited with code " .. tostring(code) })
      end
      if opts.on_exit then
        opts.on_exit(code)
      end
    end,
  }
  if opts.env then
    -- Neovim 0.7's jobstart has no `env` merge flag semantics beyond adding; it adds to
    -- the inherited environment, which is what we want.
    jobopts.env = opts.env
  end
  local ok, job = pcall(vim.fn.jobstart, cmd, jobopts)
  if not ok or job <= 0 then
    return nil, "cannot start " .. table.concat(cmd, " ") .. (ok and "" or (": " .. tostring(job)))
  end
  self.job = job
  return self
end

function Client:_on_data(chunk)
  self.buffer = self.buffer .. chunk
  while true do
    local hend = self.buffer:find("\r\n\r\n", 1, true)
    if not hend then
      return
    end
    local header = self.buffer:sub(1, hend - 1)
    local len = tonumber(header:match("[Cc]ontent%-[Ll]ength:%s*(%d+)"))
    if not len then
      -- Not a frame we understand: drop the header and go on.
      self.buffer = self.buffer:sub(hend + 4)
    else
      if #self.buffer < hend + 3 + len then
        return
      end
      local body = self.buffer:sub(hend + 4, hend + 3 + len)
      self.buffer = self.buffer:sub(hend + 4 + len)
      local ok, msg = pcall(decode, body)
      if ok and type(msg) == "table" then
        self:_dispatch(msg)
      end
    end
  end
end

function Client:_dispatch(msg)
  if msg.method then
    if msg.id ~= nil then
      local h = self.request_handlers[msg.method]
      local id = msg.id
      local function reply(err, result)
        if err then
          self:_send({ jsonrpc = "2.0", id = id, error = err })
        else
          self:_send({ jsonrpc = "2.0", id = id, result = result == nil and vim.NIL or result })
        end
      end
      if not h then
        reply({ code = -32601, message = "method not found: " .. msg.method })
      else
        local ok, e = pcall(h, msg.params, reply)
        if not ok then
          reply({ code = -32603, message = tostring(e) })
        end
      end
    else
      local h = self.handlers[msg.method]
      if h then
        local ok, e = pcall(h, msg.params)
        if not ok then
          vim.schedule(function()
            vim.notify("cellbox: handler for " .. msg.method .. " failed: " .. tostring(e), vim.log.levels.ERROR)
          end)
        end
      end
    end
  elseif msg.id ~= nil then
    local cb = self.pending[msg.id]
    self.pending[msg.id] = nil
    if cb then
      local ok, e = pcall(cb, msg.error, msg.result)
      if not ok then
        vim.schedule(function()
          vim.notify("cellbox: callback failed: " .. tostring(e), vim.log.levels.ERROR)
        end)
      end
    end
  end
end

function Client:_send(msg)
  if self.closed then
    return false
  end
  local body = encode(msg)
  local ok = pcall(vim.fn.chansend, self.job, "Content-Length: " .. #body .. "\r\n\r\n" .. body)
  return ok
end

--- Sends a request; cb(err, result) is called with the reply. Returns the request id.
function Client:request(method, params, cb)
  local id = self.next_id
  self.next_id = id + 1
  if self.closed then
    if cb then
      cb({ code = -32099, message = "cellbox is not running" })
    end
    return nil
  end
  self.pending[id] = cb or function() end
  self:_send({ jsonrpc = "2.0", id = id, method = method, params = params or vim.empty_dict() })
  return id
end

--- Sends a request and waits for its reply (up to timeout ms). Returns err, result.
function Client:request_sync(method, params, timeout)
  local done, rerr, rres = false, nil, nil
  self:request(method, params, function(err, result)
    done, rerr, rres = true, err, result
  end)
  local ok = vim.wait(timeout or 10000, function()
    return done
  end, 5)
  if not ok then
    return { code = -32098, message = method .. " timed out" }, nil
  end
  return rerr, rres
end

function Client:notify(method, params)
  return self:_send({ jsonrpc = "2.0", method = method, params = params or vim.empty_dict() })
end

--- Cancels a request sent earlier ($/cancelRequest); its reply is an error -32800.
function Client:cancel(id)
  return self:notify("$/cancelRequest", { id = id })
end

function Client:on(method, fn)
  self.handlers[method] = fn
end

function Client:on_request(method, fn)
  self.request_handlers[method] = fn
end

function Client:stop()
  if self.job and not self.closed then
    pcall(vim.fn.chanclose, self.job, "stdin")
    local job = self.job
    vim.defer_fn(function()
      pcall(vim.fn.jobstop, job)
    end, 2000)
  end
end

M.Client = Client
M.decode = decode
M.encode = encode
return M
