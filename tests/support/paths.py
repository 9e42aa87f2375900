"""Where the checkout's files are, so a test module's place in tests/ never matters."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).parents[2]  # not resolved: ../shared lies beside the checkout as named
DOCS = ROOT / "docs"
INFRA = ROOT / "infra"
TEST_DATA = ROOT / "tests" / "data"
TEST_TRACES = TEST_DATA / "traces"
SHARED_TRACES = ROOT.parent / "shared" / "traces"
ACL = INFRA / "mosquitto" / "acl"
