# In-kernel code (standard library only; sent as source, never imports ipykeep).
# Installed once per kernel process as sys.modules["_ipykeep_kernel"].
PROTOCOL_VERSION = 1

import asyncio
import inspect
import signal
import sys
import threading
import time
from contextlib import contextmanager
from typing import Any


def install_interrupt_patch():
    """Make a running top-level ``await`` interruptible on ipykernel 7.

    ipykernel 7 turns SIGINT into cancelling the cell's future through
    ``IPythonKernel._cancel_on_sigint``, which schedules the cancellation on ``self.io_loop``;
    that is not the loop running the cell, so ``await asyncio.sleep(60)`` never stops. This
    cancels the future on the loop it runs in (thread-safe), leaving the rest as it is.
    """
    from IPython.core.getipython import get_ipython

    kernel = getattr(get_ipython(), "kernel", None)
    if kernel is None:
        return
    cls = type(kernel)
    if getattr(cls, "_ipykeep_sigint_patch", False) or not hasattr(cls, "_cancel_on_sigint"):
        return

    @contextmanager
    def _cancel_on_sigint(self, future):
        loop = asyncio.get_event_loop()

        def handle(*_args):
            loop.call_soon_threadsafe(lambda: future.done() or future.cancel())

        saved = signal.signal(signal.SIGINT, handle)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, saved)

    cls._cancel_on_sigint = _cancel_on_sigint
    cls._ipykeep_sigint_patch = True


_warmed_modules = 0


def warm_tracebacks():
    """Fill ``inspect.getmodule``'s file cache in a background thread.

    Formatting a traceback calls ``inspect.getmodule``, whose first call walks every module in
    ``sys.modules``; inside an ipyflow kernel that walk costs ~1.5 ms a module (1-2 s after
    importing pandas), which made the first error or interrupt after an import slow enough to
    look like a cell ignoring SIGINT. Done here, off the main thread, when modules were added.
    """
    global _warmed_modules
    count = len(sys.modules)
    if count == _warmed_modules:
        return '"unchanged"'
    first = _warmed_modules == 0
    _warmed_modules = count
    threading.Thread(target=_warm, args=(first,), daemon=True, name="ipykeep-warm").start()
    return '"warming"'


#: The once-per-process warming (a formatted cancelled traceback, IPython's sources parsed:
#: ~0.45 s of CPU in a static kernel) waits until the main shell has been idle this long, or
#: until ``_WARM_DEFER_MAX`` seconds have passed. Run at once, it competed with the first cells
#: of the warm-up (or a restore) for the GIL and made them ~0.45 s slower (numpy + pandas
#: imports: 1.1 s instead of 0.6 s).
_WARM_IDLE = 0.2
_WARM_DEFER_MAX = 2.0
_activity = {"running": 0, "last": 0.0}


def _track_activity():
    """Count executions in progress (IPython's pre/post_execute events), for ``_wait_idle``."""
    from IPython.core.getipython import get_ipython

    shell: Any = get_ipython()
    if shell is None or getattr(shell, "_ipykeep_activity", False):
        return

    def pre(*_args):
        _activity["running"] += 1

    def post(*_args):
        _activity["running"] = max(0, _activity["running"] - 1)
        _activity["last"] = time.monotonic()

    shell.events.register("pre_execute", pre)
    shell.events.register("post_execute", post)
    shell._ipykeep_activity = True


def _wait_idle():
    deadline = time.monotonic() + _WARM_DEFER_MAX
    while time.monotonic() < deadline:
        if not _activity["running"] and time.monotonic() - _activity["last"] >= _WARM_IDLE:
            return
        time.sleep(0.05)


def _warm(first):
    inspect.getmodule(compile("0", "<ipykeep-warm>", "eval"))
    if first:
        _wait_idle()
        for step in (_warm_cancelled_traceback, _warm_sources):
            try:
                step()
            except Exception:  # warming is an optimisation; never disturb the kernel
                pass


