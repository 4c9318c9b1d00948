# In-kernel code (standard library only; sent as source, never imports ipykeep).
# Installed once per kernel process as sys.modules["_ipykeep_debug"]: a bdb debugger run on
# the kernel's main thread and driven from subshells, plus the post-mortem of the last failure.
PROTOCOL_VERSION = 2

import bdb
import fnmatch
import json
import linecache
import sys
import threading
import time
from typing import Any

#: Where the inspection helper is installed (locals and values go through its summarizers).
INSPECT_MODULE = "_ipykeep_inspect"
#: Modules the debugger never stops in: the kernel's own machinery and ipykeep's helpers.
SKIP = (
    "IPython.*",
    "ipykernel.*",
    "ipyflow*",
    "pyccolo*",
    "_ipykeep_*",
    "asyncio.*",
    "traitlets.*",
)
#: Frame listings keep at most this many frames (the innermost ones).
MAX_FRAMES = 40
#: Locals listed at most (a cell's frame has the whole notebook namespace as its locals).
MAX_LOCALS = 60
#: Lines of source shown around the current line by ``list``.
LIST_CONTEXT = 5


def _shell():
    from IPython.core.getipython import get_ipython

    return get_ipython()


def _is_machinery(frame) -> bool:
    name = frame.f_globals.get("__name__") or ""
    return any(fnmatch.fnmatch(name, p) for p in SKIP)


def _is_library(frame) -> bool:
    """Installed code (the standard library, site-packages): raising there is not the user's."""
    filename = frame.f_code.co_filename
    if filename.startswith("<frozen "):  # a frozen standard module (``os``, ``importlib``)
        return True
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    return "site-packages" in filename or any(filename.startswith(p) for p in prefixes)


#: code flags of generators, coroutines and async generators (bdb's own mask)
_GENERATOR_FLAGS = getattr(bdb, "GENERATOR_AND_COROUTINE_FLAGS", 0x20 | 0x80 | 0x200)


def _key(target: dict) -> dict:
    """A breakpoint's place (a cell target's source only helps find its code file)."""
    return {k: v for k, v in target.items() if k != "source"}


def _cell_code_file(source):
    """The file a cell with ``source`` runs as: ipykernel names it by the source's hash (None
    where the shell's compiler names cells otherwise, or without a source)."""
    if not source:
        return None
    try:
        shell = _shell()
        name = shell.compile.get_code_name(source, source, 0)
    except Exception:
        return None
    return name if isinstance(name, str) and not name.startswith("<") else None


def _describe(frame, lineno: int, index: int, cell_id) -> dict:
    code = frame.f_code
    line = linecache.getline(code.co_filename, lineno, frame.f_globals).strip()
    out = {"index": index, "function": code.co_name, "file": code.co_filename, "line": lineno}
    if line:
        out["text"] = line[:160]
    if cell_id and code.co_name == "<module>" and index == 0:
        out["cell_id"] = cell_id
    return out


class _Context:
    """Frames to look at (a paused stack or a failure's traceback) and the selected one."""

    def __init__(self, kind: str, frames: list, cell_id) -> None:
        self.kind = kind  # "paused" or "post_mortem"
        self.frames = frames[-MAX_FRAMES:]  # (frame, lineno), outermost first
        self.cell_id = cell_id
        self.current = len(self.frames) - 1

    def listing(self) -> list:
        return [_describe(f, ln, i, self.cell_id) for i, (f, ln) in enumerate(self.frames)]

    def here(self) -> dict:
        frame, lineno = self.frames[self.current]
        return _describe(frame, lineno, self.current, self.cell_id)


