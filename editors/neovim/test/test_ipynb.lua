-- Jupyter notebooks: a .ipynb written by nbformat opens as a `# %%` buffer (markdown commented
-- out, as Jupytext's percent format), a cell edited and run, :w writes nbformat 4.5 that
-- nbformat validates, with the run's output and the edit, and the other cells' ids, metadata
-- and outputs kept.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":h") .. "/helpers.lua")

-- Runs python3 code with argv[1] = arg; returns its stdout (fails the case on an error).
local function py(code, arg)
  local out = vim.fn.system({ "/usr/bin/python3", "-c", code, arg })
  H.check(vim.v.shell_error == 0, "python3 failed: " .. out)
  return out
end

local make_nb = [[
import sys, nbformat
from nbformat.v4 import new_notebook, new_markdown_cell, new_code_cell, new_output
nb = new_notebook(metadata={
    "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
    "language_info": {"name": "python"},
    "custom": {"url": "https://example.com/a/b"},
})
md = new_markdown_cell("# Title\n\nSome *text*, see https://example.com/x")
md.metadata["tags"] = ["intro"]
c1 = new_code_cell("x = 20\nprint('stored')", execution_count=1,
    outputs=[new_output("stream", name="stdout", text="stored\n")])
c1.metadata["custom"] = {"keep": True}
c2 = new_code_cell("print(x * 2 + 1)", execution_count=2,
    outputs=[new_output("stream", name="stdout", text="old\n")])
c3 = new_code_cell("y = 1", execution_count=3,
    outputs=[new_output("execute_result", data={"text/plain": "1", "image/png": "iVBORw0KGgo="}, execution_count=3)])
nb.cells = [md, c1, c2, c3]
nbformat.write(nb, sys.argv[1])
print(",".join(c.id for c in nb.cells))
]]

local read_nb = [[
import sys, json, nbformat
nb = nbformat.read(sys.argv[1], 4)
nbformat.validate(nb)
print(json.dumps({"minor": nb.nbformat_minor, "metadata": nb.metadata, "cells": [
    {"id": c.id, "type": c.cell_type, "source": c.source, "metadata": c.metadata,
     "count": c.get("execution_count"), "outputs": c.get("outputs")} for c in nb.cells]}))
]]

