-- cellbox.nvim: commands, <Plug> mappings and autocommands. No key is mapped by default
-- (see :h cellbox-mappings); require('cellbox').setup{} sets options.
if vim.g.loaded_cellbox then
  return
end
vim.g.loaded_cellbox = 1

local function cb()
  return require("cellbox")
end

local cmd = vim.api.nvim_create_user_command

cmd("CellboxRunLine", function(o)
  cb().run_line(0, o.line1)
end, { range = true, desc = "cellbox: run the line" })
cmd("CellboxRunSelection", function(o)
  cb().run_selection(o.line1, o.line2)
end, { range = true, desc = "cellbox: run the lines of the range" })
cmd("CellboxRunCell", function()
  cb().run_cell()
end, { desc = "cellbox: run the # %% cell under the cursor" })
cmd("CellboxRunCellNext", function()
  cb().run_cell_and_next()
end, { desc = "cellbox: run the cell and move to the next" })
cmd("CellboxRunCellsAbove", function()
  cb().run_cells_above()
end, { desc = "cellbox: run every cell above the cursor's" })
cmd("CellboxRunFile", function()
  cb().run_file()
end, { desc = "cellbox: run the whole buffer" })
cmd("CellboxOutput", function()
  cb().show_output()
end, { desc = "cellbox: the full output in a float" })
cmd("CellboxClear", function(o)
  if o.range > 0 then
    cb().clear(0, o.line1 - 1, o.line2 - 1)
  else
    cb().clear(0)
  end
end, { range = true, desc = "cellbox: clear output" })
cmd("CellboxKernel", function(o)
  cb().select_kernel(o.args)
end, {
  nargs = "?",
  complete = function(arglead)
    return require("cellbox.kernels").complete_kernel(arglead)
  end,
  desc = "cellbox: pick, share or start this buffer's kernel",
})
cmd("CellboxInterrupt", function()
  cb().interrupt()
end, {})
cmd("CellboxRestart", function()
  cb().restart()
end, {})
cmd("CellboxShutdown", function()
  cb().shutdown()
end, {})
cmd("CellboxInspect", function()
  cb().inspect()
end, {})
cmd("CellboxVariables", function()
  cb().variables()
end, { desc = "cellbox: the variables of this buffer's kernel" })
cmd("CellboxChanges", function(o)
  cb().changes(true, o.bang)
end, { bang = true, desc = "cellbox: the workspace's changes in the quickfix list (!: with ignored paths)" })
cmd("CellboxExecutions", function()
  cb().executions_qf()
end, { desc = "cellbox: the recent executions and the files each changed, in the quickfix list" })
cmd("CellboxUndo", function(o)
  cb().undo(o.args)
end, { nargs = "?", desc = "cellbox: restore the workspace to before an execution" })
cmd("CellboxExportGit", function(o)
  cb().export_git(o.args)
end, { nargs = "?", desc = "cellbox: export the workspace's changes to a git branch" })
cmd("CellboxExportPatch", function()
  cb().export_patch()
end, { desc = "cellbox: the workspace's changes as a patch, in a scratch buffer" })
cmd("CellboxFork", function(o)
  cb().fork(o.args, o.bang)
end, { nargs = "?", bang = true, desc = "cellbox: fork the workspace (!: and use the fork)" })
cmd("CellboxDiff", function(o)
  cb().diff(o.args)
end, { nargs = "?", complete = "file" })
cmd("CellboxCommit", function(o)
  cb().commit(o.args)
end, { nargs = "?", complete = "file" })
cmd("CellboxDiscard", function(o)
  cb().discard(o.args)
end, { nargs = "?", complete = "file" })
cmd("CellboxCheckpoint", function(o)
  cb().checkpoint(o.args)
end, { nargs = "?" })
cmd("CellboxRestore", function(o)
  cb().restore(o.args)
end, { nargs = "?" })
cmd("CellboxTerminal", function(o)
  cb().terminal(o.fargs)
end, { nargs = "*" })
cmd("CellboxAllow", function(o)
  require("cellbox.network").allow_cmd(o.args)
end, { nargs = "?", desc = "cellbox: allow a host in the sandbox's network (no argument: list the rules)" })
cmd("CellboxNetwork", function(o)
  require("cellbox.network").set_cmd(o.args)
end, {
  nargs = 1,
  complete = function()
    return { "none", "allowlist" }
  end,
  desc = "cellbox: the sandbox's network, none or allowlist",
})
cmd("CellboxInstall", function(o)
  require("cellbox.install").command(o.fargs)
end, {
  nargs = "+",
  complete = function(_, line)
    if #vim.split(line, "%s+") <= 2 then
      return { "pip", "npm" }
    end
    return {}
  end,
  desc = "cellbox: install packages into the workspace's environment (pip or npm)",
})
cmd("CellboxPreview", function(o)
  require("cellbox.preview").preview(o.args ~= "" and o.args or nil, o.bang)
end, {
  nargs = "?",
  bang = true,
  complete = function()
    return require("cellbox.preview").complete()
  end,
  desc = "cellbox: preview a port of the sandbox and show its URL (no port: pick a listening one; !: open it in the browser)",
})
cmd("CellboxPreviews", function()
  require("cellbox.preview").show()
end, { desc = "cellbox: the ports servers listen on in the sandbox, and the previews" })
cmd("CellboxUnpreview", function(o)
  require("cellbox.preview").unpreview(o.args, o.bang)
end, {
  nargs = "?",
  bang = true,
  complete = function()
    return require("cellbox.preview").complete()
  end,
  desc = "cellbox: stop the preview of a port (!: every preview)",
})

