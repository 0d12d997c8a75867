-- `cellbox connect`: the plugin's default command bridges to a long-lived daemon, so a kernel
-- outlives the connection and :CellboxKernel attaches to it again.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":h") .. "/helpers.lua")

H.main(function()
  local cb = H.setup({ cmd = { H.bin, "connect" } })

  H.test("connect: run, disconnect, reattach the same kernel", function()
    local buf = H.buffer("c.py", "python", { "v = 6 * 7", "print(v)" })
    H.eq("ok", H.done(cb.run_line(buf, 1)).status)
    local kid = cb.kernel(buf, false)
    cb.disconnect()
    H.eq(nil, cb.kernel(buf, false))
    -- Reconnect; pick the old kernel in the :CellboxKernel picker.
    local orig = vim.ui.select
    local listed = {}
    vim.ui.select = function(items, _, on_choice)
      local pick
      for _, it in ipairs(items) do
        table.insert(listed, it.kernelId)
        if it.kernelId == kid then
          pick = it
        end
      end
      on_choice(pick)
    end
    vim.cmd("CellboxKernel")
    vim.ui.select = orig
    H.check(vim.tbl_contains(listed, kid), kid .. " not in " .. vim.inspect(listed))
    H.check(vim.tbl_contains(listed, "new"))
    H.eq(kid, cb.kernel(buf, false))
    local ex = H.done(cb.run_line(buf, 2))
    H.eq({ "  42" }, H.mark_at(buf, 1).lines, "state kept in the daemon")
    H.eq("ok", ex.status)
    vim.cmd("CellboxShutdown")
  end)
end)
