-- The network and packages (PROTOCOL.md §9): a python cell's blocked connection is asked about
-- with vim.ui.select once, however often the cell runs while the choice shows; "Allow once" sends
-- workspace/setNetwork with allowlist and the rule; a dismissed rule is not asked about again;
-- "Always allow" keeps the rule in stdpath('data')/cellbox/network.json; :CellboxInstall notifies
-- the $/progress of its token and the result.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":h") .. "/helpers.lua")

local rpc = require("cellbox.rpc")
local proto = require("cellbox.protocol")
local methods = proto.methods

-- Every request the plugin sends: {method, params}.
local sent = {}
local orig_request = rpc.Client.request
rpc.Client.request = function(self, method, params, cb)
  table.insert(sent, { method = method, params = params })
  return orig_request(self, method, params, cb)
end

local function sent_of(method)
  return vim.tbl_filter(function(r)
    return r.method == method
  end, sent)
end

-- vim.ui.select, answered by the test: the prompts, and the callback of the last one.
local asked = {}
local pending_choice
vim.ui.select = function(items, opts, on_choice)
  table.insert(asked, { items = items, prompt = opts.prompt })
  pending_choice = on_choice
end

local notified = {}
vim.notify = function(msg)
  table.insert(notified, msg)
end

local function fetch_code(host)
  return {
    "import urllib.request",
    "try:",
    "    urllib.request.urlopen('http://" .. host .. "/', timeout=20)",
    "except Exception as e:",
    "    print('refused:', type(e).__name__)",
  }
end

H.main(function()
  local cb = H.setup()
  local state = cb._state
  local blocked = {}

  -- Runs what was scheduled so far (a prompt is scheduled as its notification arrives): a marker
  -- scheduled now runs after it.
  local function drain()
    local done = false
    vim.schedule(function()
      done = true
    end)
    H.wait(function()
      return done
    end, 10000, "the scheduled callbacks")
  end

  local function count_blocked(host)
    local n = 0
    for _, p in ipairs(blocked) do
      if p.host == host then
        n = n + 1
      end
    end
    return n
  end

  H.test("a blocked connection: one vim.ui.select while the cell runs twice; Allow once sends setNetwork", function()
    local buf = H.buffer("fetch.py", "python", fetch_code("blocked.example"))
    H.check(cb.connect(), "connect")
    local on_blocked = state.client.handlers[methods.NetworkBlocked]
    H.check(on_blocked, "no network/blocked handler")
    state.client.handlers[methods.NetworkBlocked] = function(p)
      table.insert(blocked, p)
      on_blocked(p)
    end
    local ex = H.done(cb.run_file(buf), 30000)
    H.eq("ok", ex.status, vim.inspect(ex.result))
    H.wait(function()
      return #asked == 1
    end, 20000, "the prompt")
    H.done(cb.run_file(buf), 30000)
    H.wait(function()
      return count_blocked("blocked.example") >= 2
    end, 20000, "the second network/blocked")
    drain()
    H.eq(1, #asked, "prompts: " .. vim.inspect(asked))
    H.eq({ "Allow once", "Always allow" }, asked[1].items)
    H.check(asked[1].prompt:match("^cellbox blocked blocked%.example:80 %(.+%) from the kernel of fetch%.py%. Allow%?$"), asked[1].prompt)
    H.eq(80, blocked[1].port)
    H.eq(state.buf_kernel[buf], blocked[1].kernelId)
    local before = #sent_of(methods.WorkspaceSetNetwork)
    pending_choice("Allow once")
    H.wait(function()
      return #sent_of(methods.WorkspaceSetNetwork) > before
    end, 10000, "workspace/setNetwork")
    local set = sent_of(methods.WorkspaceSetNetwork)[before + 1].params
    H.eq({ workspaceId = state.workspace.workspaceId, network = "allowlist", allow = { "blocked.example:80" } }, set)
    -- Allow once is for this session: nothing kept.
    H.eq(0, vim.fn.filereadable(require("cellbox.network").store_path()))
  end)

  H.test("a dismissed rule is not asked about again; Always allow keeps the rule", function()
    local buf = H.buffer("other.py", "python", fetch_code("other.example"))
    local n = #asked
    H.done(cb.run_file(buf), 30000)
    H.wait(function()
      return #asked == n + 1
    end, 20000, "the prompt")
    pending_choice(nil)
    H.done(cb.run_file(buf), 30000)
    H.wait(function()
      return count_blocked("other.example") >= 2
    end, 20000, "the second network/blocked")
    drain()
    H.eq(n + 1, #asked)
    -- A third host, always allowed: kept for the project.
    local third = H.buffer("third.py", "python", fetch_code("third.example"))
    H.done(cb.run_file(third), 30000)
    H.wait(function()
      return #asked == n + 2
    end, 20000, "the third prompt")
    local before = #sent_of(methods.WorkspaceSetNetwork)
    pending_choice("Always allow")
    H.wait(function()
      return #sent_of(methods.WorkspaceSetNetwork) > before
    end, 10000, "workspace/setNetwork")
    H.eq({ "blocked.example:80", "third.example:80" }, sent_of(methods.WorkspaceSetNetwork)[before + 1].params.allow)
    local stored = require("cellbox.network").read_store()[state.workspace.root]
    H.eq({ mode = "allowlist", allow = { "third.example:80" } }, stored)
  end)

  H.test(":CellboxInstall notifies the progress and the result", function()
    local result = {
      installed = { { name = "requests", version = "2.31.0" }, { name = "urllib3", version = "2.0.7" } },
      cacheHits = 3,
      downloadedBytes = 1234567,
      durationMs = 2100,
    }
    -- The daemon's reply as PROTOCOL.md §9 gives it: $/progress on the workDoneToken, then the result.
    local params
    rpc.Client.request = function(self, method, p, done)
      if method ~= methods.WorkspaceInstall then
        return orig_request(self, method, p, done)
      end
      params = p
      local progress = self.handlers[methods.Progress]
      vim.schedule(function()
        progress({ token = p.workDoneToken, value = { kind = "begin", title = "pip install" } })
        progress({ token = p.workDoneToken, value = { kind = "report", message = "1.2 MB, 4 files" } })
        progress({ token = p.workDoneToken, value = { kind = "end" } })
        done(nil, result)
      end)
      return 1
    end
    notified = {}
    vim.cmd("CellboxInstall pip requests urllib3")
    H.wait(function()
      return #notified >= 4
    end, 5000, "notifications: " .. vim.inspect(notified))
    rpc.Client.request = orig_request
    H.eq({ "requests", "urllib3" }, params.packages)
    H.eq("pip", params.manager)
    H.eq(state.workspace.workspaceId, params.workspaceId)
    H.eq({
      "cellbox: pip install requests urllib3 ...",
      "cellbox: pip install requests urllib3: pip install",
      "cellbox: pip install requests urllib3: 1.2 MB, 4 files",
      "cellbox: installed requests 2.31.0, urllib3 2.0.7 (3 from cache, 1.2 MB downloaded, 2.1 s)",
    }, notified)
  end)
end)
