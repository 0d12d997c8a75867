# cellbox R kernel driver, run by the kernel manager as
#   Rscript -e 'eval(parse(text = commandArgs(TRUE)[[1L]], keep.source = FALSE), new.env(parent = baseenv()))' SRC
# (SRC is this file: an argument, as Rscript's -e folds long expressions into its command line).
#
# The contract with the manager is kernel/drivers/README.md: requests are JSON lines on fd 3, events
# JSON lines on fd 4, fds 1 and 2 are the user code's stdout and stderr, fd 0 is /dev/null.
#
# R has one thread: the driver reads a request, runs it, answers, reads the next. Cells run with
# `evaluate` as IRkernel runs them: each top-level expression's output, messages, warnings and plots
# come as it ends (not live within one expression), values through `repr`. complete, inspect,
# isComplete and variables that arrive while a cell runs are answered after it (or while it waits
# for input). SIGINT raises R's interrupt condition in the running code.
#
# R has no dup(2) nor close-on-exec: the driver reopens fds 3 and 4 through /proc/self/fd and closes
# 3 and 4 (parallel's closeFD); the reopened ones stay inheritable by programs the code starts.
# Everything of the driver lives in this environment, whose parent is base: the user's names in
# globalenv cannot shadow what the driver calls.

REQ <- file("/proc/self/fd/3", open = "r", encoding = "UTF-8", raw = TRUE)
EVT <- file("/proc/self/fd/4", open = "w", encoding = "UTF-8", raw = TRUE)
OUT <- file("/proc/self/fd/1", open = "w", encoding = "UTF-8", raw = TRUE)
ERR <- file("/proc/self/fd/2", open = "w", encoding = "UTF-8", raw = TRUE)
parallel:::closeFD(3:4)
st <- new.env(parent = emptyenv())
st$exec_id <- NULL
st$fed <- character(0) # lines of the request's stdin, not read yet
st$allow <- FALSE
st$pending <- NULL # the last visible value, shown as the result if nothing follows it
st$silent_runs <- 0L
st$trace <- NULL # the calls of the last error, as it was raised
st$files <- character(0) # file names of code run (cells and `source` paths)
st$queued <- list() # requests read while waiting for input, for after the execution
DRIVER <- environment()

json <- function(x) jsonlite::toJSON(x, auto_unbox = TRUE, null = "null", na = "null", digits = NA, force = TRUE)

emit <- function(ev) {
  line <- paste0(json(ev), "\n")
  tryCatch({
    writeLines(line, EVT, sep = "")
    flush(EVT)
  }, error = function(e) quit(save = "no", status = 0))
}

out_write <- function(text, con = OUT) {
  if (length(text) == 0L || !nzchar(paste(text, collapse = ""))) return(invisible())
  flush_pending()
  tryCatch({
    writeLines(enc2utf8(paste(text, collapse = "")), con, sep = "")
    flush(con)
  }, error = function(e) NULL)
}

named <- function() structure(list(), names = character(0))

# ---------------------------------------------------------------------------------------------
# Results

has_method <- function(generic, value) {
  for (cl in class(value)) {
    if (!is.null(utils::getS3method(generic, cl, optional = TRUE))) return(TRUE)
  }
  FALSE
}

bundle <- function(value) {
  data <- named()
  text <- tryCatch(paste(repr::repr_text(value), collapse = "\n"), error = function(e) NULL)
  if (is.null(text)) text <- paste(utils::capture.output(print(value)), collapse = "\n")
  data[["text/plain"]] <- enc2utf8(text)
  tabular <- is.data.frame(value) || is.matrix(value)
  for (m in list(c("text/html", "repr_html"), c("text/markdown", "repr_markdown"), c("text/latex", "repr_latex"))) {
    if (!tabular && !has_method(m[[2]], value)) next
    r <- tryCatch(getExportedValue("repr", m[[2]])(value), error = function(e) NULL)
    if (is.character(r) && length(r) > 0L) data[[m[[1]]]] <- enc2utf8(paste(r, collapse = "\n"))
  }
  data
}

flush_pending <- function() {
  p <- st$pending
  if (is.null(p)) return(invisible())
  st$pending <- NULL
  emit(list(ev = "display", id = st$exec_id, data = p, metadata = named()))
}

