"""The production broker, run locally: infra/mosquitto's config (its port, plugin path and data
folder moved for the test machine) started by the image's own entrypoint, so the first-start
path that creates the admin account is the one the deployment runs."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kernel.mqtt_link import LinkSettings
from tests.support.mosquitto import port_open
from tests.support.paths import INFRA
from tests.support.waits import wait_until

BROKER_IMAGE = INFRA / "mosquitto"
ADMIN_PASSWORD = "admin-secret-for-tests"
PLUGIN = "/usr/lib/x86_64-linux-gnu/mosquitto_dynamic_security.so"


def local_config(folder: Path, port: int) -> Path:
    config = (BROKER_IMAGE / "mosquitto.conf").read_text()
    plugin = next(Path("/usr/lib").glob("*/mosquitto_dynamic_security.so"), Path(PLUGIN))
    for pattern, line in [
        (r"^listener 1883$", f"listener {port} 127.0.0.1"),
        (r"^plugin .*$", f"plugin {plugin}"),
        (r"^plugin_opt_config_file .*$", f"plugin_opt_config_file {folder}/dynamic-security.json"),
        (r"^persistence_location .*$", f"persistence_location {folder}/"),
    ]:
        config, count = re.subn(pattern, line, config, flags=re.M)
        assert count == 1, pattern  # the production config still has the line the test moves
    # Started as root, Mosquitto drops to its own user, which cannot enter a test's folder.
    path = folder / "mosquitto.conf"
    path.write_text(config + "user root\n")
    return path


@contextmanager
def dynsec_broker(
    folder: Path, port: int, admin_password: str = ADMIN_PASSWORD, extra_config: str = ""
) -> Iterator[LinkSettings]:
    """Yields the admin's link settings while the broker runs; `extra_config` is appended to
    the production config (another listener, say)."""
    config = local_config(folder, port)
    config.write_text(config.read_text() + extra_config)
    env = {
        **os.environ,
        "MOSQUITTO_CONFIG": str(config),
        "MOSQUITTO_DYNSEC_FILE": str(folder / "dynamic-security.json"),
        "FRAMEFLEET_BROKER_ADMIN_PASSWORD": admin_password,
    }
    path = os.pathsep.join([env.get("PATH", ""), "/usr/sbin"])
    process = subprocess.Popen(
        [shutil.which("sh") or "/bin/sh", str(BROKER_IMAGE / "entrypoint.sh")],
        env={**env, "PATH": path},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: port_open(port), what="the broker to listen")
        yield LinkSettings(
            "127.0.0.1", port, "framefleet-autoscaler", "framefleet-autoscaler", admin_password
        )
    finally:
        process.terminate()
        process.wait(timeout=10)
