"""cellbox's kernelspecs under Jupyter's own kernel test suite.

jupyter_kernel_test (Debian's python3-jupyter-kernel-test) drives each
cellbox-LANGUAGE kernelspec through jupyter_client, as JupyterLab does, and
validates every message against the message spec. ProtocolChecks adds the
checks of runtimed's kernel test bed: heartbeat, parent headers, stdin,
interrupt and shutdown. Run by cmd/cellbox/jupyter_clients_e2e_test.go with
JUPYTER_DATA_DIR holding the kernelspecs `cellbox jupyter install` wrote.
"""

import os
import signal
import time
import unittest

import jupyter_kernel_test as jkt
from jupyter_client.manager import start_new_kernel

TIMEOUT = 60


class ProtocolChecks:
    code_input = ""  # reads a line and prints "got " + it
    code_sleep = ""  # prints sleep_marker, then runs for a minute unless interrupted
    sleep_marker = "started"
    code_flood = ""  # prints the numbers 0 to 99999, one a line
    code_stream = ""  # writes to stdout (default: code_hello_world)
    code_alive = ""  # runs and succeeds (default: code_hello_world)

    def collect(self, msg_id):
        """The iopub messages of msg_id, busy to idle."""
        out = []
        while True:
            msg = self.kc.get_iopub_msg(timeout=TIMEOUT)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            out.append(msg)
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                return out

    def test_heartbeat(self):
        self.assertTrue(self.kc.hb_channel.is_alive())
        deadline = time.monotonic() + TIMEOUT
        while not self.kc.hb_channel.is_beating():
            self.assertLess(time.monotonic(), deadline, "no heartbeat")
            time.sleep(0.05)

    def test_parent_headers(self):
        self.flush_channels()
        msg_id = self.kc.execute(self.code_stream or self.code_hello_world)
        reply = self.kc.get_shell_msg(timeout=TIMEOUT)
        self.assertEqual(reply["parent_header"]["msg_id"], msg_id)
        self.assertEqual(reply["parent_header"]["msg_type"], "execute_request")
        msgs = self.collect(msg_id)
        self.assertEqual(msgs[0]["msg_type"], "status")
        self.assertEqual(msgs[0]["content"]["execution_state"], "busy")
        types = [m["msg_type"] for m in msgs]
        self.assertIn("execute_input", types)
        self.assertIn("stream", types)
        for m in msgs:
            self.assertEqual(m["parent_header"]["session"], self.kc.session.session)

    def test_stdin(self):
        if not self.code_input:
            raise unittest.SkipTest("no input sample")
        self.flush_channels()
        msg_id = self.kc.execute(self.code_input, allow_stdin=True)
        req = self.kc.get_stdin_msg(timeout=TIMEOUT)
        self.assertEqual(req["msg_type"], "input_request")
        self.assertEqual(req["parent_header"]["msg_id"], msg_id)
        self.kc.input("cellbox")
        reply = self.kc.get_shell_msg(timeout=TIMEOUT)
        self.assertEqual(reply["content"]["status"], "ok")
        text = "".join(m["content"].get("text", "") for m in self.collect(msg_id) if m["msg_type"] == "stream")
        self.assertIn("got cellbox", text)

    def test_stdin_after_interrupted_input(self):
        """An input() interrupted while it waits leaves no stale request behind: the next
        cell's input() gets its reply."""
        if not self.code_input:
            raise unittest.SkipTest("no input sample")
        self.flush_channels()
        msg_id = self.kc.execute(self.code_input, allow_stdin=True)
        req = self.kc.get_stdin_msg(timeout=TIMEOUT)
        self.assertEqual(req["parent_header"]["msg_id"], msg_id)
        self.km.interrupt_kernel()
        reply = self.kc.get_shell_msg(timeout=TIMEOUT)
        self.assertEqual(reply["parent_header"]["msg_id"], msg_id)
        self.assertEqual(reply["content"]["status"], "error")
        self.collect(msg_id)
        self.test_stdin()

    def test_interrupt(self):
        """Jupyter's message interrupt mode: interrupt_request on control."""
        self.check_interrupt(self.km.interrupt_kernel)

    def test_interrupt_signal(self):
        """Jupyter's signal interrupt mode: SIGINT to the kernel's process group."""
        self.check_interrupt(lambda: self.km.signal_kernel(signal.SIGINT))

    def check_interrupt(self, interrupt):
        if not self.code_sleep:
            raise unittest.SkipTest("no sleep sample")
        self.flush_channels()
        started = time.monotonic()
        msg_id = self.kc.execute(self.code_sleep)
        while True:  # the code runs: its first line printed
            msg = self.kc.get_iopub_msg(timeout=TIMEOUT)
            if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "stream" \
                    and self.sleep_marker in msg["content"]["text"]:
                break
        interrupt()
        reply = self.kc.get_shell_msg(timeout=TIMEOUT)
        self.assertEqual(reply["parent_header"]["msg_id"], msg_id)
        self.assertEqual(reply["content"]["status"], "error")
        self.assertLess(time.monotonic() - started, 50, "the interrupt did not stop the code")
        errors = [m for m in self.collect(msg_id) if m["msg_type"] == "error"]
        self.assertEqual(len(errors), 1, "exactly one error message")
        # The kernel lives on.
        reply, out = self.execute_helper(self.code_alive or self.code_hello_world)
        self.assertEqual(reply["content"]["status"], "ok", reply["content"])

    def test_flood(self):
        """A 100,000-line print reaches the client whole, as a few large stream messages."""
        if not self.code_flood:
            raise unittest.SkipTest("the language does not print")
        self.flush_channels()
        msg_id = self.kc.execute(self.code_flood)
        reply = self.kc.get_shell_msg(timeout=TIMEOUT)
        self.assertEqual(reply["content"]["status"], "ok")
        streams = [m for m in self.collect(msg_id) if m["msg_type"] == "stream"]
        text = "".join(m["content"]["text"] for m in streams)
        self.assertEqual(text, "".join(f"{i}\n" for i in range(100000)))
        self.assertLess(len(streams), 100, f"{len(streams)} stream messages for 100,000 lines")

    def test_shutdown(self):
        km, kc = start_new_kernel(kernel_name=self.kernel_name)
        try:
            reply, _ = self.execute_helper_on(kc, self.code_alive or self.code_hello_world)
            self.assertEqual(reply["content"]["status"], "ok")
            msg_id = kc.shutdown()  # on the control channel
            reply = kc.get_control_msg(timeout=TIMEOUT)
            self.assertEqual(reply["msg_type"], "shutdown_reply")
            self.assertEqual(reply["parent_header"]["msg_id"], msg_id)
            deadline = time.monotonic() + TIMEOUT
            while km.is_alive():  # the kernel process exits by itself
                self.assertLess(time.monotonic(), deadline, "the kernel did not exit after shutdown_request")
                time.sleep(0.05)
        finally:
            kc.stop_channels()
            if km.is_alive():
                km.shutdown_kernel(now=True)

    def execute_helper_on(self, kc, code):
        msg_id = kc.execute(code)
        reply = kc.get_shell_msg(timeout=TIMEOUT)
        while True:
            msg = kc.get_iopub_msg(timeout=TIMEOUT)
            if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "status" \
                    and msg["content"]["execution_state"] == "idle":
                break
        return reply, msg_id


