-- Images: the path of the saved file where the terminal has no image protocol, and the kitty
-- graphics protocol's escape sequences where it has. No kitty terminal runs here (headless
-- Neovim has no terminal at all), so the kitty cases check the bytes the plugin would write:
-- as a unit, and from a real run with the writer replaced and images = "kitty" forced.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":h") .. "/helpers.lua")

-- A 1x1 PNG, and code whose result is it.
local png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
local code = {
  "import base64",
  "class P:",
  "    def _repr_png_(self): return base64.b64decode('" .. png .. "')",
  "print('before')",
  "P()",
}

H.main(function()
  local cb = H.setup()
  local kitty = require("cellbox.kitty")
  local api = vim.api
  local writes = {}
  kitty.write = function(s)
    table.insert(writes, s)
  end

  H.test("kitty: the escape sequences, byte for byte", function()
    H.eq({ "\27_Ga=t,f=100,t=d,i=7,q=2,m=1;abcd\27\\", "\27_Gm=1;efgh\27\\", "\27_Gm=0;ij\27\\" }, kitty.transmit_chunks(7, "abcdefghij", 4))
    H.eq("\27_Ga=t,f=100,t=d,i=7,q=2,m=1;abcd\27\\\27_Gm=1;efgh\27\\\27_Gm=0;ij\27\\", kitty.transmit(7, "abcdefghij", 4))
    H.eq("\27_Ga=t,f=100,t=d,i=1,q=2,m=0;" .. png .. "\27\\", kitty.transmit(1, png))
    H.eq("\0277\27[12;5H\27_Ga=p,i=7,p=1,r=10,C=1,q=2\27\\\0278", kitty.place(7, 12, 5, 10))
    H.eq("\27_Ga=d,d=i,i=7,q=2\27\\", kitty.delete(7))
    H.eq("\27_Ga=d,d=I,i=7,q=2\27\\", kitty.delete(7, true))
    -- 4096 bytes a chunk: 10000 bytes are three, only the last with m=0.
    local long = kitty.transmit(3, string.rep("A", 10000))
    local _, n = long:gsub("\27_G", "")
    H.eq(3, n)
    H.check(long:find("m=0;" .. string.rep("A", 10000 - 8192) .. "\27\\", 1, true), "last chunk")
  end)

  H.test("kitty: only base64 is sent; a stored output with escape sequences of its own is not", function()
    H.eq(png, kitty.png_of({ outputs = { { data = { ["image/png"] = png .. "\n" } } } }))
    -- ESC \\ would end the image and OSC 52 set the terminal's clipboard.
    local forged = "iVBORw0KGgo=\27\\\27]52;c;ZXZpbA==\7"
    H.eq(nil, kitty.png_of({ outputs = { { data = { ["image/png"] = forged } } } }))
  end)

  H.test("no image protocol: the image's path is shown and nothing is written to the terminal", function()
    -- "auto" in kitty's $TERM, but headless: there is no terminal to draw on.
    vim.env.TERM = "xterm-kitty"
    H.eq(false, kitty.enabled(cb.config))
    local buf = H.buffer("img.py", "python", code)
    local ex = H.done(cb.run_file(buf))
    H.eq("ok", ex.status)
    local lines = H.mark_at(buf, 4).lines
    H.eq("  before", lines[1])
    local path = lines[2]:match("^  %[image: (.-)%]$")
    H.check(path, vim.inspect(lines))
    H.eq(2, #lines)
    local f = assert(io.open(path, "rb"))
    H.eq("\137PNG", f:read("*a"):sub(1, 4))
    f:close()
    H.eq({}, writes)
  end)

  H.test("kitty: a run's PNG is sent, placed under its output, moved and deleted", function()
    cb.config.images = "kitty"
    cb.config.image_rows = 4
    local buf = H.buffer("kitty.py", "python", code)
    local ex = H.done(cb.run_file(buf))
    H.eq("ok", ex.status)
    -- The path line, then 4 blank lines the image covers.
    H.eq({ "  before", "  [image: " .. ex.outputs[2]._image .. "]", " ", " ", " ", " " }, H.mark_at(buf, 4).lines)
    H.wait(function()
      return #writes >= 2
    end, 5000, "the image placed")
    local id = ex.kitty.id
    H.eq(kitty.transmit(id, png), writes[1])
    -- Under the status line of line 5 and its two lines of output.
    local pos = vim.fn.screenpos(api.nvim_get_current_win(), 5, 1)
    H.check(pos.row > 0, "line 5 is on screen")
    H.eq(kitty.place(id, pos.row + 3, pos.col, 4), writes[2])
    -- Lines added above move it down.
    api.nvim_buf_set_lines(buf, 0, 0, false, { "# one", "# two" })
    vim.cmd("doautocmd TextChanged")
    H.wait(function()
      return #writes >= 3
    end, 5000, "the image moved")
    H.eq(kitty.place(id, pos.row + 5, pos.col, 4), writes[3])
    -- Pushed below the window: the placement is removed (the image kept for when it is back).
    api.nvim_buf_set_lines(buf, 0, 0, false, vim.split(string.rep("#\n", 40), "\n"))
    vim.cmd("doautocmd TextChanged")
    H.wait(function()
      return #writes >= 4
    end, 5000, "the image hidden")
    H.eq(kitty.delete(id), writes[4])
    api.nvim_buf_set_lines(buf, 0, 41, false, {})
    vim.cmd("doautocmd TextChanged")
    H.wait(function()
      return #writes >= 5
    end, 5000, "the image shown again")
    H.eq(kitty.place(id, pos.row + 5, pos.col, 4), writes[5])
    -- Running it again replaces the image: the old one is freed, the new one sent and placed.
    ex = H.done(cb.run_file(buf))
    H.eq(kitty.delete(id, true), writes[6])
    local id2 = ex.kitty.id
    H.check(id2 ~= id, "a new image id")
    H.eq(kitty.transmit(id2, png), writes[7])
    H.wait(function()
      return #writes >= 8
    end, 5000, "the new image placed")
    H.eq(kitty.place(id2, pos.row + 5, pos.col, 4), writes[8])
    -- Clearing the output deletes it.
    vim.cmd("CellboxClear")
    H.eq(kitty.delete(id2, true), writes[#writes])
    H.eq(nil, ex.kitty)
    cb.config.images = "auto"
  end)
end)
