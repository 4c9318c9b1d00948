"""The kernel's side of a process fork: this kernel process copied by ``os.fork`` into a new
kernel on a new connection file (standard library at module level; never imports ipykeep).

Installed in kernels as ``sys.modules["_ipykeep_forkkernel"]``. ``fork(...)`` starts a fresh
thread that forks: in the child only that thread exists, on a clean stack (not inside the
asyncio loop that was running the request), and CPython makes it the child's main thread, so
signals and ``KeyboardInterrupt`` work there. The parent returns the child's pid at once; the
same thread then waits for the child's end, so no zombie is left (no SIGCHLD handler is
touched).

The child leaves the kernel's session (an interrupt of the parent's process group never
reaches it), puts the original stdout and stderr back, closes every inherited socket and
epoll/eventfd descriptor (the parent's ZeroMQ sockets: closing a copy sends nothing to their
peers) without ever using the parent's ZeroMQ context again, and builds a new ipykernel
application on the new connection file around the *same* interactive shell: its namespace,
execution count, hooks, AST transformers, magics, matplotlib set-up and every in-kernel helper
carry over; the shell's display hook and display publisher are re-pointed at the new kernel.
The old application, kernel and loops are kept referenced forever: collecting them could close
descriptor numbers the new kernel has reused. Anything that fails in the child ends it with
``os._exit(1)`` after writing the reason beside the connection file (``<file>.error``).
"""

import contextlib
import json
import os
import signal
import sys
import threading
import time
import traceback
import warnings

PROTOCOL_VERSION = 1

#: the parent's application objects, in each fork child (see the module docstring)
_kept: list = []


def fork(connection_file, daemon_pid, fresh=()):
    """Fork this kernel process into a kernel on ``connection_file``, without the helpers named
    in ``fresh``; returns the child's pid as JSON (``{"pid": N}``, or ``{"error": why}`` when
    no child could be made). ``daemon_pid``: the fork ends with the daemon."""
    answer: dict = {}
    forked = threading.Event()
    # ``random`` reseeds itself in a forked child (its at-fork hook): the fork's is the parent's
    rng = sys.modules.get("random")
    rng_state = rng.getstate() if rng is not None else None

    def run():
        try:
            # Python 3.12+ warns that a multi-threaded process forks: the child uses none of
            # the state the other threads held (it builds its own kernel). The filters are
            # back as they were on both sides right after: they are part of the state cells
            # see (a changed filter list is a changed process-wide setting).
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
        except OSError as exc:
            answer["error"] = f"os.fork failed: {exc}"
            forked.set()
            return
        if pid == 0:
            if rng is not None:
                rng.setstate(rng_state)
            _child(connection_file, daemon_pid, fresh)  # never returns
        answer["pid"] = pid
        forked.set()
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)  # reaped the moment it ends: no zombie is left

    threading.Thread(target=run, daemon=True, name="ipykeep-fork").start()
    forked.wait()
    return json.dumps(answer)


def _child(connection_file, daemon_pid, fresh):
    code = 1
    try:
        app = _rebuild(connection_file, daemon_pid, fresh)
        app.start()  # until shutdown_request
        code = 0
    except BaseException:
        with contextlib.suppress(BaseException):
            fd = os.open(connection_file + ".error", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.write(fd, traceback.format_exc().encode("utf-8", "replace"))
            os.close(fd)
    finally:
        os._exit(code)


def _rebuild(connection_file, daemon_pid, fresh):
    """In the child: a new ipykernel application on ``connection_file`` around this shell."""
    os.setsid()  # its own session and process group: the parent's interrupts are not its own
    from ipykernel import ipkernel
    from ipykernel.kernelapp import IPKernelApp

    old_app = IPKernelApp.instance() if IPKernelApp.initialized() else None
    old_kernel = getattr(old_app, "kernel", None)
    shell = getattr(old_kernel, "shell", None)
    if old_app is None or old_kernel is None or shell is None:
        raise RuntimeError("this process runs no ipykernel application")
    _kept.append((old_app, old_kernel, sys.stdout, sys.stderr, sys.displayhook))
    _restore_std_streams()
    _close_inherited_descriptors()
    for name in fresh:
        # helpers whose threads stayed in the parent (a writer and its queue): the daemon
        # installs them afresh in this kernel
        sys.modules.pop(name, None)
    kernel_class = type(old_kernel)
    # the singletons name the parent's objects; the shell's stays: it is the one kept
    IPKernelApp.clear_instance()
    kernel_class.clear_instance()
    ipkernel._comm_manager = None  # comms were the parent's
    ipkernel._comm_lock = threading.Lock()
    app = IPKernelApp.instance(
        config=old_app.config.copy(),
        connection_file=connection_file,
        kernel_class=kernel_class,
        parent_handle=0,
        log_level=old_app.log_level,
    )
    app.shell = shell
    _leave_traps(shell)
    app.init_connection_file()
    app.init_sockets()
    app.init_heartbeat()
    app._ports = {
        "shell": app.shell_port,
        "iopub": app.iopub_port,
        "stdin": app.stdin_port,
        "hb": app.hb_port,
        "control": app.control_port,
    }
    app.init_io()
    app.init_signal()
    app.init_kernel()
    kernel = app.kernel
    # the shell's own references to its kernel (the kernel re-pointed its display hooks)
    shell.kernel = kernel
    with contextlib.suppress(Exception):
        shell.parent = kernel
    app.init_shell()
    _watch_daemon(daemon_pid)
    return app


def _leave_traps(shell):
    """The fork request ran inside the shell's builtin (and maybe display) trap; in this
    process no request is running: the next one must set them up afresh."""
    if shell.builtin_trap._nested_level:
        with contextlib.suppress(Exception):
            shell.builtin_trap.unset()
        shell.builtin_trap._nested_level = 0
    # not ``unset``: that would put back the parent's display hook; ``init_io`` sets one
    shell.display_trap._nested_level = 0


def _restore_std_streams():
    """The parent's output streams moved fds 1 and 2 onto pipes its threads read: put back the
    originals, so this process's C-level output does not land in the parent's cells."""
    for stream, fd in ((sys.stdout, 1), (sys.stderr, 2)):
        original = getattr(stream, "_original_stdstream_copy", None)
        if original is not None:
            with contextlib.suppress(OSError):
                os.dup2(original, fd)
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    sys.displayhook = sys.__displayhook__


def _close_inherited_descriptors():
    """Close the inherited sockets and epoll/eventfd descriptors: ZeroMQ's and the event
    loops'. A copy closed here leaves the parent's as they are."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd <= 2:
            continue
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(("socket:", "anon_inode:")):
            with contextlib.suppress(OSError):
                os.close(fd)


def _watch_daemon(daemon_pid):
    """End this kernel's process group when the daemon is gone (its parent is the parent
    kernel, whose end must not end it: ipykernel's parent poller is not used)."""
    started = _start_time(daemon_pid)

    def watch():
        while _start_time(daemon_pid) == started and _alive(daemon_pid):
            time.sleep(0.25)
        os.killpg(0, signal.SIGKILL)

    threading.Thread(target=watch, daemon=True, name="ipykeep-orphan-guard").start()


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _start_time(pid):
    """The process's start time (``/proc``; None where unknown), to tell a reused pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[-1].split()[19]
    except (OSError, IndexError):
        return None