class CellboxPython(ProtocolChecks, jkt.KernelTests):
    kernel_name = "cellbox-python"
    language_name = "python"
    file_extension = ".py"
    code_hello_world = "print('hello, world')"
    code_stderr = "import sys; print('test', file=sys.stderr)"
    completion_samples = [{"text": "zi", "matches": {"zip"}}]
    complete_code_samples = ["1", "print('hello, world')", "def f(x):\n  return x*2\n\n"]
    incomplete_code_samples = ["print('''hello", "def f(x):\n  x*2"]
    invalid_code_samples = ["import = 7q"]
    code_page_something = "print?"
    code_generate_error = "raise ValueError('x')"
    code_execute_result = [{"code": "1+2+3", "result": "6"}, {"code": "[n*n for n in range(1, 4)]", "result": "[1, 4, 9]"}]
    code_display_data = [{"code": "from IPython.display import HTML, display; display(HTML('<b>test</b>'))", "mime": "text/html"}]
    code_history_pattern = "1?2*"
    supported_history_operations = ("tail", "search", "range")
    code_inspect_sample = "zip"
    code_clear_output = "from IPython.display import clear_output; clear_output()"
    code_input = "print('got ' + input('name? '))"
    code_sleep = "import time; print('started', flush=True); time.sleep(60)"
    code_flood = "for i in range(100000): print(i)"