on_value <- function(value) {
  flush_pending()
  st$pending <- tryCatch(bundle(value), error = function(e) {
    out_write(paste0("printing the value failed: ", conditionMessage(e), "\n"), ERR)
    NULL
  })
  invisible()
}

on_plot <- function(plot) {
  flush_pending()
  png <- tryCatch(repr::repr_png(plot), error = function(e) NULL)
  if (is.null(png)) return(invisible())
  emit(list(ev = "display", id = st$exec_id,
            data = list(`image/png` = gsub("\n", "", jsonlite::base64_enc(png), fixed = TRUE), `text/plain` = "plot without title"),
            metadata = named()))
  invisible()
}

call_text <- function(call) paste(deparse(call, nlines = 1L, width.cutoff = 80L), collapse = "")

on_message <- function(m) out_write(conditionMessage(m), ERR)

on_warning <- function(w) {
  call <- conditionCall(w)
  top <- is.null(call) || (is.call(call) && identical(call[[1L]], quote(eval)))
  where <- if (top) "" else paste0("In ", call_text(call), " : ")
  out_write(paste0("Warning message:\n", where, conditionMessage(w), "\n"), ERR)
}

# The user's frames of the error's calls: those whose srcref is in code the driver ran.
user_frames <- function(calls) {
  lines <- character(0)
  for (call in calls) {
    sr <- attr(call, "srcref")
    if (is.null(sr)) next
    file <- attr(sr, "srcfile")$filename
    if (is.null(file) || !(file %in% st$files)) next
    lines <- c(lines, paste0(file, ":", sr[[1L]], ": ", call_text(call)))
  }
  lines
}

# evaluate gives each line or top-level expression of the code in turn: this keeps their lines.
on_source <- function(src) {
  text <- paste(src$src, collapse = "")
  st$cur_line <- st$next_line
  st$cur_src <- text
  st$next_line <- st$next_line + lengths(regmatches(text, gregexpr("\n", text, fixed = TRUE)))
  invisible()
}

on_error <- function(e) {
  flush_pending()
  call <- conditionCall(e)
  msg <- conditionMessage(e)
  parse_error <- is.call(call) && identical(call[[1L]], quote(parse))
  head <- if (is.null(call) || parse_error) paste0("Error: ", msg) else paste0("Error in ", call_text(call), " : ", msg)
  trace <- character(0)
  if (!parse_error && !is.null(st$trace)) {
    first <- strsplit(trimws(st$cur_src), "\n", fixed = TRUE)[[1L]]
    trace <- c(paste0(st$cur_file, ":", st$cur_line, ": ", if (length(first)) first[[1L]] else ""), user_frames(st$trace))
  }
  st$error <- list(ename = class(e)[[1L]], evalue = enc2utf8(msg), traceback = I(enc2utf8(c(head, trace))))
  st$trace <- NULL
}

capture_calls <- function(e) {
  st$trace <- sys.calls()
}

handler <- evaluate::new_output_handler(
  source = on_source, text = function(o) out_write(o),
  graphics = on_plot, message = on_message, warning = on_warning, error = on_error, value = on_value,
  calling_handlers = list(error = capture_calls))

# ---------------------------------------------------------------------------------------------
# Standard input: the request's `stdin`, then `input` events (allowStdin), then end of file.

read_line <- function(prompt = "") {
  if (length(st$fed) > 0L) {
    line <- st$fed[[1L]]
    st$fed <- st$fed[-1L]
    out_write(paste0(prompt, line, "\n"))
    return(line)
  }
  if (!st$allow) {
    out_write(if (nzchar(prompt)) paste0(prompt, "\n") else "")
    return(NULL)
  }
  tryCatch(evaluate::flush_console(), error = function(e) NULL)
  flush_pending()
  emit(list(ev = "input", id = st$exec_id, prompt = enc2utf8(prompt), password = FALSE))
  # A SIGINT comes as R's interrupt once the read returns (an answer came): it then ends the cell.
  interrupted <- FALSE
  repeat {
    req <- withCallingHandlers(next_request(), interrupt = function(i) {
      interrupted <<- TRUE
      invokeRestart("resume")
    })
    if (is.null(req)) quit(save = "no", status = 0)
    if (interrupted) signalCondition(structure(list(message = "", call = NULL), class = c("interrupt", "condition")))
    if (identical(req$op, "input")) {
      if (!identical(req$id, st$exec_id)) next
      if (isTRUE(req$eof)) return(NULL)
      value <- if (is.null(req$value)) "" else req$value
      out_write(paste0(prompt, value, "\n"))
      return(value)
    }
    if (req$op %in% names(QUERIES)) answer(req) else st$queued[[length(st$queued) + 1L]] <- req
  }
}

