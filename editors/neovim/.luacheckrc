-- luacheck (Debian's lua-check) for the plugin and its tests; editors/lint.sh runs it.
-- Neovim runs the plugin on LuaJIT (Lua 5.1 with `bit`); `vim` is Neovim's API, whose fields
-- the plugin and the tests set (vim.g, vim.bo, a stubbed vim.ui.input).
std = "luajit"
globals = { "vim" }
-- Lines are as long as they read best here (no formatter wraps them).
max_line_length = false