class KernelDebugger(bdb.Bdb):
    """bdb on the main thread; every decision to pause is bdb's, with ipykeep's breakpoints.

    Breakpoints are kept here rather than in bdb's global table: a cell is a new file each time
    it runs (ipykernel names it by its source hash), so a cell breakpoint is matched by the
    running cell's id and a text breakpoint by the line's text, resolved when the cell starts.
    """

    def __init__(self) -> None:
        super().__init__(skip=SKIP)
        #: number -> target ({"cell_id", "line"}, {"text"}, {"function"}, {"file", "line"}):
        #: numbered as set and never renumbered (pdb's way), so ``clear N`` names one
        self.points: dict = {}
        self.next_number = 1
        # the lookups derived from ``points`` (``_index``), read on every traced event
        self.cell_lines: dict = {}  # cell id -> set of 1-based lines
        self.texts: list = []  # line texts
        self.functions: set = set()  # function names (co_name or qualified name)
        self.files: dict = {}  # absolute path -> set of lines
        #: code file of a cell (by its source) -> its breakpoint lines: the functions and
        #: generators a cell defines run from that file when a later cell calls them
        self.cell_code_lines: dict = {}
        self.entered: list = []  # generator frames a function breakpoint has stopped in
        self.stop_on_raise = False
        #: a replay's one-off target: {"cell_id", "line" or None, "types": exception names}
        self.replay: Any = None
        #: exception type names this run stops on (a replay of a failure)
        self.run_catch: set = set()
        self.cell_id = None
        self.cell_file = None
        self.cell_lines_text: list = []  # the running cell's source lines
        self.replay_line: Any = None  # a replay's line in the running cell
        self.active_lines: set = set()
        self.called: Any = None
        self.last_raised: Any = None
        self.cond = threading.Condition()
        self.paused: Any = None  # _Context while the main thread waits
        self.pause_seq = 0
        self.pause_reason = ""
        self.resume: Any = None  # command the main thread runs when it wakes
        self.running = False
        self.finished_seq = 0
        self._sentinel: Any = None
        self._previous_trace: Any = None

    # -- arming around one execution on the main thread -------------------------------------
    def armed(self) -> bool:
        return bool(self.cell_lines or self.texts or self.functions or self.files) or bool(
            self.stop_on_raise or self.replay
        )

    def catching(self, exc_type) -> bool:
        return self.stop_on_raise or getattr(exc_type, "__name__", None) in self.run_catch

    def start(self, info) -> None:
        self.reset()
        self.cell_id = getattr(info, "cell_id", None)
        self.cell_file = None
        self.cell_lines_text = (getattr(info, "raw_cell", "") or "").splitlines()
        self.run_catch = set()
        self.replay_line = None
        replay = self.replay
        if replay is not None and replay.get("cell_id") == self.cell_id:
            self.replay = None
            if replay.get("line"):
                self.replay_line = int(replay["line"])
            self.run_catch = set(replay.get("types") or ())
        self.active_lines = self.lines_of_running_cell()
        self.called = None
        # Continue mode: stop only at breakpoints (stop_here is False for every frame but the
        # sentinel, which never runs a line).
        self._sentinel = sys._getframe()
        self._set_stopinfo(self._sentinel, None, -1)  # type: ignore[attr-defined]
        self.running = True
        self._previous_trace = sys.gettrace()
        sys.settrace(self._chained(self._previous_trace))

    def lines_of_running_cell(self) -> set:
        """The running cell's lines to stop at: its cell breakpoints, the lines holding a
        breakpoint's text (found in the source that runs, so they follow edits), a replay's."""
        lines = set(self.cell_lines.get(self.cell_id, ()))
        for number, text in enumerate(self.cell_lines_text, start=1):
            if any(t in text for t in self.texts):
                lines.add(number)
        if self.replay_line is not None:
            lines.add(self.replay_line)
        return lines

    # -- the breakpoint table ---------------------------------------------------------------
    def add_point(self, target: dict) -> None:
        same = [n for n, t in self.points.items() if _key(t) == _key(target)]
        if same:  # the same place again: its cell's source may have changed since
            self.points[same[0]] = target
        else:
            self.points[self.next_number] = target
            self.next_number += 1
        self._index()

    def remove_points(self, which) -> str | None:
        """Remove one breakpoint (its number, or its target) or all (None); an error or None."""
        if which is None:
            self.points.clear()
        elif isinstance(which, int):
            if self.points.pop(which, None) is None:
                return f"no breakpoint {which}: {_numbers(self.points)}"
        else:
            numbers = [n for n, t in self.points.items() if _key(t) == _key(which)]
            if not numbers:
                return f"no breakpoint {_spec(which)}: {_numbers(self.points)}"
            for n in numbers:
                del self.points[n]
        if not self.points:  # no number is in use: the next breakpoint is 1 again
            self.next_number = 1
        self._index()
        return None

    def _index(self) -> None:
        self.cell_lines, self.texts, self.functions, self.files = {}, [], set(), {}
        self.cell_code_lines = {}
        for t in self.points.values():
            if t.get("cell_id") is not None:
                self.cell_lines.setdefault(t["cell_id"], set()).add(int(t["line"]))
                code_file = _cell_code_file(t.get("source"))
                if code_file is not None:
                    self.cell_code_lines.setdefault(code_file, set()).add(int(t["line"]))
            elif t.get("text"):
                self.texts.append(str(t["text"]))
            elif t.get("function"):
                self.functions.add(str(t["function"]))
            elif t.get("file"):
                self.files.setdefault(str(t["file"]), set()).add(int(t["line"]))
        if self.running:  # the running execution stops where the table says from now on
            self.active_lines = self.lines_of_running_cell()

    def finish(self) -> None:
        sys.settrace(self._previous_trace)
        self._previous_trace = None
        self._sentinel = None
        self.called = None
        self.entered = []
        self.last_raised = None
        self.run_catch = set()
        with self.cond:
            self.running = False
            self.finished_seq += 1
            self.cond.notify_all()

    def _chained(self, previous):
        """A global trace function running ``previous`` (ipyflow's tracer, say) beside bdb."""
        if previous is None:
            return self.trace_dispatch

        def both(local_a, local_b):
            def local(frame, event, arg):
                a = local_a(frame, event, arg) if local_a else None
                b = local_b(frame, event, arg) if local_b else None
                return both(a, b) if (a or b) else None

            return local

        def dispatch(frame, event, arg):
            a = previous(frame, event, arg)
            b = self.trace_dispatch(frame, event, arg)
            if a is None or b is None:
                return a or b
            return both(a, b)

        return dispatch

    # -- where to stop ----------------------------------------------------------------------
    def _is_cell_frame(self, frame) -> bool:
        if self.cell_file is None and frame.f_code.co_name == "<module>":
            back = frame.f_back
            if back is not None and _is_machinery(back):
                self.cell_file = frame.f_code.co_filename
        return self.cell_file is not None and frame.f_code.co_filename == self.cell_file

    def _function_match(self, frame) -> bool:
        code = frame.f_code
        qual = getattr(code, "co_qualname", code.co_name)
        return code.co_name in self.functions or qual in self.functions

    def stop_here(self, frame) -> bool:
        # Stepping stops in the user's frames only: not in what the kernel's machinery calls
        # on its own (ipyflow's instrumentation of a cell calls into the standard library).
        return super().stop_here(frame) and not self._called_by_machinery(frame)

    def _called_by_machinery(self, frame) -> bool:
        back = frame
        while back is not None and not self._is_cell_frame(back):
            back = back.f_back
            if back is not None and _is_machinery(back):
                return True
        return False

    def break_anywhere(self, frame) -> bool:
        if self.stop_on_raise or self.run_catch:
            # exceptions are seen in every user frame they pass through; installed code is
            # left untraced (its exceptions still reach the user frame that called it)
            return not (_is_machinery(frame) or _is_library(frame))
        if self._is_cell_frame(frame):
            return bool(self.active_lines)
        filename = frame.f_code.co_filename
        return (
            filename in self.files
            or filename in self.cell_code_lines
            or self._function_match(frame)
        )

    def break_here(self, frame) -> bool:
        if self._is_cell_frame(frame):
            if frame.f_lineno in self.active_lines:
                return True
        elif frame.f_lineno in self.cell_code_lines.get(frame.f_code.co_filename, ()):
            return True  # in a function an earlier cell defined
        if frame.f_lineno in self.files.get(frame.f_code.co_filename, ()):
            return True
        if frame is self.called:  # the first line of a function breakpoint's call
            self.called = None
            return True
        return False

    def user_call(self, frame, argument_list):
        # The call event comes right before the function's first line: remember the frame
        # (a strong reference, so its id cannot be reused by the next call's frame).
        if self._function_match(frame):
            self.called = frame

    def dispatch_call(self, frame, arg):
        # bdb skips the call event of a generator (or coroutine) outside stepping, so a
        # function breakpoint on one would never stop: its first entry stops here (not each
        # resumption, which is also a call event)
        if (
            frame.f_code.co_flags & _GENERATOR_FLAGS
            and self._function_match(frame)
            and not any(f is frame for f in self.entered)
        ):
            self.entered.append(frame)
            self.called = frame
        return super().dispatch_call(frame, arg)

    def dispatch_exception(self, frame, arg):
        user_code = not (_is_machinery(frame) or _is_library(frame))
        if self.catching(arg[0]) and user_code and not self.stop_here(frame):
            self.user_exception(frame, arg)
            if self.quitting:
                raise bdb.BdbQuit
            return self.trace_dispatch
        return super().dispatch_exception(frame, arg)

    # -- pausing (main thread) --------------------------------------------------------------
    def user_line(self, frame):
        # In continue mode (stopframe is the sentinel) only a breakpoint stops a line.
        self._pause(
            frame, frame.f_lineno, "breakpoint" if self.stopframe is self._sentinel else "step"
        )

    def user_return(self, frame, value):
        if frame.f_code.co_name == "<module>" and self._is_cell_frame(frame):
            return
        self._pause(frame, frame.f_lineno, "return")

    def user_exception(self, frame, exc_info):
        if not self.catching(exc_info[0]):
            return
        exc = exc_info[1]
        if exc is self.last_raised:  # one pause per exception, not one per frame it leaves
            return
        self.last_raised = exc
        self._pause(frame, frame.f_lineno, f"raised {type(exc).__name__}: {str(exc)[:120]}")

    def _stack(self, frame) -> list:
        out = []
        while frame is not None and not _is_machinery(frame):
            out.append((frame, frame.f_lineno))
            frame = frame.f_back
        out.reverse()
        return out

    def _pause(self, frame, lineno, reason):
        with self.cond:
            self.paused = _Context("paused", self._stack(frame), self.cell_id)
            self.pause_seq += 1
            self.pause_reason = reason
            self.resume = None
            self.cond.notify_all()
            try:
                # A short timeout keeps the wait interruptible by SIGINT (the interrupt path).
                while self.resume is None:
                    self.cond.wait(0.1)
                command = self.resume
            finally:
                self.paused = None
                self.resume = None
                self.cond.notify_all()
        if command == "step":
            self.set_step()
        elif command == "next":
            self.set_next(frame)
        elif command == "return":
            self.set_return(frame)
        elif command == "quit":
            self.set_quit()
        else:  # continue: back to stopping at breakpoints only, tracing kept on
            self._set_stopinfo(self._sentinel, None, -1)  # type: ignore[attr-defined]