local map = vim.api.nvim_set_keymap
local o = { noremap = true, silent = true }
map("n", "<Plug>(CellboxRunLine)", "<cmd>CellboxRunLine<cr>", o)
map("x", "<Plug>(CellboxRunVisual)", ":<C-u>lua require('cellbox').run_visual()<cr>", o)
map("n", "<Plug>(CellboxRunCell)", "<cmd>CellboxRunCell<cr>", o)
map("n", "<Plug>(CellboxRunCellNext)", "<cmd>CellboxRunCellNext<cr>", o)
map("n", "<Plug>(CellboxRunCellsAbove)", "<cmd>CellboxRunCellsAbove<cr>", o)
map("n", "<Plug>(CellboxRunFile)", "<cmd>CellboxRunFile<cr>", o)
map("n", "<Plug>(CellboxOutput)", "<cmd>CellboxOutput<cr>", o)
map("n", "<Plug>(CellboxInterrupt)", "<cmd>CellboxInterrupt<cr>", o)
map("n", "<Plug>(CellboxInspect)", "<cmd>CellboxInspect<cr>", o)

local group = vim.api.nvim_create_augroup("cellbox", { clear = true })
vim.api.nvim_create_autocmd("VimResized", {
  group = group,
  callback = function()
    if package.loaded["cellbox"] then
      require("cellbox").resize_terminals()
    end
  end,
})
-- A file that ran in a kernel of the `cellbox connect` daemon before Neovim restarted attaches
-- to it again (:h cellbox-reattach).
vim.api.nvim_create_autocmd("BufReadPost", {
  group = group,
  callback = function(ev)
    -- Nothing is loaded for files while no kernel was ever remembered.
    if vim.loop.fs_stat(vim.fn.stdpath("data") .. "/cellbox/kernels.json") then
      require("cellbox.reattach").on_read(ev.buf)
    end
  end,
})
-- Jupyter notebooks open as `# %%` buffers and are written back as nbformat 4.5 (:h cellbox-ipynb).
vim.api.nvim_create_autocmd("BufReadCmd", {
  group = group,
  pattern = "*.ipynb",
  callback = function(ev)
    require("cellbox.ipynb").read(ev.buf, vim.fn.fnamemodify(ev.match, ":p"))
  end,
})
vim.api.nvim_create_autocmd("BufWriteCmd", {
  group = group,
  pattern = "*.ipynb",
  callback = function(ev)
    require("cellbox.ipynb").write(ev.buf, vim.fn.fnamemodify(ev.match, ":p"))
  end,
})
vim.api.nvim_create_autocmd("VimLeavePre", {
  group = group,
  callback = function()
    if package.loaded["cellbox"] then
      require("cellbox").stop()
    end
  end,
})
