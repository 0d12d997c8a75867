-- cellbox.nvim: run lines, selections and `# %%` cells in cellbox's sandboxed kernels, with the
-- output inline. See doc/cellbox.txt.
--
-- This module is the plugin's Lua API and its options; the features are in
--   session.lua    the connection to the daemon, the plugin's state, the workspace
--   kernels.lua    a buffer's kernel, :CellboxKernel, interrupt/restart/shutdown, status()
--   run.lua        running lines, selections, cells and files
--   output.lua     output under the code, diagnostics, the output float
--   complete.lua   omnifunc, complete() and inspect()
--   workspace.lua  reviewing the workspace: changes, diff, commit, discard, checkpoints, what
--                  each execution changed and undoing it, export to git or a patch, fork
--   terminal.lua   :CellboxTerminal
--   network.lua    the sandbox's network: blocked connections, :CellboxAllow, :CellboxNetwork
--   install.lua    :CellboxInstall
--   preview.lua    previews of servers in the sandbox: :CellboxPreview, :CellboxPreviews,
--                  :CellboxUnpreview, and what happens when a port starts listening
--   reattach.lua   a file's kernel across restarts of Neovim
--   ipynb.lua      .ipynb notebooks as `# %%` buffers
--   kitty.lua      images inline with the kitty graphics protocol
-- and the user commands and <Plug> mappings in plugin/cellbox.lua.
local session = require("cellbox.session")
local kernels = require("cellbox.kernels")
local run = require("cellbox.run")
local output = require("cellbox.output")
local complete = require("cellbox.complete")
local workspace = require("cellbox.workspace")
local terminal = require("cellbox.terminal")
local network = require("cellbox.network")
local install = require("cellbox.install")
local preview = require("cellbox.preview")
local util = require("cellbox.util")

local M = {}

M.version = "0.1.0"

