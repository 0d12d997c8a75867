"""Real notebooks executed by nbclient on each cellbox kernelspec.

Usage: notebooks.py DIR. For each cellbox-LANGUAGE kernelspec, a notebook in
DIR is executed by nbclient (as papermill and CI pipelines run notebooks):
its outputs are checked, the executed notebook is saved next to it, and its
code writes LANGUAGE-out.txt into the workspace. A second notebook whose
second cell fails must raise CellExecutionError with the error's name, after
the first cell's output. Prints one "ok LANGUAGE" line per kernelspec.
"""

import os
import sys

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

CELLS = {
    "python": (
        ["print('hello from ' + 'python')",
         "open('python-out.txt', 'w').write('written by python\\n')",
         "6 * 7",
         "from IPython.display import HTML, display\ndisplay(HTML('<b>bold</b>'))"],
        "raise ValueError('boom')", "ValueError"),
    "javascript": (
        ["console.log('hello from ' + 'javascript')",
         "require('fs').writeFileSync('javascript-out.txt', 'written by javascript\\n')",
         "6 * 7",
         "display({'text/html': '<b>bold</b>'})"],
        "throw new TypeError('boom')", "TypeError"),
    "bash": (
        ["echo hello from bash",
         "echo written by bash > bash-out.txt",
         "echo $((6 * 7))",
         "echo done"],
        "ls /no/such/dir", ""),
}


def outputs(cell):
    text, data = "", {}
    for o in cell.outputs:
        if o.output_type == "stream":
            text += o.text
        elif o.output_type in ("execute_result", "display_data"):
            data.update(o.data)
    return text, data


def run(lang, d):
    good, bad, ename = CELLS[lang]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in good]
    NotebookClient(nb, kernel_name="cellbox-" + lang, timeout=120, resources={"metadata": {"path": d}}).execute()
    nbformat.validate(nb)
    nbformat.write(nb, os.path.join(d, lang + ".ipynb"))
    text, _ = outputs(nb.cells[0])
    assert "hello from " + lang in text, (lang, nb.cells[0].outputs)
    text, data = outputs(nb.cells[2])
    assert "42" in text or "42" in data.get("text/plain", ""), (lang, nb.cells[2].outputs)
    assert nb.cells[2].execution_count == 3, nb.cells[2].execution_count
    if lang != "bash":
        _, data = outputs(nb.cells[3])
        assert data.get("text/html") == "<b>bold</b>", (lang, nb.cells[3].outputs)
    assert nb.metadata.get("language_info", {}).get("name") == lang, nb.metadata

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(good[0]), nbformat.v4.new_code_cell(bad), nbformat.v4.new_code_cell(good[0])]
    try:
        NotebookClient(nb, kernel_name="cellbox-" + lang, timeout=120, resources={"metadata": {"path": d}}).execute()
    except CellExecutionError as e:
        assert ename in str(e), (lang, str(e))
    else:
        raise AssertionError(lang + ": a failing cell did not raise CellExecutionError")
    assert "hello from" in outputs(nb.cells[0])[0]
    errors = [o for o in nb.cells[1].outputs if o.output_type == "error"]
    assert len(errors) == 1, (lang, nb.cells[1].outputs)
    assert not nb.cells[2].outputs, "a cell after the error ran"
    print("ok", lang, flush=True)


if __name__ == "__main__":
    for lang in sys.argv[2:] or CELLS:
        run(lang, sys.argv[1])
