# cellbox Ruby kernel driver, run by the kernel manager as `ruby -e SRC`.
#
# The contract with the manager is kernel/drivers/README.md: requests are JSON lines on fd 3, events
# JSON lines on fd 4, fds 1 and 2 are the user code's stdout and stderr, fd 0 is /dev/null.
#
# Threads: the main thread runs user code (in TOPLEVEL_BINDING, so locals, methods and classes
# persist), so that SIGINT's trap, which runs on it, can raise Interrupt there. One more thread
# reads requests: it hands executions to the main thread, answers complete/inspect/isComplete/
# variables itself (also while code runs), and flushes buffered output every 50 ms while code runs.
#
# Everything of the driver lives in the module CellboxDriver and defines no top-level local, so
# TOPLEVEL_BINDING holds the user's locals alone.
require "io/wait"
require "json"

module CellboxDriver
  F_DUPFD_CLOEXEC = 1030 # Linux

  # A close-on-exec copy of fd at a high number (lower if RLIMIT_NOFILE is small).
  def self.high_cloexec(fd)
    io = IO.for_fd(fd, autoclose: false)
    [200, 64, 10].each do |low|
      return io.fcntl(F_DUPFD_CLOEXEC, low)
    rescue SystemCallError
      next
    end
    io.dup.fileno # dup is close-on-exec in Ruby
  end

  REQ = IO.for_fd(high_cloexec(3), "rb")
  EVT = IO.for_fd(high_cloexec(4), "wb")
  IO.for_fd(3).close
  IO.for_fd(4).close
  EVT.sync = true
  PID = Process.pid
  EMIT_LOCK = Thread::Mutex.new
  EXEC_QUEUE = Thread::Queue.new
  INPUT_REPLIES = Thread::Queue.new
  CELL_LINES = {} # filename => lines of the code run there, for inspect's source
  KEYWORDS = %w[BEGIN END alias and begin break case class def defined? do else elsif end ensure false
                for if in module next nil not or redo rescue retry return self super then true undef
                unless until when while yield __FILE__ __LINE__ __method__].freeze
  SAFE = [Integer, Float, String, Symbol, NilClass, TrueClass, FalseClass, Rational, Complex].freeze
  UTF8 = Encoding::UTF_8

  @busy = false           # user code runs on the main thread: SIGINT raises Interrupt in it
  @received = 0           # executions received (reader thread)
  @finished = 0           # executions ended (main thread)
  @pending_interrupt = false # a SIGINT came for the execution in progress, outside user code
  @read_bytes = 0         # bytes of requests read so far
  @interrupt_before = 0   # an execute request starting before this offset came before a SIGINT
  @exec_id = nil
  @fed = +""              # the request's stdin, not read yet
  @allow_stdin = false
  @silent_runs = 0
  @tail = +""             # stdout since its last newline: the prompt of a read of stdin

  class << self
    attr_reader :busy
    attr_accessor :tail

    # ---------------------------------------------------------------------------------------------
    # Channel to the manager

    def flush_std
      [STDOUT, STDERR, $stdout, $stderr].uniq.each do |s|
        s.flush
      rescue StandardError
        nil # closed by the user, the manager gone...: never fatal
      end
    end

    # Text for an event: UTF-8, invalid bytes replaced.
    def utf8(s)
      s = s.to_s
      return s if s.encoding == UTF8 && s.valid_encoding?

      begin
        s.encode(UTF8)
      rescue EncodingError
        s.dup.force_encoding(UTF8).scrub
      end
    end

    # Writes one event. Execution events first flush stdout and stderr (README: Ordering): every
    # event of this driver is made once the code has stopped writing (result, error, input, done),
    # so they go without stdoutBytes and the manager delivers all that the pipes hold before them.
    def emit(event, flush: true)
      flush_std if flush
      data = JSON.generate(event) + "\n"
      # An Interrupt in the middle of the write would leave half an event on the pipe.
      Thread.handle_interrupt(Object => :never) do
        EMIT_LOCK.synchronize { EVT.write(data) }
      end
    rescue SystemCallError, IOError # the manager is gone
      exit!(0)
    end

    # ---------------------------------------------------------------------------------------------
    # Interrupts

    def on_sigint
      if @busy
        Thread.main.raise(Interrupt)
        return
      end
      # Not in user code. Idle: ignore it. But the manager may have sent an execute just before:
      # one still in the request pipe, or received and not started yet. The interrupt is for it.
      begin
        @interrupt_before = @read_bytes + REQ.nread
      rescue StandardError
        nil
      end
      @pending_interrupt = true if @received > @finished
    end

    def install_sigint
      trap("INT") { CellboxDriver.on_sigint }
    end

    # ---------------------------------------------------------------------------------------------
    # Standard input: the request's `stdin` string, then `input` events (allowStdin), then EOF.

    # The next line of standard input with its newline; nil at end of file.
    def read_line(password: false)
      if !@fed.empty? || !@allow_stdin
        return nil if @fed.empty?

        n = (@fed.index("\n") || (@fed.size - 1)) + 1
        line = @fed[0, n]
        @fed = @fed[n..] || +""
        return line
      end
      INPUT_REPLIES.pop until INPUT_REPLIES.empty? # answers to an interrupted read
      emit({ ev: "input", id: @exec_id, prompt: utf8(@tail), password: password })
      reply = INPUT_REPLIES.pop # an Interrupt ends this wait
      return nil if reply["eof"]

      value = utf8(reply["value"])
      $stdout.write(password ? "\n" : "#{value}\n") # the transcript reads well
      @fed = "#{value}\n"
      read_line
    end

    def stdin_gets(*args, chomp: false)
      sep = "\n"
      limit = nil
      args.each do |a|
        if a.nil? || a.is_a?(String)
          sep = a
        elsif a.is_a?(Integer)
          limit = a
        end
      end
      line = sep.nil? ? stdin_read : read_line
      return nil if line.nil? || (sep.nil? && line.empty?)

      if limit && limit >= 0 && line.size > limit
        @fed = line[limit..] + @fed
        line = line[0, limit]
      end
      chomp ? line.chomp : line
    end

    def stdin_read(length = nil)
      out = +""
      while length.nil? || out.bytesize < length
        line = read_line
        break if line.nil?

        out << line
      end
      if length && out.bytesize > length
        rest = out.byteslice(length..)
        out = out.byteslice(0, length)
        @fed = rest + @fed
      end
      length && length.positive? && out.empty? ? nil : out
    end

    def stdin_getpass(prompt = nil)
      $stdout.write(prompt.to_s) if prompt
      line = read_line(password: true)
      line&.chomp
    end

    # ---------------------------------------------------------------------------------------------
    # Results

    # The value as a MimeBundle: inspect, and the richer forms the object offers.
    def bundle(value)
      data = {}
      if value.respond_to?(:to_iruby)
        begin
          mime, content = value.to_iruby
          data[utf8(mime)] = utf8(content) if mime && content
        rescue StandardError => e
          report_repr_error(value, "to_iruby", e)
        end
      end
      { "text/html" => :to_html, "text/markdown" => :to_markdown, "image/svg+xml" => :to_svg }.each do |mime, m|
        next if data.key?(mime) || !value.respond_to?(m) || value.is_a?(String)

        begin
          content = value.public_send(m)
          data[mime] = utf8(content) if content.is_a?(String)
        rescue StandardError => e
          report_repr_error(value, m, e)
        end
      end
      data["text/plain"] = plain(value)
      data
    end

    def plain(value)
      utf8(value.inspect)
    rescue StandardError => e
      report_repr_error(value, "inspect", e)
      utf8(Kernel.instance_method(:to_s).bind_call(value))
    end

    def report_repr_error(value, what, err)
      STDERR.write("#{what} of #{Kernel.instance_method(:class).bind_call(value)} failed: #{err.class}: #{err.message}\n")
    rescue StandardError
      nil
    end

    # ---------------------------------------------------------------------------------------------
    # Execution

    # [filename, first line] for the code: the editor's file when `source` is given.
    def cell_file(req)
      src = req["source"]
      if src.is_a?(Hash) && src["path"].is_a?(String) && !src["path"].empty?
        return [src["path"], [src["line"].to_i, 1].max]
      end

      count = req["count"].to_i
      return ["<cell-#{count}>", 1] if count.positive?

      @silent_runs += 1
      ["<silent-#{@silent_runs}>", 1]
    end

    def remember(filename, code, first)
      lines = CELL_LINES[filename] || []
      code.split("\n", -1).each_with_index { |l, i| lines[first - 1 + i] = l }
      CELL_LINES[filename] = lines
    end

    def driver_frame?(line)
      line.start_with?("-e:")
    end

    # Ruby's own report of an error, without the driver's frames.
    def error_info(err)
      cls = Kernel.instance_method(:class).bind_call(err)
      ename = utf8(cls.name || cls.inspect)
      evalue = begin
        utf8(err.message)
      rescue StandardError
        "<exception message failed>"
      end
      frames = (err.backtrace || []).map { |f| utf8(f) }.reject { |f| driver_frame?(f) }
      first, *rest = evalue.split("\n")
      head = "#{first} (#{ename})"
      head = "#{frames.first}: #{head}" unless frames.empty?
      lines = [head, *rest, *(frames[1..] || []).map { |f| "\tfrom #{f}" }]
      lines = ["Interrupt"] if err.is_a?(Interrupt) && frames.empty?
      { ename: ename, evalue: evalue, traceback: lines }
    end

    def cpu_seconds
      t = Process.times
      t.utime + t.stime + t.cutime + t.cstime
    end

    def peak_memory
      File.foreach("/proc/self/status") do |l|
        return l.split[1].to_i * 1024 if l.start_with?("VmHWM:")
      end
      0
    rescue StandardError
      0
    end

    def run_cell(req)
      code = utf8(req["code"])
      filename, first = cell_file(req)
      remember(filename, code, first)
      value = nil
      err = nil
      Thread.handle_interrupt(Interrupt => :never) do
        @busy = true
        begin
          Thread.handle_interrupt(Interrupt => :immediate) do
            if @pending_interrupt
              @pending_interrupt = false
              raise Interrupt
            end
            value = TOPLEVEL_BINDING.eval(code, filename, first)
          end
        rescue Exception => e # rubocop:disable Lint/RescueException: the cell's error, whatever it is
          err = e
        ensure
          @busy = false
        end
      end
      # A SIGINT that came as the code ended is dropped here, not raised in the driver.
      begin
        Thread.handle_interrupt(Interrupt => :immediate) { nil }
      rescue Interrupt
        nil
      end
      [value, err, code]
    end

    def execute(req)
      @exec_id = req["id"]
      @pending_interrupt = true if req["_sigint"] # a SIGINT came after the request was sent
      @fed = utf8(req["stdin"]).dup
      @allow_stdin = req["allowStdin"] == true
      @tail = +""
      silent = req["silent"] == true
      cpu = cpu_seconds
      value, err, code = run_cell(req)
      raise err if err.is_a?(SystemExit) # `exit` ends the kernel, as it ends a program

      info = nil
      if err
        info = error_info(err)
        emit({ ev: "error", id: @exec_id, **info })
      elsif !silent && !value.nil? && !code.rstrip.end_with?(";")
        begin
          TOPLEVEL_BINDING.local_variable_set(:_, value)
          emit({ ev: "result", id: @exec_id, data: bundle(value), metadata: {} })
        rescue StandardError => e
          report_repr_error(value, "result", e)
        end
      end
      tidy
      done = { ev: "done", id: @exec_id, status: "ok", cpuMs: ((cpu_seconds - cpu) * 1000).round(3),
               peakMemoryBytes: peak_memory }
      if info
        done[:status] = err.is_a?(Interrupt) ? "interrupted" : "error"
        done[:error] = info
      end
      @finished += 1
      @pending_interrupt = false
      emit(done)
    end

    # Undoes what user code may have broken in the driver's machinery.
    def tidy
      install_sigint
    end

    def main_loop
      emit({ ev: "ready", version: RUBY_VERSION, pid: PID })
      loop do
        req = nil
        begin
          req = EXEC_QUEUE.pop # a SIGINT now runs on_sigint, which ignores it
          execute(req)
        rescue SystemExit
          flush_std
          raise
        rescue Exception => e # rubocop:disable Lint/RescueException: a driver bug or an ill-timed interrupt: keep going
          @busy = false
          next if req.nil?

          @finished = @received
          @pending_interrupt = false
          begin
            emit({ ev: "done", id: req["id"], status: "error",
                   error: { ename: e.class.name, evalue: utf8(e.message),
                            traceback: ["cellbox driver error: #{utf8(e.inspect)}"] } })
          rescue Exception # rubocop:disable Lint/RescueException
            nil
          end
        end
      end
    end

    # ---------------------------------------------------------------------------------------------
    # Requests answered while code runs

    def receiver
      TOPLEVEL_BINDING.receiver
    end

    # The object a name refers to (a local, @ivar, $global or Constant::Path), without calling
    # methods; raises NameError when there is none.
    def lookup(name)
      case name
      when /\A[a-z_]\w*\z/
        return TOPLEVEL_BINDING.local_variable_get(name) if TOPLEVEL_BINDING.local_variable_defined?(name)

        raise NameError, name
      when /\A@[A-Za-z_]\w*\z/
        raise NameError, name unless receiver.instance_variable_defined?(name)

        receiver.instance_variable_get(name)
      when /\A\$\w+\z/
        raise NameError, name unless global_variables.include?(name.to_sym)

        eval(name) # rubocop:disable Security/Eval: a global's name, checked above
      when /\A(?:::)?[A-Z]\w*(?:::[A-Z]\w*)*\z/
        name.sub(/\A::/, "").split("::").inject(Object) do |mod, c|
          raise NameError, name unless mod.is_a?(Module) && mod.const_defined?(c)

          mod.const_get(c)
        end
      when /\A(['"]).*\1\z/m then ""
      when /\A\d+\z/ then 0
      when /\A\d+\.\d+\z/ then 0.0
      when /\A:\w+\z/ then :s
      when /\A\[.*\]\z/m then []
      when /\A\{.*\}\z/m then {}
      else raise NameError, name
      end
    end

    def main_methods
      (receiver.methods + receiver.private_methods).map(&:to_s)
    end

    def complete(req)
      code = utf8(req["code"])
      pos = req["cursorPos"].to_i.clamp(0, code.size)
      before = code[0, pos]
      m = before.match(/((?:[@$]{0,2}\w+[?!]?|(['"])[^'"]*\2|\[[^\[\]]*\]|\{[^{}]*\})?(?:(?:\.|::)\w+[?!]?)*)(\.|::)(\w*)\z/)
      if m && !m[1].empty?
        prefix = m[4]
        names = []
        begin
          obj = lookup(m[1])
          if m[3] == "::"
            names = obj.is_a?(Module) ? obj.constants.map(&:to_s) + obj.singleton_methods.map(&:to_s) : []
          else
            names = obj.public_methods.map(&:to_s)
          end
        rescue StandardError, ScriptError
          names = []
        end
      else
        prefix = before[/[@$]{0,2}\w*\z/]
        names = if prefix.start_with?("@")
                  receiver.instance_variables.map(&:to_s)
                elsif prefix.start_with?("$")
                  global_variables.map(&:to_s)
                else
                  TOPLEVEL_BINDING.local_variables.map(&:to_s) + Object.constants.map(&:to_s) +
                    main_methods + KEYWORDS
                end
      end
      matches = names.uniq.select { |n| n.start_with?(prefix) }.sort
      { matches: matches, cursorStart: pos - prefix.size, cursorEnd: pos }
    end

    # The name under the cursor, else the callee of the innermost open call.
    def name_at(code, pos)
      left = code[0, pos][/(?:[@$]{0,2}\w+[?!]?(?:\.|::))*[@$]{0,2}\w*\z/] || ""
      right = code[pos..][/\A\w*[?!]?/] || ""
      name = (left + right).sub(/(?:\.|::)\z/, "")
      return name unless name.empty?

      depth = 0
      (pos - 1).downto(0) do |i|
        case code[i]
        when ")", "]", "}" then depth += 1
        when "(", "[", "{"
          return "" if depth.zero? && code[i] != "("
          return code[0, i].rstrip[/(?:[@$]{0,2}\w+[?!]?(?:\.|::))*\w+[?!]?\z/] || "" if depth.zero?

          depth -= 1
        end
      end
      ""
    end

    # [label, object] for a dotted name: its value, or the Method it names (never called).
    def resolve(name)
      parts = name.split(/(\.|::)/)
      head = parts.shift
      obj = begin
        lookup(head)
      rescue NameError
        raise NameError, name unless head.match?(/\A[a-z_]\w*[?!]?\z/) && main_methods.include?(head)

        receiver.method(head)
      end
      parts.each_slice(2) do |sep, part|
        raise NameError, name if obj.is_a?(Method) || part.nil?

        obj = if sep == "::" && part.match?(/\A[A-Z]/) && obj.is_a?(Module) && obj.const_defined?(part)
                obj.const_get(part)
              else
                obj.method(part)
              end
      end
      obj
    end

    def signature(meth)
      params = meth.parameters.map do |kind, n|
        n ||= "_"
        case kind
        when :req then n.to_s
        when :opt then "#{n} = …"
        when :rest then "*#{n}"
        when :keyreq then "#{n}:"
        when :key then "#{n}: …"
        when :keyrest then "**#{n}"
        when :block then "&#{n}"
        else n.to_s
        end
      end
      "#{meth.name}(#{params.join(', ')})"
    end

    def source_of(meth)
      file, line = meth.source_location
      return nil unless file && line

      lines = CELL_LINES[file]
      if lines.nil?
        return nil unless File.file?(file) && File.size(file) < (1 << 22)

        lines = File.readlines(file, chomp: true)
      end
      first = lines[line - 1] or return nil
      indent = first[/\A\s*/]
      out = [first]
      lines[line..].to_a.each do |l|
        break if first.match?(/\bdef\b.*=/) || first.match?(/\bend\s*\z/)

        out << l.to_s
        break if l.to_s.start_with?("#{indent}end") || l.to_s.match?(/\A#{indent}\}/)
      end
      out.join("\n")
    end

    def info_text(obj, detail)
      lines = []
      if obj.is_a?(Method) || obj.is_a?(UnboundMethod)
        lines << "Signature: #{signature(obj)}"
        lines << "Owner:     #{obj.owner}"
        file, line = obj.source_location
        lines << "Defined:   #{file}:#{line}" if file
        if detail >= 1 && (src = source_of(obj))
          lines << "Source:\n#{src}"
        end
      else
        cls = Kernel.instance_method(:class).bind_call(obj)
        lines << "Class:     #{cls}"
        lines << "Value:     #{truncate(busy && !SAFE.include?(cls) ? "#<#{cls}>" : plain(obj), 2000)}"
        if obj.is_a?(Module)
          lines << "Ancestors: #{obj.ancestors.take(12).map(&:to_s).join(', ')}"
          if detail >= 1
            own = obj.is_a?(Class) ? obj.public_instance_methods(false) : obj.instance_methods(false)
            lines << "Methods:   #{own.sort.join(', ')}" unless own.empty?
          end
        end
        lines << "Size:      #{obj.size}" if obj.is_a?(String) || obj.is_a?(Array) || obj.is_a?(Hash)
      end
      lines.map { |l| utf8(l) }.join("\n")
    end

    def truncate(s, n)
      s.size > n ? "#{s[0, n]}…" : s
    end

    def inspect_request(req)
      code = utf8(req["code"])
      pos = req["cursorPos"].to_i.clamp(0, code.size)
      name = name_at(code, pos)
      return { found: false } if name.empty?

      obj = begin
        resolve(name)
      rescue StandardError, ScriptError
        return { found: false }
      end
      { found: true, data: { "text/plain" => info_text(obj, req["detailLevel"].to_i) } }
    end

    INCOMPLETE = /unexpected end-of-input|meets end of file|anywhere before EOF|unexpected end-of-file/.freeze

    def is_complete(req) # rubocop:disable Naming/PredicateName: the request's name
      code = utf8(req["code"])
      return { status: "complete" } if code.strip.empty?

      verbose = $VERBOSE
      begin
        $VERBOSE = nil
        RubyVM::InstructionSequence.compile(code, "<input>")
      rescue SyntaxError => e
        first = e.message.lines.find { |l| l.match?(/\A<input>:\d+: /) } || e.message
        return { status: "invalid" } unless first.match?(INCOMPLETE)

        last = code.lines.reverse.find { |l| !l.strip.empty? } || ""
        return { status: "incomplete", indent: "#{last[/\A[ \t]*/]}  " }
      rescue StandardError
        return { status: "invalid" }
      ensure
        $VERBOSE = verbose
      end
      { status: "complete" }
    end

    # The user's locals and the top level's @ivars. While code runs, only values of built-in
    # scalar types are inspected (a user #inspect must not run on this thread meanwhile).
    def variables(_req)
      out = []
      pairs = TOPLEVEL_BINDING.local_variables.reject { |n| n == :_ }.sort.map do |n|
        [n.to_s, TOPLEVEL_BINDING.local_variable_get(n)]
      end
      pairs += receiver.instance_variables.sort.map { |n| [n.to_s, receiver.instance_variable_get(n)] }
      pairs.each do |name, value|
        cls = Kernel.instance_method(:class).bind_call(value)
        entry = { name: name, type: utf8(cls.name || cls.inspect) }
        entry[:summary] = if busy && !SAFE.include?(cls)
                            "#<#{entry[:type]}>"
                          else
                            truncate(plain(value), 120)
                          end
        entry[:size] = value.size if [String, Array, Hash].include?(cls)
        out << entry
      end
      { variables: out }
    end

    QUERIES = { "complete" => :complete, "inspect" => :inspect_request, "isComplete" => :is_complete,
                "variables" => :variables }.freeze

    def answer(req)
      event = begin
        { ev: "reply", id: req["id"], result: send(QUERIES[req["op"]], req) }
      rescue StandardError, ScriptError => e
        { ev: "reply", id: req["id"], error: utf8("#{e.class}: #{e.message}") }
      end
      begin
        emit(event, flush: false)
      rescue StandardError # e.g. a value JSON cannot take: still answer
        emit({ ev: "reply", id: req["id"], error: "internal error" }, flush: false)
      end
    end

    def handle(line, offset)
      req = JSON.parse(line)
      return unless req.is_a?(Hash)

      op = req["op"]
      case op
      when "execute"
        @received += 1 # before reading @interrupt_before: see on_sigint
        req["_sigint"] = true if offset < @interrupt_before
        EXEC_QUEUE.push(req)
      when "input"
        INPUT_REPLIES.push(req) if req["id"] == @exec_id
      else
        if QUERIES.key?(op)
          answer(req)
        elsif req.key?("id")
          emit({ ev: "reply", id: req["id"], error: "unknown op #{utf8(op.inspect)}" }, flush: false)
        end
      end
    rescue JSON::ParserError
      nil # not a request: nothing to answer
    end

    def reader_loop
      buf = "".b
      offset = 0 # of buf[0] in the request stream
      flushed = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      loop do
        # While an execution is in flight (or user threads may print), wake up to flush.
        printing = @received > @finished || Thread.list.size > 2
        chunk = nil
        if REQ.wait_readable(printing ? 0.05 : nil)
          begin
            chunk = REQ.read_nonblock(1 << 16)
            @read_bytes += chunk.bytesize
          rescue IO::WaitReadable
            chunk = nil
          rescue EOFError, IOError, SystemCallError # the manager closed the request pipe: exit 0
            flush_std
            exit!(0)
          end
        end
        now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        if printing && now - flushed >= 0.05
          flush_std
          flushed = now
        end
        next if chunk.nil?

        start = buf.bytesize
        buf << chunk
        next unless buf.index("\n", start)

        *lines, rest = buf.split("\n", -1)
        buf = rest
        lines.each do |l|
          unless l.strip.empty?
            begin
              handle(l.force_encoding(UTF8), offset)
            rescue StandardError
              nil
            end
          end
          offset += l.bytesize + 1
        end
      end
    end

    def start
      install_sigint
      STDIN.singleton_class.prepend(StdinHooks)
      STDOUT.singleton_class.prepend(StdoutTail)
      Kernel.prepend(KernelStdin)
      Encoding.default_external = UTF8 if Encoding.default_external == Encoding::US_ASCII
      $0 = "cellbox-ruby"
      Thread.new do
        Thread.current.report_on_exception = false
        reader_loop
      rescue Exception => e # rubocop:disable Lint/RescueException: without its reader the driver is dead
        STDERR.write("cellbox driver: the request reader failed: #{e.full_message(highlight: false)}")
        STDERR.flush
        exit!(70)
      end
      main_loop
    end
  end

  # Reads of STDIN (and $stdin, while it is STDIN) go through the driver.
  module StdinHooks
    def gets(*args, chomp: false)
      CellboxDriver.stdin_gets(*args, chomp: chomp)
    end

    def readline(*args, chomp: false)
      CellboxDriver.stdin_gets(*args, chomp: chomp) or raise EOFError, "end of file reached"
    end

    def readlines(*args, chomp: false)
      out = []
      while (l = CellboxDriver.stdin_gets(*args, chomp: chomp))
        out << l
      end
      out
    end

    def each_line(*args, chomp: false)
      return enum_for(:each_line, *args, chomp: chomp) unless block_given?

      while (l = CellboxDriver.stdin_gets(*args, chomp: chomp))
        yield l
      end
      self
    end

    def read(length = nil, outbuf = nil)
      s = CellboxDriver.stdin_read(length)
      outbuf&.replace(s || "")
      s
    end

    def getc
      CellboxDriver.stdin_read(1)
    end

    def getpass(prompt = nil)
      CellboxDriver.stdin_getpass(prompt)
    end

    def eof?
      false
    end

    def isatty
      false
    end

    alias tty? isatty
  end

  # STDOUT keeps the text since its last newline, which a read of stdin shows as its prompt
  # (`print "name? "; gets`).
  module StdoutTail
    def write(*args)
      n = super
      s = args.last
      if s.is_a?(String)
        i = s.rindex("\n")
        t = i ? s[(i + 1)..] : CellboxDriver.tail + s
        CellboxDriver.tail = t.size > 200 ? t[-200..] : t
      end
      n
    end
  end

  # Kernel#gets and friends read $stdin (ARGF would read fd 0 itself).
  module KernelStdin
    private

    def gets(*args, **kw)
      $stdin.gets(*args, **kw)
    end

    def readline(*args, **kw)
      $stdin.readline(*args, **kw)
    end

    def readlines(*args, **kw)
      $stdin.readlines(*args, **kw)
    end
  end
end

CellboxDriver.start
