"""A cgroup v2 group per job, inside the group systemd delegated to the agent (`Delegate=` in
framefleet-worker.service): a hard memory limit (the kernel kills the job's process, not the
agent, at `memory.max`) and a CPU weight. Where the host has no delegated cgroup v2 (cgroup v1,
no systemd, a container), `delegated_root` says None and the agent uses resource limits.

cgroup v2 lets a group either hold processes or hand controllers to child groups, not both: so
the agent first moves itself into a leaf `agent` group, then enables the controllers for the
job groups beside it.
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)
CGROUP_MOUNT = Path("/sys/fs/cgroup")
CONTROLLERS = ("memory", "cpu")


def own_group(proc_cgroup: str) -> str | None:
    """This process's group on a pure cgroup v2 host (one `0::/path` line), else None."""
    lines = [line for line in proc_cgroup.splitlines() if line.strip()]
    if len(lines) != 1 or not lines[0].startswith("0::"):
        return None
    return lines[0][3:]


def delegated_root(mount: Path = CGROUP_MOUNT, proc_cgroup: Path | None = None) -> Path | None:
    """The agent's delegated group, ready for job groups, or None where there is none."""
    proc_cgroup = proc_cgroup or Path(f"/proc/{os.getpid()}/cgroup")
    try:
        group = own_group(proc_cgroup.read_text())
        if group is None:
            return None
        base = mount / group.lstrip("/")
        available = (base / "cgroup.controllers").read_text().split()
        if not all(c in available for c in CONTROLLERS):
            return None
        if not os.access(base / "cgroup.subtree_control", os.W_OK):
            return None
        (base / "agent").mkdir(exist_ok=True)
        (base / "agent" / "cgroup.procs").write_text(str(os.getpid()))
        (base / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in CONTROLLERS))
    except OSError as error:
        log.info("no delegated cgroup v2 (%s): jobs get resource limits instead", error)
        return None
    return base


@dataclass(frozen=True)
class JobCgroup:
    path: Path

    @classmethod
    def create(cls, root: Path, name: str, memory_bytes: int | None, cpu_weight: int) -> JobCgroup:
        path = root / name
        path.mkdir()
        if memory_bytes is not None:
            (path / "memory.max").write_text(str(memory_bytes))
            (path / "memory.swap.max").write_text("0")
        (path / "cpu.weight").write_text(str(cpu_weight))
        return cls(path)

    def adopt(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(str(pid))

    def killed_for_memory(self) -> bool:
        with contextlib.suppress(OSError):
            for line in (self.path / "memory.events").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill" and int(value or 0) > 0:
                    return True
        return False

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            self.path.rmdir()