_debugger = KernelDebugger()
_post_mortem: dict = {"context": None, "cell_id": None, "error": None, "msg_id": None}


def _pre_run(info):
    if threading.current_thread() is threading.main_thread() and _debugger.armed():
        _debugger.start(info)


def _post_run(result):
    if _debugger.running and threading.current_thread() is threading.main_thread():
        _debugger.finish()
    exc = getattr(result, "error_in_exec", None)
    if exc is None:
        return
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    while frames and _is_machinery(frames[0][0]):
        frames.pop(0)
    if not frames:
        return
    info = getattr(result, "info", None)
    cell_id = getattr(info, "cell_id", None)
    try:
        msg_id = _shell().kernel.get_parent()["header"]["msg_id"]
    except Exception:
        msg_id = None
    _post_mortem["msg_id"] = msg_id
    # Keeping the context keeps its frames (and their locals) alive until the next failure.
    _post_mortem["context"] = _Context("post_mortem", frames, cell_id)
    _post_mortem["cell_id"] = cell_id
    _post_mortem["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"


def install_hooks() -> str:
    shell = _shell()
    if shell is None or getattr(shell, "_ipykeep_debug_hooks", False):
        return '"unchanged"'
    shell.events.register("pre_run_cell", _pre_run)
    shell.events.register("post_run_cell", _post_run)
    shell._ipykeep_debug_hooks = True
    return '"installed"'


# --------------------------------------------------------------------------- commands


def _answer(payload: dict) -> str:
    payload = dict(payload)
    payload["protocol"] = PROTOCOL_VERSION
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), default=str)