user_readline <- function(prompt = "") {
  line <- read_line(prompt)
  if (is.null(line)) "" else line
}

is_stdin <- function(con) {
  (is.character(con) && identical(con, "stdin")) ||
    (inherits(con, "connection") && identical(summary(con)$description, "stdin"))
}

base_readLines <- base::readLines

user_readLines <- function(con = stdin(), n = -1L, ok = TRUE, warn = TRUE, encoding = "unknown", skipNul = FALSE) {
  if (!is_stdin(con)) {
    return(base_readLines(con, n = n, ok = ok, warn = warn, encoding = encoding, skipNul = skipNul))
  }
  out <- character(0)
  while (n < 0L || length(out) < n) {
    line <- read_line("")
    if (is.null(line)) break
    out <- c(out, line)
  }
  out
}

replace_base <- function(name, value) {
  env <- baseenv()
  unlockBinding(name, env)
  assign(name, value, envir = env)
  lockBinding(name, env)
}

# ---------------------------------------------------------------------------------------------
# Execution

cell_file <- function(req) {
  src <- req$source
  if (is.list(src) && is.character(src$path) && nzchar(src$path)) {
    return(list(src$path, max(1L, as.integer(if (is.null(src$line)) 1L else src$line))))
  }
  count <- if (is.null(req$count)) 0L else as.integer(req$count)
  if (count > 0L) return(list(sprintf("<cell-%d>", count), 1L))
  st$silent_runs <- st$silent_runs + 1L
  list(sprintf("<silent-%d>", st$silent_runs), 1L)
}

cpu_seconds <- function() {
  t <- proc.time()
  sum(t[c(1L, 2L, 4L, 5L)], na.rm = TRUE)
}

peak_memory <- function() {
  l <- tryCatch(base_readLines("/proc/self/status"), error = function(e) character(0))
  l <- grep("^VmHWM:", l, value = TRUE)
  if (length(l) == 0L) return(0)
  as.numeric(strsplit(trimws(sub("^VmHWM:", "", l[[1L]])), " +")[[1L]][[1L]]) * 1024
}

execute <- function(req) {
  st$exec_id <- req$id
  st$fed <- character(0)
  if (is.character(req$stdin) && nzchar(req$stdin)) {
    st$fed <- strsplit(req$stdin, "\n", fixed = TRUE)[[1L]]
  }
  st$allow <- isTRUE(req$allowStdin)
  st$pending <- NULL
  st$error <- NULL
  st$trace <- NULL
  silent <- isTRUE(req$silent)
  code <- if (is.character(req$code)) req$code else ""
  where <- cell_file(req)
  st$files <- unique(c(st$files, where[[1L]]))
  text <- paste0(strrep("\n", where[[2L]] - 1L), code) # line numbers as in the editor's file
  st$cur_file <- where[[1L]]
  st$next_line <- 1L
  st$cur_line <- 1L
  st$cur_src <- ""
  cpu <- cpu_seconds()
  status <- if (isTRUE(st$early_interrupt)) "interrupted" else tryCatch({
    evaluate::evaluate(text, envir = globalenv(), stop_on_error = 1L, output_handler = handler,
                       filename = where[[1L]], new_device = TRUE)
    "ok"
  }, interrupt = function(i) "interrupted", error = function(e) {
    on_error(e)
    "error"
  })
  if (status == "interrupted") {
    st$pending <- NULL
    st$error <- list(ename = "interrupt", evalue = "", traceback = I("Interrupted"))
    emit(list(ev = "error", id = st$exec_id, ename = "interrupt", evalue = "", traceback = I("Interrupted")))
  } else if (!is.null(st$error)) {
    status <- "error"
    st$pending <- NULL
    emit(c(list(ev = "error", id = st$exec_id), st$error))
  } else if (!is.null(st$pending)) {
    p <- st$pending
    st$pending <- NULL
    if (!silent && !grepl(";[[:space:]]*$", code)) {
      emit(list(ev = "result", id = st$exec_id, data = p, metadata = named()))
    }
  }
  done <- list(ev = "done", id = st$exec_id, status = status,
               cpuMs = round((cpu_seconds() - cpu) * 1000, 3), peakMemoryBytes = peak_memory())
  if (status != "ok") done$error <- st$error
  st$done_id <- req$id
  emit(done)
}