H.main(function()
  local cb = H.setup()
  local api = vim.api

  H.test("a notebook opens as # %% cells; edited, run and :w, it is a valid notebook with the output", function()
    local path = H.project .. "/nb.ipynb"
    local ids = vim.split(vim.trim(py(make_nb, path)), ",", { plain = true })
    H.eq(4, #ids)
    vim.cmd("edit " .. vim.fn.fnameescape(path))
    local buf = api.nvim_get_current_buf()
    H.eq({
      "# %% [markdown]",
      "# # Title",
      "#",
      "# Some *text*, see https://example.com/x",
      "",
      "# %%",
      "x = 20",
      "print('stored')",
      "",
      "# %%",
      "print(x * 2 + 1)",
      "",
      "# %%",
      "y = 1",
    }, api.nvim_buf_get_lines(buf, 0, -1, false))
    H.eq("python", vim.bo.filetype)
    H.eq(false, vim.bo.modified)
    -- The stored outputs under their cells.
    H.eq({ "  stored" }, H.mark_at(buf, 7).lines)
    H.eq("[1] saved in the notebook", H.mark_at(buf, 7).text)
    H.eq({ "  old" }, H.mark_at(buf, 10).lines)
    H.check(H.mark_at(buf, 13).lines[1]:find("^  %[image: .*%.png%]$"), vim.inspect(H.mark_at(buf, 13)))
    -- Edit the third cell and run it; add a cell at the end, not run.
    api.nvim_buf_set_lines(buf, 10, 11, false, { "print(20 * 2 + 2)" })
    local ex = H.done(cb.run_cell(buf, 11))
    H.eq("ok", ex.status)
    H.eq({ "  42" }, H.mark_at(buf, 10).lines, "the run's output replaces the stored one")
    api.nvim_buf_set_lines(buf, -1, -1, false, { "", "# %%", "z = 3" })
    H.eq(true, vim.bo.modified)
    vim.cmd("write")
    H.eq(false, vim.bo.modified)
    local nb = vim.json.decode(py(read_nb, path))
    H.eq(5, nb.minor)
    H.eq("https://example.com/a/b", nb.metadata.custom.url)
    H.eq("python3", nb.metadata.kernelspec.name)
    H.eq(5, #nb.cells)
    local md, c1, c2, c3, c4 = unpack(nb.cells)
    -- Unchanged cells: ids, metadata, outputs as they were.
    H.eq({ ids[1], "markdown", "# Title\n\nSome *text*, see https://example.com/x", { "intro" } }, { md.id, md.type, md.source, md.metadata.tags })
    H.eq({ ids[2], "x = 20\nprint('stored')", 1, true }, { c1.id, c1.source, c1.count, c1.metadata.custom.keep })
    H.eq({ { output_type = "stream", name = "stdout", text = "stored\n" } }, c1.outputs)
    H.eq({ ids[4], 3, "1", "iVBORw0KGgo=" }, { c3.id, c3.count, c3.outputs[1].data["text/plain"], c3.outputs[1].data["image/png"] })
    -- The edited cell that ran: its source and this run's output and count.
    H.eq(ids[3], c2.id)
    H.eq("print(20 * 2 + 2)", c2.source)
    H.eq({ { output_type = "stream", name = "stdout", text = "42\n" } }, c2.outputs)
    H.eq(ex.count, c2.count)
    -- The new cell: a fresh id, no output.
    H.eq("z = 3", c4.source)
    H.check(type(c4.id) == "string" and c4.id ~= "" and not vim.tbl_contains(ids, c4.id), vim.inspect(c4.id))
    H.eq({}, c4.outputs)
    H.eq(vim.NIL, c4.count)
    -- Written as Jupyter writes: sorted keys, one space of indent, "/" not escaped.
    local text = table.concat(vim.fn.readfile(path), "\n")
    H.check(text:find('\n "cells": [\n  {\n', 1, true), text:sub(1, 200))
    H.check(text:find("https://example.com/a/b", 1, true), "slashes escaped")
    -- Written again, the new cell keeps its id.
    vim.cmd("write")
    nb = vim.json.decode(py(read_nb, path))
    H.eq(c4.id, nb.cells[5].id)
  end)

  H.test("a notebook written unchanged is the same bytes as nbformat wrote", function()
    local path = H.project .. "/same.ipynb"
    py(make_nb, path)
    local before = vim.fn.readfile(path, "b")
    vim.cmd("edit " .. vim.fn.fnameescape(path))
    vim.cmd("write")
    H.eq(before, vim.fn.readfile(path, "b"))
  end)

  H.test(":w refuses a notebook changed on disk since it was read; :w! overwrites it", function()
    local path = H.project .. "/changed.ipynb"
    py(make_nb, path)
    vim.cmd("edit " .. vim.fn.fnameescape(path))
    -- Another program (JupyterLab, the browser IDE) writes the file meanwhile.
    local theirs = vim.fn.readfile(path, "b")
    theirs[#theirs + 1] = ""
    vim.fn.writefile(theirs, path, "b")
    local st = vim.loop.fs_stat(path)
    vim.loop.fs_utime(path, st.atime.sec, st.mtime.sec + 5)
    pcall(vim.cmd, "write")
    H.eq(theirs, vim.fn.readfile(path, "b"), "their version is kept")
    vim.cmd("write!")
    local ok, nb = pcall(vim.json.decode, table.concat(vim.fn.readfile(path, "b"), "\n"))
    H.check(ok and nb.nbformat == 4, "overwritten with the buffer's notebook")
    H.check(not vim.deep_equal(theirs, vim.fn.readfile(path, "b")), "ours now")
  end)

  H.test("deleting a cell and merging two: the cells that remain keep their ids", function()
    local path = H.project .. "/nb2.ipynb"
    local ids = vim.split(vim.trim(py(make_nb, path)), ",", { plain = true })
    vim.cmd("edit " .. vim.fn.fnameescape(path))
    local buf = api.nvim_get_current_buf()
    -- Delete the second cell (its # %% line to the blank line after it).
    api.nvim_buf_set_lines(buf, 5, 9, false, {})
    -- Merge the last cell into the one before it (delete its # %% line).
    H.eq("# %%", api.nvim_buf_get_lines(buf, 8, 9, false)[1])
    api.nvim_buf_set_lines(buf, 8, 9, false, {})
    vim.cmd("write")
    local nb = vim.json.decode(py(read_nb, path))
    H.eq({ ids[1], ids[3] }, { nb.cells[1].id, nb.cells[2].id })
    H.eq("print(x * 2 + 1)\n\ny = 1", nb.cells[2].source)
    H.eq({ { output_type = "stream", name = "stdout", text = "old\n" } }, nb.cells[2].outputs)
  end)

  H.test("a .ipynb that is not a notebook opens as text and is written back as it was", function()
    local path = H.project .. "/broken.ipynb"
    vim.fn.writefile({ "{ not json" }, path)
    local msgs = {}
    local orig = vim.notify
    vim.notify = function(m)
      table.insert(msgs, m)
    end
    vim.cmd("edit " .. vim.fn.fnameescape(path))
    vim.notify = orig
    H.eq({ "{ not json" }, api.nvim_buf_get_lines(0, 0, -1, false))
    H.check(msgs[1] and msgs[1]:find("broken.ipynb is not JSON", 1, true), vim.inspect(msgs))
    vim.cmd("write")
    H.eq({ "{ not json" }, vim.fn.readfile(path))
  end)
end)
