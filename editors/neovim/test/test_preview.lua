-- Previews of servers in the sandbox (PROTOCOL.md §11) against the real daemon: a server started
-- by a python buffer brings workspace/ports; with the default previews = "notify" the port is
-- announced ("a server listens on port 8000 — :CellboxPreview 8000 to preview it") and nothing is
-- exposed; :CellboxPreview (no port: the only listening port) exposes it and notifies the URL,
-- which serves the server's page (curl, as a browser: the token, then the cookie it sets);
-- :CellboxPreview of the same port answers the same preview; :CellboxPreviews lists it; with
-- "ask", vim.ui.select offers a new port ("Open in the browser" exposes and opens it with the
-- browser option; a dismissed port is not asked about again while it listens);
-- :CellboxUnpreview ends one preview, :CellboxUnpreview! every one; :CellboxPreview with several
-- listening ports offers them with vim.ui.select; "auto" past the daemon's 16 previews warns once
-- (no error per port), and previews again once previews are freed.
-- run.sh timeout: 120
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
  return vim.tbl_map(
    function(r)
      return r.params
    end,
    vim.tbl_filter(function(r)
      return r.method == method
    end, sent)
  )
end

local notified = {}
local levels = {} -- the level of each notification
vim.notify = function(msg, level)
  table.insert(notified, msg)
  table.insert(levels, level or vim.log.levels.INFO)
end

local function notified_since(n)
  local out = {}
  for i = n + 1, #notified do
    table.insert(out, { msg = notified[i], level = levels[i] })
  end
  return out
end

local function notified_match(pattern)
  for _, m in ipairs(notified) do
    local c = m:match(pattern)
    if c then
      return c
    end
  end
end

-- vim.ui.select, answered by the test: the prompts, and the callback of the last one.
local asked = {}
local pending_choice
vim.ui.select = function(items, opts, on_choice)
  local shown = opts.format_item and vim.tbl_map(opts.format_item, items) or nil
  table.insert(asked, { items = items, prompt = opts.prompt, shown = shown })
  pending_choice = on_choice
end

local function server_code(...)
  local lines = { "import http.server, threading" }
  for _, port in ipairs({ ... }) do
    table.insert(lines, string.format('s%d = http.server.ThreadingHTTPServer(("127.0.0.1", %d), http.server.SimpleHTTPRequestHandler)', port, port))
    table.insert(lines, string.format("threading.Thread(target=s%d.serve_forever, daemon=True).start()", port))
  end
  return lines
end

--- GETs url as a browser would (curl with a cookie jar, following the redirect); returns the
--- status line's code and the body.
local function get(url)
  local jar = vim.fn.tempname()
  local out = vim.fn.system({ "curl", "-s", "-L", "-c", jar, "-b", jar, "-w", "\n%{http_code}", url })
  local body, code = out:match("^(.*)\n(%d+)$")
  return tonumber(code), body
end