def _status() -> dict:
    out: dict = {"state": "idle"}
    ctx = _debugger.paused
    if ctx is not None:
        out = {"state": "paused", "reason": _debugger.pause_reason, "where": ctx.here()}
    elif _debugger.running:
        out = {"state": "running"}
    elif _post_mortem["context"] is not None:
        out = {"state": "post_mortem", "reason": _post_mortem["error"]}
    if _post_mortem["context"] is not None:
        out["post_mortem"] = {
            "msg_id": _post_mortem["msg_id"],
            "cell_id": _post_mortem["cell_id"],
            "error": _post_mortem["error"],
        }
    out["view"] = _view()
    out["breakpoints"] = _breakpoints()
    out["stop_on_raise"] = _debugger.stop_on_raise
    return out


def _spec(target: dict) -> str:
    if target.get("cell_id") is not None:
        return f"cell {target['cell_id']}:{target['line']}"
    if target.get("text"):
        return f"text {target['text']!r}"
    if target.get("function"):
        return f"function {target['function']}"
    return f"{target.get('file')}:{target.get('line')}"


def _numbers(points: dict) -> str:
    return f"set are {', '.join(map(str, points))}" if points else "none is set"


def _breakpoints() -> list:
    """``"1 cell loop:3"``: each breakpoint with the number ``clear N`` takes."""
    return [f"{n} {_spec(t)}" for n, t in _debugger.points.items()]