def _warm_cancelled_traceback():
    """Format the traceback of a cancelled await, as interrupting a top-level ``await`` makes,
    so pygments' lexers are compiled and the asyncio sources parsed before the real one."""
    from IPython.core.getipython import get_ipython

    shell = get_ipython()
    assert shell is not None, "warming runs inside the kernel's shell"  # caught by _warm
    loop = asyncio.new_event_loop()
    try:
        task = loop.create_task(asyncio.sleep(10))
        loop.call_soon(task.cancel)
        loop.run_until_complete(task)
    except BaseException:
        shell.InteractiveTB.structured_traceback(*sys.exc_info())
    finally:
        loop.close()


def _warm_sources():
    """Formatting a traceback parses the sources of the frames involved (IPython 8 reads
    interactiveshell.py, ~4,000 lines, for an interrupted cell; an interrupt can also land in
    the tracer's own frames): parse them now, rather than later under the tracer."""
    # stack_data's Source subclass keeps its own cache: that is the one tracebacks use.
    from stack_data import Source

    for name in (
        "IPython.core.interactiveshell",
        "pyccolo.tracer",
        "ipyflow.tracing.ipyflow_tracer",
    ):
        module = sys.modules.get(name)
        filename = getattr(module, "__file__", None) if module is not None else None
        if filename:
            Source.for_filename(filename)


def install_orphan_guard():
    """Take the whole process group down when the daemon dies, however it dies.

    ipykernel's parent poller ends the kernel itself, but processes a cell started (a
    ``subprocess.Popen``, a ``multiprocessing`` worker, a fork) would live on. The kernel leads
    its own process group, so killing the group ends them with it.

    Windows has no process groups to kill: there the daemon holds the kernel in a Job Object
    that kills every process in it when the daemon's handle closes (``ipykeep/platform``), so
    this guard is POSIX only (in-kernel code cannot import the platform seam).
    """
    import os

    if not hasattr(os, "killpg"):
        return
    parent = os.getppid()
    if getattr(sys, "_ipykeep_orphan_guard", False) or os.getpgrp() != os.getpid():
        return
    vars(sys)["_ipykeep_orphan_guard"] = True  # a marker of ours, so not a declared attribute

    def watch():
        import time

        while os.getppid() == parent:
            time.sleep(0.25)
        os.killpg(0, signal.SIGKILL)

    threading.Thread(target=watch, daemon=True, name="ipykeep-orphan-guard").start()
    # ipykernel's own parent poller may notice first and ``os._exit`` the kernel alone: make
    # its exit take the group too.
    try:
        import ipykernel.parentpoller as poller
    except ImportError:
        return

    class _GroupExit:
        def __getattr__(self, name):
            return getattr(os, name)

        @staticmethod
        def _exit(code):
            try:
                os.killpg(0, signal.SIGKILL)
            finally:
                os._exit(code)

    # Set through the module's namespace: the stand-in is not a module, only used like one.
    vars(poller)["os"] = _GroupExit()


def install_subshell_guard():
    """Keep ipyflow's ``run_cell`` on the main thread.

    ipyflow's ``run_cell`` ends every cell with its output recorder, a singleton the main
    thread's traced cell sets up and tears down; a subshell request running it at the same
    time failed there (``'OutputRecorder' object has no attribute 'capturing_output'``), so
    the request ended with no reply and its code never ran (seen once in ~5,000 scratch calls
    from 10 concurrent clients). ipykeep's subshell requests are untraced anyway (silent and
    empty, the code in a user expression: ``run_untraced``): off the main thread, this runs
    IPython's own ``run_cell``, without ipyflow's wrapper (and with ipykernel's resets, as
    ``ZMQInteractiveShell.run_cell`` does them).
    """
    from IPython.core.getipython import get_ipython

    shell: Any = get_ipython()
    ipyflow_shell = getattr(
        sys.modules.get("ipyflow.shell.interactiveshell"), "IPyflowInteractiveShell", None
    )
    if shell is None or ipyflow_shell is None or not isinstance(shell, ipyflow_shell):
        return
    if getattr(shell, "_ipykeep_subshell_guard", False):
        return
    traced = shell.run_cell
    plain = super(ipyflow_shell, shell).run_cell
    accepted = getattr(shell, "_super_run_cell_param_names", None)

    def run_cell(*args, **kwargs):
        if threading.current_thread() is threading.main_thread():
            return traced(*args, **kwargs)
        if accepted is not None:
            kwargs = {k: v for k, v in kwargs.items() if k in accepted}
        shell._last_traceback = None
        shell._last_traceback_during_displayhook = False
        return plain(*args, **kwargs)

    shell.run_cell = run_cell
    shell._ipykeep_subshell_guard = True


