"""The rehearsal's VPC on one machine: a Linux bridge for the subnet, and a network namespace
per task with an address of its own (ECS's awsvpc mode), so two tasks may listen on the same
port, as they do in Fargate. The bridge's own address stands for everything outside the tasks:
the AWS endpoint, the database's endpoint and the broker's load balancer."""

from __future__ import annotations

import subprocess
import uuid
from dataclasses import dataclass, field


def ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"ip {' '.join(args)}: {done.stderr}"


@dataclass
class TaskNetwork:
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:5])
    subnet: int = field(default_factory=lambda: 100 + uuid.uuid4().int % 150)
    namespaces: list[str] = field(default_factory=list)

    @property
    def bridge(self) -> str:
        return f"ffbr{self.tag}"

    @property
    def gateway(self) -> str:
        return f"10.{self.subnet}.0.1"

    def address(self, index: int) -> str:
        """The address of the `index`th namespace added."""
        return f"10.{self.subnet}.0.{10 + index}"

    def open(self) -> None:
        ip("link", "add", self.bridge, "type", "bridge")
        ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        ip("link", "set", self.bridge, "up")

    def add(self) -> str:
        """A new task's namespace, with its own address on the bridge; its name."""
        index = len(self.namespaces)
        name = f"ff{self.tag}t{index}"
        host_end, task_end = f"ffh{self.tag}{index}", f"fft{self.tag}{index}"
        ip("netns", "add", name)
        self.namespaces.append(name)
        ip("link", "add", host_end, "type", "veth", "peer", "name", task_end, "netns", name)
        ip("link", "set", host_end, "master", self.bridge)
        ip("link", "set", host_end, "up")
        ip("-n", name, "addr", "add", f"{self.address(index)}/24", "dev", task_end)
        ip("-n", name, "link", "set", task_end, "up")
        ip("-n", name, "link", "set", "lo", "up")
        ip("-n", name, "route", "add", "default", "via", self.gateway)
        return name

    def close(self) -> None:
        for name in self.namespaces:
            subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True, check=False)