def _context(kind):
    if kind == "paused":
        return _debugger.paused
    if kind == "post_mortem":
        return _post_mortem["context"]
    return _debugger.paused or _post_mortem["context"]


def _namespace_of(frame) -> dict:
    space = dict(frame.f_globals)
    space.update(frame.f_locals)
    return space


def _summary(expr, frame, budget, summarizers) -> dict:
    inspect = sys.modules[INSPECT_MODULE]
    space = _namespace_of(frame)
    try:
        inspect.parse_path(expr)
        text = inspect.inspect_json(expr, budget, summarizers, None, ns=space)
    except Exception:
        # Not a variable path: evaluate it in the frame, then summarise the value.
        try:
            value = eval(compile(expr, "<debug>", "eval"), frame.f_globals, frame.f_locals)
        except Exception as exc:
            return {"eval_error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        text = inspect.inspect_json("value", budget, summarizers, None, ns={"value": value})
    payload = json.loads(text)
    if not payload.get("ok"):
        return {"eval_error": (payload.get("error") or {}).get("message", "inspection failed")}
    summary = payload["summary"]
    summary["name"] = expr
    return {"value": summary}


def _source(frame, lineno) -> str:
    lines = []
    filename = frame.f_code.co_filename
    for n in range(max(1, lineno - LIST_CONTEXT), lineno + LIST_CONTEXT + 1):
        text = linecache.getline(filename, n, frame.f_globals)
        if not text:
            if n > lineno:
                break
            continue
        marker = "->" if n == lineno else "  "
        lines.append(f"{n:4d} {marker} {text.rstrip()[:160]}")
    return "\n".join(lines)


def _resume(command: str, wait_s: float) -> dict:
    d = _debugger
    with d.cond:
        if d.paused is None:
            return {"error": f"nothing is paused: {command} needs a paused execution"}
        seq = d.pause_seq
        d.resume = command
        d.cond.notify_all()
        deadline = time.monotonic() + wait_s
        finished = d.finished_seq
        while d.pause_seq == seq and d.finished_seq == finished:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            d.cond.wait(min(left, 0.1))
    return {}


def _view() -> list:
    d = _debugger
    return [d.pause_seq, d.paused is not None, d.running, d.finished_seq]


def _wait(seen: list, wait_s: float) -> None:
    """Return when the debugger's view differs from ``seen`` (a pause, a resume, an end)."""
    d = _debugger
    deadline = time.monotonic() + wait_s
    with d.cond:
        while _view() == list(seen):
            left = deadline - time.monotonic()
            if left <= 0:
                return
            d.cond.wait(min(left, 0.1))


def command_json(
    op: str, arg=None, kind=None, budget_s: float = 5.0, summarizers=None, wait_s: float = 10.0
) -> str:
    """Run one debugger command; JSON ``{"protocol", "ok", "status", ...}``."""
    try:
        out = _command(op, arg, kind, float(budget_s), list(summarizers or []), float(wait_s))
    except Exception as exc:
        out = {"error": f"debugger command failed: {type(exc).__name__}: {str(exc)[:300]}"}
    out["ok"] = "error" not in out
    out["status"] = _status()
    return _answer(out)


def _command(op, arg, kind, budget, summarizers, wait_s) -> dict:
    d = _debugger
    if op == "status":
        return {}
    if op == "wait":
        if arg:
            _wait(arg, wait_s)
        return {}
    if op == "replay":
        d.replay = dict(arg)
        return {}
    if op == "break":
        if arg:
            d.add_point(dict(arg))
        return {}
    if op == "clear":
        error = d.remove_points(dict(arg) if isinstance(arg, dict) else arg)
        return {"error": error} if error else {}
    if op == "catch":
        d.stop_on_raise = bool(arg)
        return {}
    if op in ("step", "next", "return", "continue", "quit"):
        return _resume(op, wait_s)
    ctx = _context(kind)
    if ctx is None or not ctx.frames:
        if kind == "post_mortem" or (kind is None and not d.running):
            return {"error": "no failure recorded in this kernel since it started"}
        return {"error": "nothing is paused"}
    if op == "where":
        return {"frames": ctx.listing(), "frame": ctx.current, "context": ctx.kind}
    if op in ("up", "down", "frame"):
        steps = int(arg if arg is not None else 1)
        target = ctx.current - steps if op == "up" else ctx.current + steps
        if op == "frame":
            target = steps
        if not 0 <= target < len(ctx.frames):
            return {"error": f"no frame {target}: frames are 0..{len(ctx.frames) - 1}"}
        ctx.current = target
        return {"frame": ctx.current, "context": ctx.kind, "where": ctx.here()}
    frame, lineno = ctx.frames[ctx.current]
    if op == "p":
        out = _summary(str(arg), frame, budget, summarizers)
        out["where"] = ctx.here()
        out["context"] = ctx.kind
        return out
    if op == "locals":
        inspect = sys.modules[INSPECT_MODULE]
        space = dict(frame.f_locals)
        payload = json.loads(inspect.namespace_json(budget, None, ns=space, limit=MAX_LOCALS))
        if not payload.get("ok"):
            return {"error": (payload.get("error") or {}).get("message", "listing failed")}
        return {"locals": payload["namespace"], "where": ctx.here(), "context": ctx.kind}
    if op == "list":
        return {"source": _source(frame, lineno), "where": ctx.here(), "context": ctx.kind}
    return {"error": f"unknown debugger command {op!r}"}
