# cellbox R kernel driver, run by the kernel manager as
#   Rscript -e 'eval(parse(text = commandArgs(TRUE)[[1L]], keep.source = FALSE), new.env(parent = baseenv()))' SRC
# (SRC is this file: an argument, as Rscript's -e folds long expressions into its command line).
#
# The contract with the manager is kernel/drivers/README.md: requests are JSON lines on fd 3, events
# JSON lines on fd 4, fds 1 and 2 are the user code's stdout and stderr, fd 0 is /dev/null.
#
# R has one thread: the driver reads a request, runs it, answers, reads the next. A cell is parsed
# whole (with its source references, so errors and functions know their file and lines) and its
# top-level expressions run in turn, as R's own loop runs a script: R's stdout and stderr are not
# diverted, so cat, print, message and C code write to fds 1 and 2 as they go (R flushes each
# write). After each expression the driver shows its visible value through `repr` (a display; the
# last expression's value is the result) and the plot, if the graphics device has a new or changed
# one; warnings are printed as Rscript prints them. complete, inspect, isComplete and variables
# that arrive while a cell runs are answered after it (or while it waits for input). SIGINT raises
# R's interrupt condition in the running code.
#
# R has no dup(2) nor close-on-exec: the driver reopens fds 3 and 4 through /proc/self/fd and closes
# 3 and 4 (parallel's closeFD); the reopened ones stay inheritable by programs the code starts.
# Everything of the driver lives in this environment, whose parent is base: the user's names in
# globalenv cannot shadow what the driver calls.

REQ <- file("/proc/self/fd/3", open = "r", encoding = "UTF-8", raw = TRUE)
EVT <- file("/proc/self/fd/4", open = "w", encoding = "UTF-8", raw = TRUE)
parallel:::closeFD(3:4)
st <- new.env(parent = emptyenv())
st$exec_id <- NULL
st$fed <- character(0) # lines of the request's stdin, not read yet
st$allow <- FALSE
st$silent_runs <- 0L
st$trace <- NULL # the calls of the last error, as it was raised
st$files <- character(0) # file names of code run (cells and `source` paths)
st$queued <- list() # requests read while waiting for input, for after the execution
st$warnings <- list() # deferred warnings of the running top-level expression
st$devs <- integer(0) # graphics devices the driver opened (the cell's plots)
st$plot <- NULL # the last plot shown, and its display id
st$plot_id <- NULL
st$plots <- 0L
DRIVER <- environment()

json <- function(x) jsonlite::toJSON(x, auto_unbox = TRUE, null = "null", na = "null", digits = NA, force = TRUE)

# Every event comes after the output written before it: R writes each piece of output through at
# once, and the flushes cover a connection the code left buffered.
emit <- function(ev) {
  tryCatch({
    flush(stdout())
    flush(stderr())
  }, error = function(e) NULL)
  line <- paste0(json(ev), "\n")
  tryCatch({
    writeLines(line, EVT, sep = "")
    flush(EVT)
  }, error = function(e) quit(save = "no", status = 0))
}