local default_config = {
  -- The command that speaks the protocol on stdio. `cellbox connect` bridges to the user's
  -- long-lived daemon (kernels outlive Neovim); {"cellbox", "serve", "--stdio"} runs a private one.
  cmd = { "cellbox", "connect" },
  -- Remember each file's kernel (stdpath('data')/cellbox/kernels.json) and attach to it again
  -- when the file is opened after a restart of Neovim, if the daemon still runs it: true, false,
  -- or "auto": when cmd is `cellbox connect` (a private daemon's kernels end with Neovim).
  reattach = "auto",
  -- Extra environment for the job (e.g. { CELLBOX_STATE_DIR = "/tmp/x" }).
  env = nil,
  -- The project the workspace overlays: a path, a function returning one, or nil for the cwd.
  root = nil,
  -- Workspace mode for kernels: "overlay" (default), "scratch" or "direct"; false: every kernel
  -- gets a scratch workspace of its own (and the workspace commands are unavailable).
  workspace = "overlay",
  -- Filetype -> cellbox language. A filetype without an entry runs in an available language whose
  -- fileExtensions fit the buffer's file (or filetype): `r` buffers in the host's IRkernel,
  -- `jupyter:ir`.
  languages = { python = "python", javascript = "javascript", sh = "bash", bash = "bash" },
  -- One kernel per buffer (false), or one per language shared by every buffer (true).
  share_kernel = false,
  -- A line matching this Lua pattern starts a cell.
  cell_pattern = "^%s*[#/;%-]+%s*%%%%",
  -- Kernel options passed to kernel/start.
  sandbox = "required",
  -- The sandbox's network (PROTOCOL.md §9): mode "none" (every connection refused; you are asked
  -- whether to allow it), "allowlist" (only the rules in allow, and those you allow when asked)
  -- or "host" (the host's network, a sandbox of its own kind). allow: "host", "*.domain",
  -- "host:port", an IP or CIDR with an optional port. "Always allow" keeps a rule (and the mode
  -- allowlist) for the project in stdpath('data')/cellbox/network.json.
  network = { mode = "none", allow = {} },
  limits = nil,
  -- When a server starts listening on a port in the sandbox (PROTOCOL.md §11): "notify" says so
  -- ("a server listens on port 8000 — :CellboxPreview 8000 to preview it") and exposes nothing;
  -- "auto" previews every such port (workspace/exposePort: a loopback URL of its own; test suites'
  -- ephemeral ports too, up to the daemon's 16 previews per workspace) and shows the URL; "ask"
  -- asks first (vim.ui.select: preview, or open in the browser); false does nothing.
  -- :CellboxPreview previews a port in every mode.
  previews = "notify",
  -- How :CellboxPreview! opens a URL: a function(url), a command list the URL is appended to
  -- ({ "firefox", "--new-tab" }), or nil: vim.ui.open (Neovim 0.10), else xdg-open (open on macOS).
  browser = nil,
  -- Per-execution timeout in ms (nil: the kernel's default).
  timeout_ms = nil,
  -- How long omnifunc, complete() and :CellboxInspect wait for the kernel's answer (a first
  -- completion in a fresh python kernel loads its modules, slower on a busy machine).
  complete_timeout_ms = 5000,
  -- Take an automatic checkpoint before each run (overlay workspace), so that :CellboxUndo can
  -- restore the files to how they were before it; nothing is taken when nothing changed.
  checkpoint_runs = true,
  -- Say in a message which files a run changed (the line under its output says it anyway).
  notify_files_changed = true,
  -- Map ]d and [d (buffer-local) to vim.diagnostic.goto_next/goto_prev in a buffer that runs
  -- code, unless they are mapped already (Neovim 0.7.2 has no default for them; 0.10 does).
  diagnostic_keys = true,
  -- Virtual lines shown under the code that ran; more are in :CellboxOutput.
  virt_lines = 6,
  -- Where images (image/png, image/svg+xml) are saved; their path is shown under the output.
  image_dir = nil,
  -- PNG images inline, with the kitty graphics protocol: "auto" (in kitty: $TERM xterm-kitty or
  -- $KITTY_WINDOW_ID, not in tmux), "kitty" (always) or "path" (never; the path only).
  images = "auto",
  -- The screen rows an inline image takes under the output.
  image_rows = 10,
  float = { border = "rounded", max_width = 120, max_height = 30 },
}

M.config = vim.deepcopy(default_config)

M.ns = output.ns
M.diag_ns = output.diag_ns
M._state = session.state
M.err_text = session.err_text

function M.setup(opts)
  M.config = vim.tbl_deep_extend("force", vim.deepcopy(default_config), opts or {})
  if opts and opts.languages then
    M.config.languages = vim.tbl_extend("force", default_config.languages, opts.languages)
  end
  util.define_highlights()
  return M
end

-- The connection and the workspace.
M.connect = session.connect
M.disconnect = session.disconnect
M.stop = session.stop
M.root = session.root
M.workspace = session.workspace

-- Kernels.
M.language = kernels.language
M.kernel = kernels.kernel
M.select_kernel = kernels.select_kernel
M.interrupt = kernels.interrupt
M.restart = kernels.restart
M.shutdown = kernels.shutdown
M.status = kernels.status
M.variables = kernels.variables

-- Running code; M.last_exec is the execution started last.
M.run_range = run.run_range
M.run_line = run.run_line
M.run_selection = run.run_selection
M.run_visual = run.run_visual
M.cells = run.cells
M.run_cell = run.run_cell
M.run_cell_and_next = run.run_cell_and_next
M.run_cells_above = run.run_cells_above
M.run_file = run.run_file

-- Output.
M.clear = output.clear
M.exec_at = output.exec_at
M.show_output = output.show_output

-- Completion and inspection.
M.omnifunc = complete.omnifunc
M.complete = complete.complete
M.inspect = complete.inspect

-- Reviewing the workspace, and the terminal.
for _, name in ipairs({ "changes", "diff", "commit", "discard", "checkpoint", "checkpoints", "restore", "executions", "executions_qf", "undo", "export_git", "export_patch", "fork" }) do
  M[name] = workspace[name]
end
M.terminal = terminal.terminal

-- The network and packages.
M.allow = network.allow_cmd
M.set_network = network.set_cmd
M.install = install.install
M.resize_terminals = terminal.resize_terminals

-- Previews of the sandbox's servers.
M.preview = preview.preview
M.previews = preview.show
M.unpreview = preview.unpreview

return M