class CellboxJavaScript(ProtocolChecks, jkt.KernelTests):
    kernel_name = "cellbox-javascript"
    language_name = "javascript"
    file_extension = ".js"
    code_hello_world = "console.log('hello, world')"
    code_stderr = "console.error('test')"
    completion_samples = [{"text": "Math.flo", "matches": {"floor"}}]  # members replace the name after the dot
    complete_code_samples = ["1", "console.log('hello, world')"]
    incomplete_code_samples = ["function f(x) {", "[1, 2,"]
    code_generate_error = "throw new Error('x')"
    code_execute_result = [{"code": "1+2+3", "result": "6"}, {"code": "'a' + 'b'", "result": "'ab'"}]
    code_display_data = [{"code": "display({'text/html': '<b>test</b>'})", "mime": "text/html"}]
    code_history_pattern = "1?2*"
    supported_history_operations = ("tail", "search", "range")
    code_inspect_sample = "Math"
    code_clear_output = "display.clear()"
    code_input = "console.log('got ' + await input('name? '))"
    code_sleep = "console.log('started'); await new Promise(r => setTimeout(r, 60000))"
    code_flood = "for (let i = 0; i < 100000; i++) console.log(i)"


class CellboxTypeScript(ProtocolChecks, jkt.KernelTests):
    kernel_name = "cellbox-typescript"
    language_name = "typescript"
    file_extension = ".ts"
    code_hello_world = "console.log('hello, world' as string)"
    code_stderr = "console.error('test')"
    completion_samples = [{"text": "Math.flo", "matches": {"floor"}}]  # members replace the name after the dot
    complete_code_samples = ["1", "const n: number = 1", "interface A {\n  a: number\n}"]
    incomplete_code_samples = ["function f(x: number) {", "interface A {"]
    invalid_code_samples = ["let x: = 1"]
    code_generate_error = "throw new Error('x' as string)"
    code_execute_result = [{"code": "1+2+3", "result": "6"}, {"code": "'a' + ('b' as string)", "result": "'ab'"}]
    code_display_data = [{"code": "display({'text/html': '<b>test</b>'})", "mime": "text/html"}]
    code_history_pattern = "1?2*"
    supported_history_operations = ("tail", "search", "range")
    code_inspect_sample = "Math"
    code_clear_output = "display.clear()"
    code_input = "const who: string = await input('name? ')\nconsole.log('got ' + who)"
    code_sleep = "console.log('started'); await new Promise<void>((r) => setTimeout(r, 60000))"
    code_flood = "for (let i: number = 0; i < 100000; i++) console.log(i)"


class CellboxGo(ProtocolChecks, jkt.KernelTests):
    kernel_name = "cellbox-go"
    language_name = "go"
    file_extension = ".go"
    code_hello_world = 'import "fmt"\nfmt.Println("hello, world")'
    code_stderr = 'import "os"\nos.Stderr.WriteString("test\\n")'
    completion_samples = [{"text": "pani", "matches": {"panic"}}]
    complete_code_samples = ["x := 1\n_ = x", "func f() {}"]
    incomplete_code_samples = ["func f() {", "x := []int{1,"]
    code_generate_error = 'panic("x")'
    code_execute_result = [{"code": "1+2+3", "result": "6"}, {"code": "6*7", "result": "42"}]
    code_history_pattern = "1?2*"
    supported_history_operations = ("tail", "search", "range")
    code_inspect_sample = "len"
    code_sleep = 'import "time"\nfmt.Println("started")\ntime.Sleep(time.Minute)'
    code_flood = "for i := 0; i < 100000; i++ {\n\tfmt.Println(i)\n}"

    @classmethod
    def setUpClass(cls):
        # The first cell of a go kernel may wait for the build cache's warm-up and says so on
        # stderr: run it before the tests that count a cell's messages.
        super().setUpClass()
        reply, _ = cls.execute_helper_on(cls, cls.kc, cls.code_hello_world)
        assert reply["content"]["status"] == "ok", reply["content"]