H.main(function()
  local opened = {}
  local cb = H.setup({
    browser = function(url)
      table.insert(opened, url)
    end,
  })
  local index = assert(io.open(H.project .. "/index.html", "w"))
  index:write("<!doctype html><title>sandbox app</title><h1>hello from the sandbox</h1>\n")
  index:close()
  local state = cb._state

  H.test("a server in a buffer's kernel: the port is announced, not exposed; :CellboxPreview exposes it", function()
    H.eq("notify", cb.config.previews, "the default")
    local buf = H.buffer("server.py", "python", server_code(8000))
    H.check(cb.connect(), "connect")
    local ex = H.done(cb.run_file(buf), 30000)
    H.eq("ok", ex.status, vim.inspect(ex.result))
    H.wait(function()
      return notified_match("a server listens on port 8000") ~= nil
    end, 30000, "port 8000 announced; notified: " .. vim.inspect(notified))
    H.check(
      vim.tbl_contains(notified, "cellbox: a server listens on port 8000 — :CellboxPreview 8000 to preview it"),
      vim.inspect(notified)
    )
    local ws = state.workspace.workspaceId
    H.eq({ 8000 }, require("cellbox.preview").ports(ws))
    H.eq({}, sent_of(methods.WorkspaceExposePort), "notify exposes nothing")
    H.eq({}, require("cellbox.preview").list(ws), "no preview")
    H.eq({}, asked, "notify asks nothing")

    vim.cmd("CellboxPreview")
    H.eq({ { workspaceId = ws, port = 8000, protocol = "http" } }, sent_of(methods.WorkspaceExposePort), "the only listening port")
    local url = notified_match("port 8000 of the sandbox: (%S+)")
    H.check(url, "the URL printed; notified: " .. vim.inspect(notified))
    -- The preview's own name (a site of its own); curl resolves .localhost names as browsers do.
    local p = require("cellbox.preview").list(ws)[1]
    H.check(url:match("^http://pv%-%x+%.localhost:%d+/%?cellbox%-preview="), url)
    H.eq(p.browserUrl, url)
    H.eq(p.previewId .. ".localhost", url:match("^http://([^:/]+)"))
    H.check(p.url:match("^http://127%.0%.0%.1:%d+/%?cellbox%-preview="), p.url)
    H.eq({}, asked, "one listening port: nothing to pick")
    local code, body = get(url)
    H.eq(200, code, body)
    H.check(body:find("hello from the sandbox", 1, true), body)
  end)

  H.test(":CellboxPreview of the same port answers the same preview; :CellboxPreviews lists it", function()
    local ws = state.workspace.workspaceId
    local first = require("cellbox.preview").list(ws)
    H.eq(1, #first)
    local p = cb.preview(8000)
    H.eq(first[1].previewId, p.previewId)
    H.eq(first[1].url, p.url)
    H.eq("port 8000 of the sandbox: " .. p.browserUrl, notified[#notified]:gsub("^cellbox: ", ""), "the URL printed")
    vim.cmd("CellboxPreview! 8000")
    H.eq({ p.browserUrl }, opened, "! opens it with the browser option")
    local lines = cb.previews()
    H.eq({ string.format("%5d  %s", 8000, p.browserUrl) }, lines)
    H.check(notified[#notified]:find("ports of the sandbox:\n", 1, true), notified[#notified])
    -- Nothing listens on 8009: previewed anyway, answering 502 until a server does.
    local later = cb.preview(8009)
    H.eq(8009, later.port)
    H.eq(502, (get(later.url)))
    lines = cb.previews()
    H.eq(string.format("%5d  %s  (not listening)", 8009, later.browserUrl), lines[2])
  end)

  H.test('previews = "ask": vim.ui.select offers a new port; Open exposes and opens it; a dismissed port stays quiet', function()
    cb.config.previews = "ask"
    local buf = H.buffer("server2.py", "python", server_code(8001))
    H.done(cb.run_file(buf), 30000)
    H.wait(function()
      return #asked == 1
    end, 30000, "the offer of port 8001")
    H.eq({ "Preview (show the URL)", "Open in the browser" }, asked[1].items)
    H.eq("cellbox: a server listens on port 8001 in the sandbox", asked[1].prompt)
    local n = #opened
    pending_choice("Open in the browser")
    H.wait(function()
      return #opened > n
    end, 10000, "the browser opened")
    H.check(opened[#opened]:match("^http://.+/%?cellbox%-preview="), opened[#opened])
    H.eq(8001, sent_of(methods.WorkspaceExposePort)[#sent_of(methods.WorkspaceExposePort)].port)

    local exposes = #sent_of(methods.WorkspaceExposePort)
    buf = H.buffer("server3.py", "python", server_code(8002))
    H.done(cb.run_file(buf), 30000)
    H.wait(function()
      return #asked == 2
    end, 30000, "the offer of port 8002")
    pending_choice(nil)
    buf = H.buffer("server4.py", "python", server_code(8003))
    H.done(cb.run_file(buf), 30000)
    H.wait(function()
      return #asked == 3
    end, 30000, "the offer of port 8003")
    H.eq("cellbox: a server listens on port 8003 in the sandbox", asked[3].prompt, "8002, dismissed, is not asked about again")
    pending_choice(nil)
    H.eq(exposes, #sent_of(methods.WorkspaceExposePort), "a dismissed offer exposes nothing")
    H.check(not notified_match("a server listens on port 800[123] —"), "ask does not announce: " .. vim.inspect(notified))
    H.eq({ 8000, 8001, 8002, 8003 }, require("cellbox.preview").ports(state.workspace.workspaceId))
  end)

  H.test(":CellboxUnpreview ends one preview; :CellboxUnpreview! every one", function()
    local ws = state.workspace.workspaceId
    local list = require("cellbox.preview").list(ws)
    H.eq({ 8000, 8001, 8009 }, vim.tbl_map(function(p)
      return p.port
    end, list))
    vim.cmd("CellboxUnpreview 8000")
    H.eq({ { previewId = list[1].previewId } }, sent_of(methods.WorkspaceUnexposePort))
    H.eq({ 8001, 8009 }, vim.tbl_map(function(p)
      return p.port
    end, require("cellbox.preview").list(ws)))
    local code = get(list[1].url)
    H.check(code ~= 200, "the ended preview no longer serves the page: " .. tostring(code))
    vim.cmd("CellboxUnpreview!")
    H.eq({}, require("cellbox.preview").list(ws))
    H.eq(3, #sent_of(methods.WorkspaceUnexposePort))
    local lines = cb.previews()
    H.eq(string.format("%5d  listening, not previewed", 8000), lines[1])
  end)
  H.test(":CellboxPreview with several listening ports offers them with vim.ui.select", function()
    local ws = state.workspace.workspaceId
    cb.preview(8002)
    local n = #asked
    vim.cmd("CellboxPreview")
    H.eq(n + 1, #asked, "a pick")
    H.eq({ 8000, 8001, 8002, 8003 }, asked[#asked].items)
    H.eq("port 8000", asked[#asked].shown[1])
    H.check(asked[#asked].shown[3]:match("^port 8002  http://"), asked[#asked].shown[3])
    local exposes = #sent_of(methods.WorkspaceExposePort)
    pending_choice(8003)
    H.eq(exposes + 1, #sent_of(methods.WorkspaceExposePort))
    H.eq(8003, sent_of(methods.WorkspaceExposePort)[exposes + 1].port)
    H.check(notified_match("port 8003 of the sandbox: (%S+)"), vim.inspect(notified))
    H.eq({ 8002, 8003 }, vim.tbl_map(function(p)
      return p.port
    end, require("cellbox.preview").list(ws)))
  end)

  H.test('previews = "auto": a new port is previewed; past the daemon\'s 16 previews, one WARN', function()
    local ws = state.workspace.workspaceId
    cb.config.previews = "auto"
    local n = #notified
    local buf = H.buffer("server5.py", "python", server_code(8004))
    H.done(cb.run_file(buf), 30000)
    H.wait(function()
      return notified_match("port 8004 of the sandbox: (%S+)") ~= nil
    end, 30000, "port 8004 previewed; notified: " .. vim.inspect(notified_since(n)))
    H.check(notified_match("%(:CellboxPreview! 8004 opens it%)"), vim.inspect(notified))
    H.check(not notified_match("a server listens on port 8004"), "auto does not announce")
    -- 8002, 8003, 8004: 13 more make the 16 a workspace may have.
    for port = 9000, 9012 do
      H.check(cb.preview(port), "preview " .. port)
    end
    H.eq(16, #require("cellbox.preview").list(ws))
    n = #notified
    local exposes = #sent_of(methods.WorkspaceExposePort)
    buf = H.buffer("server6.py", "python", server_code(8005, 8006, 8007))
    H.done(cb.run_file(buf), 30000)
    H.wait(function()
      return #sent_of(methods.WorkspaceExposePort) >= exposes + 3
    end, 30000, "auto tries 8005, 8006 and 8007")
    H.wait(function()
      return #notified_since(n) >= 1
    end, 10000, "the warning")
    vim.wait(500)
    local since = notified_since(n)
    H.eq(1, #since, "one notification for three ports: " .. vim.inspect(since))
    H.eq(vim.log.levels.WARN, since[1].level, since[1].msg)
    H.check(since[1].msg:find(":CellboxUnpreview! ", 1, true), since[1].msg)
    H.check(since[1].msg:find("not previewed", 1, true), since[1].msg)

    -- Freed: the next port is previewed again (and a later limit warned about again).
    vim.cmd("CellboxUnpreview!")
    H.eq({}, require("cellbox.preview").list(ws))
    n = #notified
    buf = H.buffer("server7.py", "python", server_code(8008))
    H.done(cb.run_file(buf), 30000)
    H.wait(function()
      return notified_match("port 8008 of the sandbox: (%S+)") ~= nil
    end, 30000, "port 8008 previewed once previews are freed; notified: " .. vim.inspect(notified_since(n)))
    for _, m in ipairs(notified_since(n)) do
      H.check(m.level ~= vim.log.levels.ERROR, m.msg)
    end
  end)
end)