def install_text_guard():
    """Send text holding lone surrogates (``print('\\ud800')``) with U+FFFD in their place.

    jupyter_client's JSON packer refuses such strings (UTF-8 cannot carry them): the output
    message was dropped and the packer's traceback printed on the kernel's stderr took its place
    in the cell's output. Only a message that fails to pack is rewritten; the rest goes as is.
    """
    import re

    from IPython.core.getipython import get_ipython

    kernel = getattr(get_ipython(), "kernel", None)
    surrogate = re.compile("[\ud800-\udfff]")

    def clean(value):
        if isinstance(value, str):
            return surrogate.sub("\ufffd", value)
        if isinstance(value, dict):
            return {clean(k): clean(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(clean(v) for v in value)
        return value

    sessions = {
        id(s): s
        for s in (
            getattr(kernel, "session", None),
            getattr(sys.stdout, "session", None),
            getattr(sys.stderr, "session", None),
        )
        if s is not None and not getattr(s, "_ipykeep_text_guard", False)
    }
    for session in sessions.values():
        packer = session.pack

        def pack(obj, _packer=packer):
            try:
                return _packer(obj)
            except UnicodeEncodeError:
                return _packer(clean(obj))

        session.pack = pack
        session._ipykeep_text_guard = True


class _NoOutputs(dict):
    """Stands in for IPython 9's ``history_manager.outputs``: each write lands in a list that
    is not kept (IPython appends every stream chunk and result of every execution to it, for
    the life of the kernel)."""

    def __missing__(self, key):
        return []

    def setdefault(self, key, default=None):
        return default if default is not None else []


def drop_output_history():
    """Keep no output history in the kernel: ``Out``/``_N`` and the history manager's outputs
    held every execution's results and prints forever (``_``, ``__``, ``___`` still work;
    ipykeep keeps outputs in its own record)."""
    from IPython.core.getipython import get_ipython

    shell: Any = get_ipython()
    if shell is None:
        return
    history = getattr(shell, "history_manager", None)
    if history is not None and hasattr(history, "outputs"):
        history.outputs = _NoOutputs()
    hook = getattr(shell, "displayhook", None)
    if hook is not None and hasattr(hook, "do_full_cache"):
        hook.do_full_cache = False


_WRITE_CHUNK = 1 << 20


def _buffered(stream):
    """Characters ``stream`` holds for its next flush (ipykernel's per-parent buffers)."""
    buffers = getattr(stream, "_buffers", None)
    lock = getattr(stream, "_buffer_lock", None)
    if buffers is None or lock is None:
        return _WRITE_CHUNK  # an ipykernel without them: flush, as before the check existed
    with lock:
        return sum(buffer.tell() for buffer in buffers.values())


def send_large_writes_in_parts():
    """Output to the kernel's stdout or stderr goes out in messages of at most about 1 MiB.

    ipykernel sends what a flush interval (0.2 s) buffered as one message: ``print`` of 100 MB,
    or 100 prints of 1 MB, was one 100 MB message, which the daemon had to decode whole (its
    bytes, the decoded text and the JSON: ~2.5x the size) before its recording cap dropped most
    of it. A write over 1 MiB is sent in 1 MiB parts, and once 1 MiB is buffered it is flushed
    at once. ``flush`` waits for the kernel's output thread to send, so a cell printing fast
    cannot run ahead of it either. The size check is amortized: the buffers are measured only
    once a further 1 MiB has been written since they were last measured.
    """
    streams: tuple[Any, ...] = (sys.stdout, sys.stderr)
    for stream in streams:
        if type(stream).__name__ != "OutStream" or getattr(stream, "_ipykeep_parts", False):
            continue
        write = stream.write
        # an upper bound of what the stream buffers (a timed flush only lowers the real amount)
        unmeasured = [0]

        def in_parts(string, _write=write, _stream=stream, _unmeasured=unmeasured):
            if not isinstance(string, str):
                return _write(string)
            if len(string) > _WRITE_CHUNK:
                for start in range(0, len(string), _WRITE_CHUNK):
                    _write(string[start : start + _WRITE_CHUNK])
                    _stream.flush()
                _unmeasured[0] = 0
                return len(string)
            written = _write(string)
            _unmeasured[0] += len(string)
            if _unmeasured[0] >= _WRITE_CHUNK:
                _unmeasured[0] = _buffered(_stream)
                if _unmeasured[0] >= _WRITE_CHUNK:
                    _stream.flush()
                    _unmeasured[0] = 0
            return written

        stream.write = in_parts
        stream._ipykeep_parts = True


install_interrupt_patch()
drop_output_history()
send_large_writes_in_parts()
install_orphan_guard()
install_subshell_guard()
install_text_guard()
_track_activity()


_scratch_runs = 0


def _publish_result(shell, value):
    """Send ``value`` as this request's execute_result.

    IPython's display hook keeps the message being built on the hook object itself, shared by
    every thread: two subshells showing results at once lose one. This builds the message
    locally and sends it as the display publisher does (its parent header is per thread).
    """
    pub = shell.display_pub
    try:
        from ipykernel.jsonutil import encode_images, json_clean

        data, metadata = shell.display_formatter.format(value)
        pub._flush_streams()
        content = {
            "data": encode_images(data),
            "metadata": metadata,
            "execution_count": shell.execution_count,
        }
        msg = pub.session.msg("execute_result", json_clean(content), parent=pub.parent_header)
        pub.session.send(pub.pub_socket, msg, ident=pub.topic)
    except Exception:  # an unusual publisher: fall back to IPython's hook
        shell.displayhook(value)


def run_untraced(source):
    """Run scratch code sent to a subshell of an ipyflow kernel, outside ipyflow's tracer.

    ipyflow's tracer is not thread-safe: traced code on a subshell while a traced cell runs on
    the main shell fails inside ipyflow. The request is silent with empty code (ipyflow passes
    those to IPython untouched) and this runs in a user expression: the code runs in the user's
    namespace, the value of a trailing expression goes through the display hook and an error
    is shown as IPython shows it.
    """
    import ast
    import linecache

    from IPython.core.getipython import get_ipython

    global _scratch_runs
    _scratch_runs += 1
    # silent requests fire no pre_run_cell: checkpoint blobs still reading live values stop now
    freeze = getattr(sys.modules.get("_ipykeep_ckpt"), "freeze_live", None)
    if freeze is not None:
        freeze()
    shell = get_ipython()
    assert shell is not None, "run_untraced is called from a user expression, inside the shell"
    filename = f"<scratch-{_scratch_runs}>"
    try:
        code = shell.transform_cell(source)
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        tree = ast.parse(code, filename=filename)
    except SyntaxError:
        shell.showsyntaxerror()
        return None
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    namespace = shell.user_ns
    try:
        exec(compile(tree, filename, "exec"), namespace)
        if last is not None:
            value = eval(compile(last, filename, "eval"), namespace)
            if value is not None:
                _publish_result(shell, value)
    except BaseException as exc:
        # Shown as the execution's error output (its state is taken from it), without this
        # frame; the request itself ends normally.
        tb = exc.__traceback__
        shell.showtraceback((type(exc), exc, tb.tb_next if tb is not None else None))
    return None


_compiled: dict = {}  # expression source -> code object (some carry a cell's path literals)
_COMPILED_MAX = 256


def probe_all(sources, global_ns, local_ns):
    """Evaluate every probe expression of one execution; one JSON text for all of them.

    IPython formats each user expression's value with every display formatter (~0.25 ms
    each); sent as one expression, it formats one string. Each expression is evaluated as
    IPython would (in the user's namespace) and fails alone: its entry carries the error in
    the shape of a ``user_expressions`` reply entry, and the others keep their results.
    """
    import json

    results = {}
    for key, source in sources.items():
        try:
            code = _compiled.get(source)
            if code is None:
                if len(_compiled) >= _COMPILED_MAX:
                    _compiled.clear()
                code = _compiled[source] = compile(source, "<ipykeep-probe>", "eval")
            value = eval(code, global_ns, local_ns)
            results[key] = {"status": "ok", "data": {"text/plain": repr(value)}, "metadata": {}}
        except Exception as exc:
            results[key] = {
                "status": "error",
                "ename": type(exc).__name__,
                "evalue": str(exc),
                "traceback": [],
            }
    return json.dumps(results)
