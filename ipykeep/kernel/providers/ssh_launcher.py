"""Runs on the SSH host (sent as ``python -c``): starts one kernel that outlives a dropped link.

Stdlib only, Python 3.8+, POSIX. Two modes:

* ``start CWD ORPHAN_S MODULE [OPTION ...]``: picks five free ports on the host's loopback (the
  kernel listens nowhere else; ipykeep reaches them through ssh -L), writes a 0600 connection
  file in a private directory, and forks a supervisor in a session of its own (so the SSH
  session ending does not end it), which starts the kernel (``python -m MODULE -f FILE
  OPTION ...``) as a session leader and listens on a unix socket in that directory. Then it
  attaches, as below.
* ``attach RUNTIME``: connects to the supervisor of RUNTIME and relays: the supervisor's first
  line (ports, key, pid, runtime directory) goes to stdout as one JSON line, lines on stdin
  ("INT", "KILL") go to the supervisor, which signals the kernel's process group. When the kernel
  ends the supervisor says so and the relay exits with 0. A supervisor that is gone (the kernel
  ended while nobody was attached) is answered ``{"gone": true}``.

End of stdin (the SSH connection closed) only detaches. A kernel with nobody attached for
ORPHAN_S seconds is stopped (TERM, then KILL), so one whose ipykeep never came back does not
run forever.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the host's Python may be 3.8: no subscripted builtins at run time
    #: The supervisor's first line: the connection info, or why the kernel did not start.
    Info = dict[str, str | int]

PORTS = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")


def signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except OSError:
        pass


def stop(kernel: subprocess.Popen[bytes]) -> None:
    signal_group(kernel.pid, signal.SIGTERM)
    deadline = time.time() + 3
    while kernel.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    signal_group(kernel.pid, signal.SIGKILL)


class Attached:
    """The relays connected now, and since when nobody is."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.clients: list[socket.socket] = []
        self.since = time.time()


def launch(kernel: list[str], cwd: str, runtime: str) -> subprocess.Popen[bytes]:
    """``kernel``: the kernel's module, then its options."""
    env = dict(os.environ, PYDEVD_DISABLE_FILE_VALIDATION="1")
    env.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    return subprocess.Popen(
        [sys.executable, "-m", kernel[0], "-f", os.path.join(runtime, "kernel.json"), *kernel[1:]],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


def supervise(
    listener: socket.socket, info: Info, cwd: str, command: list[str], orphan_s: float, runtime: str
) -> int:
    kernel: subprocess.Popen[bytes] | None = None
    try:
        kernel = launch(command, cwd, runtime)
        info = dict(info, pid=kernel.pid)
    except OSError as exc:
        info = {"error": "cannot start %s: %s" % (sys.executable, exc)}
    attached = Attached()

    def serve(conn: socket.socket) -> None:
        with attached.lock:
            attached.clients.append(conn)
        try:
            conn.sendall((json.dumps(info) + "\n").encode())
            for line in conn.makefile("rb"):
                word = line.strip().decode()
                if kernel is not None and word == "INT":
                    signal_group(kernel.pid, signal.SIGINT)
                elif kernel is not None and word == "KILL":
                    signal_group(kernel.pid, signal.SIGKILL)
        except OSError:
            pass
        finally:
            with attached.lock:
                attached.clients.remove(conn)
                attached.since = time.time()

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    if kernel is None:
        time.sleep(5)  # long enough for the first relay to read the error
        code = 2
    else:
        while kernel.poll() is None:
            time.sleep(0.5)
            with attached.lock:
                orphaned = not attached.clients and time.time() - attached.since > orphan_s
            if orphaned:
                stop(kernel)
                break
        code = kernel.wait()
    listener.close()
    shutil.rmtree(runtime, ignore_errors=True)
    with attached.lock:
        for conn in attached.clients:
            try:
                conn.sendall(b"EXIT %d\n" % code)
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
    return code


def relay(runtime: str) -> int:
    conn = socket.socket(socket.AF_UNIX)
    try:
        conn.connect(os.path.join(runtime, "ctl.sock"))
    except OSError:
        print(json.dumps({"gone": True}), flush=True)
        return 3
    lines = conn.makefile("rb")
    first = lines.readline()
    if not first:
        print(json.dumps({"gone": True}), flush=True)
        return 3
    sys.stdout.write(first.decode())
    sys.stdout.flush()

    def commands() -> None:
        for line in sys.stdin:
            try:
                conn.sendall(line.encode())
            except OSError:
                break
        os._exit(0)  # the link is gone (or ipykeep let go): detach, the kernel runs on

    threading.Thread(target=commands, daemon=True).start()
    for line in lines:
        if line.startswith(b"EXIT"):
            return 0
    return 0


def start(cwd: str, orphan_s: float, command: list[str]) -> int:
    cwd = os.path.expanduser(cwd)
    if not os.path.isdir(cwd):
        print(json.dumps({"error": "no such directory on the host: " + cwd}), flush=True)
        return 2
    socks = []
    for _ in range(5):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    info: Info = dict(zip(PORTS, ports))
    info.update(
        ip="127.0.0.1", transport="tcp", key=secrets.token_hex(32), signature_scheme="hmac-sha256"
    )
    runtime = tempfile.mkdtemp(prefix="ipykeep-")  # 0700
    info["runtime"] = runtime
    fd = os.open(os.path.join(runtime, "kernel.json"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump({k: v for k, v in info.items() if k != "runtime"}, fh)
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(os.path.join(runtime, "ctl.sock"))
    listener.listen(4)
    if os.fork() == 0:
        # the supervisor: its own session, no tie to the SSH session's descriptors
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        for n in (0, 1, 2):
            os.dup2(null, n)
        code = 1
        try:
            code = supervise(listener, info, cwd, command, orphan_s, runtime)
        finally:
            os._exit(code)
    listener.close()
    return relay(runtime)


def main() -> int:
    if sys.argv[1] == "attach":
        return relay(sys.argv[2])
    return start(sys.argv[2], float(sys.argv[3]), sys.argv[4:])


if __name__ == "__main__":
    sys.exit(main())
