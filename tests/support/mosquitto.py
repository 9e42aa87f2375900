"""A Mosquitto of one's own (a free port, its own config) for tests, benchmarks and development,
which can be stopped and restarted. Needs the `mosquitto` binary (Debian package mosquitto)."""

from __future__ import annotations

import shutil
import socket
import subprocess
from pathlib import Path

from tests.support.waits import wait_until


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


class LocalBroker:
    """A broker process of one's own on a port of 127.0.0.1: start, stop, restart."""

    port: int
    _process: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self) -> None:
        self._process = subprocess.Popen(self.command(), stderr=subprocess.DEVNULL)
        wait_until(lambda: port_open(self.port), what=f"{type(self).__name__} to listen")

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(timeout=10)
            self._process = None
        wait_until(lambda: not port_open(self.port), what=f"{type(self).__name__} to stop")

    def restart(self) -> None:
        self.stop()
        self.start()


class LocalMosquitto(LocalBroker):
    def __init__(
        self,
        folder: Path,
        port: int,
        acl_file: Path | None = None,
        passwords: dict[str, str] | None = None,
        tls: tuple[Path, Path] | None = None,
    ) -> None:
        """`passwords` (user -> password): only those users may connect, each with its own.
        `tls` (certificate, key): the listener speaks TLS only."""
        self.port = port
        self.config = folder / "mosquitto.conf"
        anonymous = "false" if passwords else "true"
        lines = [f"listener {port} 127.0.0.1", f"allow_anonymous {anonymous}", "persistence false"]
        if tls is not None:
            lines += [f"certfile {tls[0]}", f"keyfile {tls[1]}", "tls_version tlsv1.2"]
            # As with a password file below: the key is private to whoever made it.
            lines.append("user root")
        if acl_file is not None:
            lines.append(f"acl_file {acl_file}")
        if passwords:
            password_file = folder / "mosquitto.passwd"
            password_file.write_text("")
            for user, password in passwords.items():
                subprocess.run(
                    [
                        shutil.which("mosquitto_passwd") or "/usr/bin/mosquitto_passwd",
                        "-b",
                        str(password_file),
                        user,
                        password,
                    ],
                    check=True,
                    capture_output=True,
                )
            lines.append(f"password_file {password_file}")
            # Mosquitto started as root reads the password file after dropping to its own
            # user, which cannot enter a private temporary folder; a test broker may stay root
            # (started by anyone else, this line changes nothing).
            if "user root" not in lines:
                lines.append("user root")
        self.config.write_text("\n".join(lines) + "\n")
        self._binary = shutil.which("mosquitto") or "/usr/sbin/mosquitto"

    def command(self) -> list[str]:
        return [self._binary, "-c", str(self.config)]