say <- function(text, con = stdout()) {
  if (!nzchar(text)) return(invisible())
  tryCatch(cat(text, file = con, sep = ""), error = function(e) NULL)
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

# A visible value: a display, or the result when it is the cell's last expression's.
show_value <- function(value, last) {
  data <- tryCatch(suppressWarnings(bundle(value)), error = function(e) {
    say(paste0("printing the value failed: ", conditionMessage(e), "\n"), stderr())
    NULL
  })
  if (is.null(data)) return(invisible())
  if (last) {
    st$result <- data
  } else {
    emit(list(ev = "display", id = st$exec_id, data = data, metadata = named()))
  }
  invisible()
}

# ---------------------------------------------------------------------------------------------
# Plots: each cell draws on pdf(NULL) devices of its own that keep a display list (what
# options(device) opens). After each top-level expression, and before a new page replaces one,
# a new or changed plot is shown as image/png; a plot that only adds to the last one shown (a line
# on it) replaces that display.

open_device <- function(...) {
  grDevices::pdf(file = NULL, ...)
  grDevices::dev.control(displaylist = "enable")
  st$devs <- c(st$devs, grDevices::dev.cur())
  invisible()
}

close_devices <- function() {
  for (d in st$devs) if (d %in% grDevices::dev.list()) tryCatch(grDevices::dev.off(d), error = function(e) NULL)
  st$devs <- integer(0)
}

# The graphics calls of a recorded plot, as evaluate names them.
plot_calls <- function(plot) {
  unlist(lapply(plot[[1L]], function(x) {
    f <- x[[2L]][[1L]]
    if (!is.null(f[["name"]])) f[["name"]] else paste(deparse(f), collapse = "")
  }))
}

EMPTY_CALLS <- c("palette", "palette2", "C_layout", "C_par", "C_clip", "C_strWidth", "C_strHeight", "C_plot_window")

# Whether `new` is `old` and more calls.
builds_upon <- function(old, new) {
  if (is.null(old)) return(FALSE)
  o <- as.list(old[[1L]])
  n <- as.list(new[[1L]])
  length(n) >= length(o) && identical(o, n[seq_along(o)])
}

# Shows the device's plot if it is new or changed; `incomplete` also a page not filled yet. Before
# a new page (`new_page`), the plot shown is forgotten: what comes is a new display even if it
# draws the same.
show_plot <- function(incomplete = FALSE, new_page = FALSE) {
  tryCatch(suppressWarnings({
    show_plot1(incomplete)
    if (new_page && grDevices::dev.cur() %in% st$devs && graphics::par("page")) st$plot <- NULL
  }), error = function(e) NULL)
  invisible()
}

show_plot1 <- function(incomplete) {
  d <- grDevices::dev.cur()
  if (is.null(st$exec_id) || !(d %in% st$devs)) return(invisible())
  if (!incomplete && !graphics::par("page")) return(invisible())
  plot <- grDevices::recordPlot()
  calls <- plot_calls(plot)
  if (length(calls) == 0L || all(calls %in% EMPTY_CALLS)) return(invisible())
  last <- st$plot
  if (identical(last[[1L]], plot[[1L]])) return(invisible())
  update <- builds_upon(last, plot)
  if (update && all(calls[-seq_along(last[[1L]])] %in% EMPTY_CALLS)) return(invisible())
  png <- tryCatch(repr::repr_png(plot), error = function(e) NULL)
  if (d %in% grDevices::dev.list()) grDevices::dev.set(d)
  if (is.null(png)) return(invisible())
  if (!update) {
    st$plots <- st$plots + 1L
    st$plot_id <- sprintf("cellbox-r-plot-%s-%d", Sys.getpid(), st$plots)
  }
  st$plot <- plot
  ev <- list(ev = "display", id = st$exec_id,
             data = list(`image/png` = gsub("\n", "", jsonlite::base64_enc(png), fixed = TRUE), `text/plain` = "plot without title"),
             metadata = named(), displayId = st$plot_id)
  if (update) ev$update <- TRUE
  emit(ev)
  invisible()
}

# ---------------------------------------------------------------------------------------------
# Warnings and errors, as Rscript prints them

call_text <- function(call) paste(deparse(call, nlines = 1L, width.cutoff = 80L), collapse = "")

# The call R names for a condition of the code: none at the top level (the driver's eval).
TOP <- quote(eval(expr, globalenv()))
user_call <- function(call) if (is.null(call) || identical(call, TOP)) NULL else call

first_line <- function(msg) strsplit(msg, "\n", fixed = TRUE)[[1L]][1L]

# warn 1 prints a warning as it comes, 0 after the top-level expression, a negative warn drops
# it; 2 lets R turn it into an error.
on_warning <- function(w) {
  warn <- getOption("warn", 0)
  if (!is.numeric(warn) || length(warn) != 1L || is.na(warn) || warn >= 2) return()
  if (warn >= 1) {
    call <- user_call(conditionCall(w))
    msg <- conditionMessage(w)
    if (is.null(call)) {
      say(paste0("Warning: ", msg, "\n"), stderr())
    } else {
      dcall <- call_text(call)
      long <- nchar(dcall, "w") + nchar(first_line(msg), "w") + 18L > 75L
      say(paste0("Warning in ", dcall, " :", if (long) "\n " else "", " ", msg, "\n"), stderr())
    }
  } else if (warn >= 0 && length(st$warnings) < 50L) {
    st$warnings[[length(st$warnings) + 1L]] <- w
  }
  invokeRestart("muffleWarning")
}

print_warnings <- function() {
  ws <- st$warnings
  st$warnings <- list()
  n <- length(ws)
  if (n == 0L) return(invisible())
  if (n > 10L) {
    say(if (n >= 50L) "There were 50 or more warnings (use warnings() to see the first 50)\n"
        else sprintf("There were %d warnings (use warnings() to see them)\n", n), stderr())
    return(invisible())
  }
  text <- if (n == 1L) "Warning message:\n" else "Warning messages:\n"
  for (i in seq_len(n)) {
    call <- user_call(conditionCall(ws[[i]]))
    msg <- conditionMessage(ws[[i]])
    num <- if (n == 1L) "" else paste0(i, ": ")
    if (is.null(call)) {
      text <- paste0(text, num, msg, "\n")
    } else {
      dcall <- call_text(call)
      long <- nchar(dcall, "w") + nchar(first_line(msg), "w") + (if (n == 1L) 6L else 10L) > 75L
      text <- paste0(text, num, "In ", dcall, " :", if (long) "\n " else "", " ", msg, "\n")
    }
  }
  say(text, stderr())
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

on_error <- function(e, parse_error = FALSE) {
  call <- user_call(conditionCall(e))
  msg <- conditionMessage(e)
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

# ---------------------------------------------------------------------------------------------
# Standard input: the request's `stdin`, then `input` events (allowStdin), then end of file.

read_line <- function(prompt = "") {
  if (length(st$fed) > 0L) {
    line <- st$fed[[1L]]
    st$fed <- st$fed[-1L]
    say(paste0(prompt, line, "\n"))
    return(line)
  }
  if (!st$allow) {
    say(if (nzchar(prompt)) paste0(prompt, "\n") else "")
    return(NULL)
  }
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
      # kernel/interrupt came while the client was asked: the read ends as interrupted.
      if (isTRUE(req$interrupted)) signalCondition(structure(list(message = "", call = NULL), class = c("interrupt", "condition")))
      if (isTRUE(req$eof)) return(NULL)
      value <- if (is.null(req$value)) "" else req$value
      say(paste0(prompt, value, "\n"))
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

# Runs the cell's top-level expressions in turn; an error or an interrupt ends the cell.
run_cell <- function(text, file, silent, no_result) {
  exprs <- tryCatch(parse(text = text, srcfile = srcfilecopy(file, strsplit(text, "\n", fixed = TRUE)[[1L]]),
                          keep.source = TRUE),
                    error = function(e) {
                      on_error(e, parse_error = TRUE)
                      NULL
                    })
  if (is.null(exprs)) return("error")
  refs <- attr(exprs, "srcref")
  n <- length(exprs)
  for (i in seq_len(n)) {
    expr <- exprs[[i]]
    ref <- refs[[i]]
    st$cur_line <- ref[[1L]]
    st$cur_src <- paste(as.character(ref), collapse = "\n")
    st$trace <- NULL
    res <- tryCatch(withCallingHandlers(withVisible(eval(expr, globalenv())),
                                        warning = on_warning, error = capture_calls),
                    error = function(e) {
                      on_error(e)
                      NULL
                    })
    if (is.null(res)) {
      show_plot(incomplete = TRUE)
      print_warnings()
      return("error")
    }
    show_plot()
    # The last expression's value is the result, but for a silent run or a cell ending in ';'.
    if (res$visible && (i < n || !(silent || no_result))) show_value(res$value, last = i == n)
    print_warnings()
  }
  show_plot(incomplete = TRUE)
  "ok"
}

execute <- function(req) {
  st$exec_id <- req$id
  st$fed <- character(0)
  if (is.character(req$stdin) && nzchar(req$stdin)) {
    st$fed <- strsplit(req$stdin, "\n", fixed = TRUE)[[1L]]
  }
  st$allow <- isTRUE(req$allowStdin)
  st$result <- NULL
  st$error <- NULL
  st$trace <- NULL
  st$warnings <- list()
  st$plot <- NULL
  silent <- isTRUE(req$silent)
  code <- if (is.character(req$code)) req$code else ""
  where <- cell_file(req)
  st$files <- unique(c(st$files, where[[1L]]))
  text <- paste0(strrep("\n", where[[2L]] - 1L), code) # line numbers as in the editor's file
  st$cur_file <- where[[1L]]
  st$cur_line <- 1L
  st$cur_src <- ""
  cpu <- cpu_seconds()
  status <- if (isTRUE(st$early_interrupt)) "interrupted" else tryCatch({
    open_device()
    run_cell(text, where[[1L]], silent, grepl(";[[:space:]]*$", code))
  }, interrupt = function(i) "interrupted", finally = close_devices())
  st$warnings <- list()
  if (status == "interrupted") {
    st$result <- NULL
    st$error <- list(ename = "interrupt", evalue = "", traceback = I("Interrupted"))
    emit(list(ev = "error", id = st$exec_id, ename = "interrupt", evalue = "", traceback = I("Interrupted")))
  } else if (!is.null(st$error)) {
    status <- "error"
    st$result <- NULL
    emit(c(list(ev = "error", id = st$exec_id), st$error))
  } else if (!is.null(st$result)) {
    emit(list(ev = "result", id = st$exec_id, data = st$result, metadata = named()))
    st$result <- NULL
  }
  done <- list(ev = "done", id = st$exec_id, status = status,
               cpuMs = round((cpu_seconds() - cpu) * 1000, 3), peakMemoryBytes = peak_memory())
  if (status != "ok") done$error <- st$error
  st$done_id <- req$id
  st$exec_id <- NULL
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
  options(device = open_device, repr.plot.width = 7, repr.plot.height = 5,
          repr.plot.res = 120, warn = 0, width = 80)
  for (hook in c("before.plot.new", "before.grid.newpage", "persp")) setHook(hook, function(...) show_plot(new_page = TRUE))
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
