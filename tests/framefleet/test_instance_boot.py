"""The local fleet runner boots an instance from its user data: what the script writes for the
agent becomes the worker's settings, its /etc/framefleet files found under the instance's root
folder; a script that fails leaves no worker."""

from __future__ import annotations

from pathlib import Path

import pytest

from framefleet.instance_boot import BootFailed, InstanceBoot, agent_settings


def test_the_agent_settings_are_read_from_what_the_user_data_wrote(tmp_path: Path) -> None:
    written = (
        "FRAMEFLEET_WORKER_MQTT_HOST=mqtt.example.com\n"
        "FRAMEFLEET_WORKER_MODEL_REGISTRY=/etc/framefleet/models.json\n"
        "OTHER=ignored\n"
        "not a setting\n"
    )
    assert agent_settings(written, tmp_path) == {
        "FRAMEFLEET_WORKER_MQTT_HOST": "mqtt.example.com",
        "FRAMEFLEET_WORKER_MODEL_REGISTRY": str(tmp_path / "etc" / "framefleet" / "models.json"),
    }


async def test_a_script_runs_against_the_instance_root_with_its_imds(tmp_path: Path) -> None:
    script = (
        b'#!/usr/bin/env bash\nset -eu\ninstall -d "$FRAMEFLEET_ROOT/etc/framefleet"\n'
        b'echo "FRAMEFLEET_WORKER_IMDS=$FRAMEFLEET_IMDS_URL" '
        b'> "$FRAMEFLEET_ROOT/etc/framefleet/worker.env"\n'
        b'"$FRAMEFLEET_SYSTEMCTL" start framefleet-worker.service\n'
    )

    async def user_data(instance_id: str) -> bytes | None:
        return script if instance_id == "i-0123456789abcdef0" else None

    boot = InstanceBoot(user_data)
    settings = await boot.agent_settings("i-0123456789abcdef0", tmp_path, "http://127.0.0.1:1")
    assert settings == {"FRAMEFLEET_WORKER_IMDS": "http://127.0.0.1:1"}
    with pytest.raises(BootFailed, match="no user data"):
        await boot.agent_settings("i-0fffffffffffffff0", tmp_path, "http://127.0.0.1:1")


async def test_a_failing_script_is_a_failed_boot(tmp_path: Path) -> None:
    async def user_data(instance_id: str) -> bytes | None:
        return b"#!/usr/bin/env bash\nexit 3\n"

    with pytest.raises(BootFailed, match="exited 3"):
        await InstanceBoot(user_data).agent_settings("i-0123456789abcdef0", tmp_path, "x")
