"""Runs on the SSH host (sent as ``python -c``): starts one kernel and keeps it tied to the link.

Stdlib only, Python 3.8+. Arguments: working directory, kernel module. It picks five free ports
on the host's loopback (the kernel listens nowhere else; ipykeep reaches them through ssh -L),
writes a 0600 connection file in a private directory, starts the kernel as a session leader,
prints one JSON line (ports, key, pid), then waits. Lines on stdin signal the kernel's process
group ("INT", "KILL"); end of stdin (the SSH connection closed, the daemon died) ends the kernel,
so no kernel is left orphaned on the host.
"""

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


def main():
    cwd, module = os.path.expanduser(sys.argv[1]), sys.argv[2]
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
    info = dict(zip(("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port"), ports))
    info.update(ip="127.0.0.1", transport="tcp", key=secrets.token_hex(32), signature_scheme="hmac-sha256")
    runtime = tempfile.mkdtemp(prefix="ipykeep-")
    cfile = os.path.join(runtime, "kernel.json")
    fd = os.open(cfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(info, fh)
    env = dict(os.environ, JPY_PARENT_PID=str(os.getpid()), PYDEVD_DISABLE_FILE_VALIDATION="1")
    env.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    try:
        kernel = subprocess.Popen(
            [sys.executable, "-m", module, "-f", cfile],
            cwd=cwd, env=env, stdin=subprocess.DEVNULL, start_new_session=True,
        )
    except OSError as exc:
        shutil.rmtree(runtime, ignore_errors=True)
        print(json.dumps({"error": "cannot start %s: %s" % (sys.executable, exc)}), flush=True)
        return 2
    print(json.dumps(dict(info, pid=kernel.pid)), flush=True)

    def signal_group(sig):
        try:
            os.killpg(kernel.pid, sig)
        except OSError:
            pass

    def commands():
        for line in sys.stdin:
            word = line.strip()
            if word == "INT":
                signal_group(signal.SIGINT)
            elif word == "KILL":
                signal_group(signal.SIGKILL)
        # The link is gone: stop the kernel, gently first.
        signal_group(signal.SIGTERM)
        deadline = time.time() + 3
        while kernel.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        signal_group(signal.SIGKILL)

    threading.Thread(target=commands, daemon=True).start()
    code = kernel.wait()
    shutil.rmtree(runtime, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