# ---------------------------------------------------------------------------------------------
# Requests answered between executions

complete <- function(req) {
  code <- if (is.character(req$code)) req$code else ""
  chars <- strsplit(code, "")[[1L]]
  pos <- max(0L, min(length(chars), as.integer(if (is.null(req$cursorPos)) 0L else req$cursorPos)))
  before <- paste(chars[seq_len(pos)], collapse = "")
  nl <- gregexpr("\n", before, fixed = TRUE)[[1L]]
  line_start <- if (nl[[1L]] > 0L) nl[[length(nl)]] else 0L # code points before the line
  line <- substring(before, line_start + 1L)
  utils:::.assignLinebuffer(line)
  utils:::.assignEnd(nchar(line))
  utils:::.guessTokenFromLine()
  utils:::.completeToken()
  matches <- utils:::.retrieveCompletions()
  start <- utils:::.CompletionEnv[["start"]]
  list(matches = I(enc2utf8(as.character(matches))), cursorStart = line_start + start, cursorEnd = pos)
}

name_at <- function(code, pos) {
  left <- regmatches(substr(code, 1L, pos), regexpr("[[:alnum:]._:$@]*$", substr(code, 1L, pos)))
  right <- regmatches(substring(code, pos + 1L), regexpr("^[[:alnum:]._]*", substring(code, pos + 1L)))
  name <- paste0(left, right)
  if (nzchar(name)) return(name)
  # the callee of the innermost open call
  chars <- strsplit(substr(code, 1L, pos), "")[[1L]]
  depth <- 0L
  for (i in rev(seq_along(chars))) {
    ch <- chars[[i]]
    if (ch %in% c(")", "]", "}")) depth <- depth + 1L
    if (ch %in% c("(", "[", "{")) {
      if (depth == 0L) {
        if (ch != "(") return("")
        before <- sub("[[:space:]]+$", "", paste(chars[seq_len(i - 1L)], collapse = ""))
        return(regmatches(before, regexpr("[[:alnum:]._:]*$", before)))
      }
      depth <- depth - 1L
    }
  }
  ""
}

help_text <- function(name) {
  parts <- strsplit(name, ":::?")[[1L]]
  topic <- parts[[length(parts)]]
  h <- if (length(parts) > 1L) utils::help((topic), package = (parts[[1L]])) else utils::help((topic))
  if (length(h) == 0L) return(NULL)
  rd <- utils:::.getHelpFile(h[[1L]])
  paste(utils::capture.output(tools::Rd2txt(rd, options = list(underline_titles = FALSE))), collapse = "\n")
}

inspect_request <- function(req) {
  code <- if (is.character(req$code)) req$code else ""
  pos <- as.integer(if (is.null(req$cursorPos)) nchar(code) else req$cursorPos)
  name <- name_at(code, pos)
  if (!nzchar(name)) return(list(found = FALSE))
  obj <- tryCatch(eval(parse(text = name, keep.source = FALSE)[[1L]], globalenv()), error = function(e) NULL)
  if (is.null(obj) && !exists(name, envir = globalenv())) return(list(found = FALSE))
  lines <- character(0)
  if (is.function(obj)) {
    sig <- utils::capture.output(print(args(obj)))
    sig <- sig[!grepl("^NULL$", sig)]
    lines <- c(lines, paste0("Signature: ", sub("^function ", name, paste(trimws(sig), collapse = " "))))
    if (!is.null(attr(obj, "srcref")) && as.integer(if (is.null(req$detailLevel)) 0L else req$detailLevel) >= 1L) {
      lines <- c(lines, "Source:", as.character(attr(obj, "srcref")))
    }
  } else {
    lines <- c(lines, paste0("Class: ", paste(class(obj), collapse = ", ")),
               utils::capture.output(utils::str(obj, max.level = 1L, list.len = 20L)))
  }
  if (!exists(name, envir = globalenv(), inherits = FALSE)) {
    help <- tryCatch(help_text(name), error = function(e) NULL)
    if (!is.null(help)) lines <- c(lines, "", help)
  }
  list(found = TRUE, data = list(`text/plain` = enc2utf8(paste(lines, collapse = "\n"))))
}