class CellboxBash(ProtocolChecks, jkt.KernelTests):
    kernel_name = "cellbox-bash"
    language_name = "bash"
    file_extension = ".sh"
    code_hello_world = "echo 'hello, world'"
    code_stderr = "echo test >&2"
    completion_samples = [{"text": "ech", "matches": {"echo"}}]
    complete_code_samples = ["echo hi", "if true; then echo x; fi"]
    incomplete_code_samples = ["if true; then", "echo 'a"]
    code_generate_error = "false"
    code_execute_result = []  # bash leaves no values: its output is its streams
    code_inspect_sample = "echo"
    code_input = "read x; echo \"got $x\""
    code_sleep = "echo started; sleep 60"
    code_flood = "seq 0 99999"



class CellboxRuby(ProtocolChecks, jkt.KernelTests):
    kernel_name = "cellbox-ruby"
    language_name = "ruby"
    file_extension = ".rb"
    code_hello_world = "puts 'hello, world'"
    code_stderr = "$stderr.puts 'test'"
    completion_samples = [{"text": "Compar", "matches": {"Comparable"}}]
    complete_code_samples = ["1", "puts 'hello, world'", "def f(x)\n  x * 2\nend"]
    incomplete_code_samples = ["def f(x)", "[1, 2,"]
    code_generate_error = "raise 'x'"
    code_execute_result = [{"code": "1+2+3", "result": "6"}, {"code": "[1, 2].map { |n| n * n }", "result": "[1, 4]"}]
    code_history_pattern = "1?2*"
    supported_history_operations = ("tail", "search", "range")
    code_inspect_sample = "puts"
    code_input = "puts 'got ' + gets"
    code_sleep = "puts 'started'\nsleep 60"
    code_flood = "100000.times { |i| puts i }"


class CellboxR(ProtocolChecks, jkt.KernelTests):
    kernel_name = "cellbox-r"
    language_name = "r"
    file_extension = ".r"
    code_hello_world = "cat('hello, world\\n')"
    code_stderr = "message('test')"
    completion_samples = [{"text": "paste", "matches": {"paste", "paste0"}}]
    complete_code_samples = ["1", "print('hello, world')", "f <- function(x) {\n  x * 2\n}"]
    incomplete_code_samples = ["f <- function(x) {", "c(1, 2,"]
    code_generate_error = "stop('x')"
    code_execute_result = [{"code": "1+2+3", "result": "[1] 6"}]
    code_display_data = [{"code": "plot(1:3)", "mime": "image/png"}]
    code_history_pattern = "1?2*"
    supported_history_operations = ("tail", "search", "range")
    code_inspect_sample = "paste"
    code_input = "cat('got', readline('name? '), '\\n')"
    # Output shows as each top-level expression ends (as in IRkernel).
    code_sleep = "cat('started\\n')\nSys.sleep(60)"
    code_flood = "cat(paste0(0:99999, '\\n'), sep = '')"


class CellboxSQL(ProtocolChecks, jkt.KernelTests):
    kernel_name = "cellbox-sql"
    language_name = "sql"
    file_extension = ".sql"
    # SQL does not print: an INSERT's "N rows changed" is its stdout.
    code_stream = "CREATE TABLE IF NOT EXISTS hw(x); INSERT INTO hw VALUES ('hello');"
    code_alive = "SELECT 1;"
    completion_samples = [{"text": "SEL", "matches": {"SELECT"}}]
    complete_code_samples = ["SELECT 1;", "CREATE TABLE IF NOT EXISTS c(x);"]
    incomplete_code_samples = ["SELECT 1", "SELECT 'a;"]
    code_generate_error = "SELECT * FROM no_such_table;"
    code_execute_result = [{"code": "SELECT 6 AS n;", "result": "┌───┐\n│ n │\n├───┤\n│ 6 │\n└───┘\n1 row"}]
    code_sleep = ("CREATE TABLE IF NOT EXISTS s(x); INSERT INTO s VALUES (1);\n"
                  "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c) SELECT count(*) FROM c;")
    sleep_marker = "1 row"


if __name__ == "__main__":
    unittest.main(verbosity=2)
