"""A throwaway OpenSSH server on loopback for the SSH kernel tests.

It runs as the current user with a host key and a client key generated in a temporary
directory, on a random free port; the client side is an ssh config file (``ssh -F``) naming
that key and a private known-hosts file, so the user's own ~/.ssh is never read or changed.
"""

from __future__ import annotations

import getpass
import os
import shutil
import subprocess
import time
from pathlib import Path

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
HOST_ALIAS = "ipykeep-test-host"


def unavailable() -> str | None:
    """Why a loopback sshd cannot run here (None: it can)."""
    if not os.path.exists(SSHD):
        return "no sshd (Debian: apt-get install openssh-server; .ci/run installs it)"
    for tool in ("ssh", "ssh-keygen"):
        if shutil.which(tool) is None:
            return f"no {tool} on PATH (Debian: openssh-client)"
    if os.getuid() == 0 and not os.path.isdir("/run/sshd"):
        try:
            os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege-separation dir
        except OSError as exc:
            return f"cannot create /run/sshd: {exc}"
    return None


class LoopbackSshd:
    def __init__(self, tmp: Path, port: int) -> None:
        self.tmp = tmp
        self.port = port
        self.user = getpass.getuser()
        tmp.chmod(0o700)
        for name in ("host_key", "client_key"):
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp / name)], check=True
            )
        (tmp / "authorized_keys").write_text((tmp / "client_key.pub").read_text())
        (tmp / "authorized_keys").chmod(0o600)
        (tmp / "sshd_config").write_text(
            f"Port {port}\nListenAddress 127.0.0.1\nHostKey {tmp / 'host_key'}\n"
            f"AuthorizedKeysFile {tmp / 'authorized_keys'}\nPidFile {tmp / 'sshd.pid'}\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
            "StrictModes no\n"
            "PermitRootLogin prohibit-password\nAllowTcpForwarding local\nGatewayPorts no\n"
            "X11Forwarding no\nPermitTunnel no\nLogLevel ERROR\n"
            # tests open many multiplexed sessions and kill masters mid-flight: sshd's defaults
            # (10 sessions a connection, random drops from 10 pending logins) refuse some under load
            "MaxSessions 100\nMaxStartups 100\n"
        )
        host_pub = (tmp / "host_key.pub").read_text().split()
        (tmp / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_pub[0]} {host_pub[1]}\n")
        self.config = tmp / "ssh_config"
        self.config.write_text(self.client_config(tmp / "client_key"))
        self.log = open(tmp / "sshd.log", "wb")
        self.proc = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(tmp / "sshd_config")],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 15
        while True:
            probe = subprocess.run(
                ["ssh", "-F", str(self.config), HOST_ALIAS, "true"],
                capture_output=True,
                text=True,
                timeout=15,
            )
            if probe.returncode == 0:
                return
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(
                    f"the loopback sshd did not accept us: {probe.stderr.strip()} "
                    f"{(tmp / 'sshd.log').read_text()[-1000:]}"
                )
            time.sleep(0.2)

    def client_config(self, key: Path) -> str:
        return (
            f"Host {HOST_ALIAS}\n  HostName 127.0.0.1\n  Port {self.port}\n  User {self.user}\n"
            f"  IdentityFile {key}\n  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {self.tmp / 'known_hosts'}\n"
            "  StrictHostKeyChecking yes\n  BatchMode yes\n  LogLevel ERROR\n"
        )

    def url(self, path: Path | str) -> str:
        return f"ssh://{HOST_ALIAS}{path}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except Exception:
                self.proc.kill()
        self.log.close()