is_complete <- function(req) {
  code <- if (is.character(req$code)) req$code else ""
  if (!nzchar(trimws(code))) return(list(status = "complete"))
  msg <- tryCatch({
    parse(text = code, keep.source = FALSE)
    NULL
  }, error = function(e) conditionMessage(e))
  if (is.null(msg)) return(list(status = "complete"))
  if (grepl("unexpected end of input|INCOMPLETE_STRING|unexpected end of line", msg)) {
    return(list(status = "incomplete", indent = "  "))
  }
  list(status = "invalid")
}

variables <- function(req) {
  out <- list()
  for (name in sort(ls(globalenv()))) {
    value <- get(name, envir = globalenv())
    summary <- tryCatch(utils::capture.output(utils::str(value, max.level = 0L, give.attr = FALSE, vec.len = 3L))[[1L]],
                        error = function(e) paste0("<", class(value)[[1L]], ">"))
    summary <- trimws(summary)
    if (nchar(summary) > 120L) summary <- paste0(substr(summary, 1L, 120L), "...")
    out[[length(out) + 1L]] <- list(name = name, type = class(value)[[1L]], summary = enc2utf8(summary),
                                    size = length(value))
  }
  list(variables = I(out))
}

QUERIES <- list(complete = complete, inspect = inspect_request, isComplete = is_complete, variables = variables)

answer <- function(req) {
  ev <- tryCatch(list(ev = "reply", id = req$id, result = QUERIES[[req$op]](req)),
                 error = function(e) list(ev = "reply", id = req$id, error = enc2utf8(conditionMessage(e))))
  tryCatch(emit(ev), error = function(e) emit(list(ev = "reply", id = req$id, error = "internal error")))
}

# The next request, or NULL at the end of the request pipe.
next_request <- function() {
  repeat {
    line <- base_readLines(REQ, n = 1L, warn = FALSE, encoding = "UTF-8")
    if (length(line) == 0L) return(NULL)
    req <- tryCatch(jsonlite::fromJSON(line, simplifyVector = FALSE), error = function(e) NULL)
    if (is.list(req) && is.character(req$op)) return(req)
  }
}

handle <- function(req) {
  op <- req$op
  if (identical(op, "execute")) {
    execute(req)
  } else if (op %in% names(QUERIES)) {
    answer(req)
  } else if (!identical(op, "input") && !is.null(req$id)) {
    emit(list(ev = "reply", id = req$id, error = paste0("unknown op ", op)))
  }
}

main <- function() {
  replace_base("readline", user_readline)
  replace_base("readLines", user_readLines)
  options(device = function(...) grDevices::pdf(file = NULL, ...), repr.plot.width = 7, repr.plot.height = 5,
          repr.plot.res = 120, warn = 0, width = 80)
  loadNamespace("evaluate")
  loadNamespace("repr")
  emit(list(ev = "ready", version = paste(R.version$major, R.version$minor, sep = "."), pid = Sys.getpid()))
  repeat {
    req <- NULL
    if (length(st$queued) > 0L) {
      req <- st$queued[[1L]]
      st$queued <- st$queued[-1L]
    } else {
      # A SIGINT while idle comes as R's interrupt once the read returns: it is dropped.
      req <- withCallingHandlers(next_request(), interrupt = function(i) invokeRestart("resume"))
      if (is.null(req)) quit(save = "no", status = 0)
    }
    st$early_interrupt <- FALSE
    tryCatch(withCallingHandlers(handle(req), interrupt = function(i) {
      # Outside the code: between an execute request and its code the interrupt is for it;
      # once the code has ended it is dropped.
      st$early_interrupt <- TRUE
      invokeRestart("resume")
    }), error = function(e) {
      if (identical(req$op, "execute")) {
        emit(list(ev = "done", id = req$id, status = "error",
                  error = list(ename = class(e)[[1L]], evalue = enc2utf8(conditionMessage(e)),
                               traceback = I(paste0("cellbox driver error: ", conditionMessage(e))))))
      }
    })
  }
}

main()
