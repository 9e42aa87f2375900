"""A spot trace of any instance type replays with its own prices, or says what is missing: the
format is parsed strictly, capacity counts mean "available if > 0" everywhere, zones of other
lengths or spacings are refused, and the published JSON Schema is current."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from autoscaler.market.trace import load_trace
from autoscaler.market.trace_format import trace_json_schema
from kernel.errors import ConfigurationError
from tests.support.paths import DOCS, TEST_TRACES

SCHEMA_FILE = DOCS / "trace-format.schema.json"
SHIPPED = TEST_TRACES / "v100-slice"


def write_zone(folder: Path, name: str, data: list[int], **metadata: Any) -> Path:
    folder.mkdir(exist_ok=True)
    body: dict[str, Any] = {"metadata": {"gap_seconds": 600, **metadata}, "data": data}
    if "prices" in metadata:
        body["prices"] = body["metadata"].pop("prices")
    path = folder / f"{name}.json"
    path.write_text(json.dumps(body))
    return path


def test_an_h100_trace_with_node_counts_replays_at_its_own_prices(tmp_path: Path) -> None:
    write_zone(tmp_path, "us-east-1a_p5.48xlarge", [0, 3, 16, 0], prices=[30.0, 31.0, 29.5, 30.0])
    write_zone(tmp_path, "us-west-2b_p5.48xlarge", [1, 0, 0, 2], spot_price=28.0)
    trace = load_trace(tmp_path)
    east, west = trace.zones["us-east-1a"], trace.zones["us-west-2b"]
    assert east.available == (0, 1, 1, 0)  # a count of instances: available when > 0
    assert west.available == (1, 0, 0, 1)
    assert west.prices == (28.0,) * 4  # a constant price, as the metadata says
    assert east.on_demand_price == 55.04  # the dated fallback table's p5.48xlarge
    assert east.gpus == 8
    assert trace.on_demand_price("p5.48xlarge") == 55.04


def test_a_type_nobody_prices_says_what_to_add(tmp_path: Path) -> None:
    write_zone(tmp_path, "us-east-1a_g7.xlarge", [1, 1], spot_price=1.0)
    with pytest.raises(ConfigurationError, match=r"metadata\.on_demand_price"):
        load_trace(tmp_path)
    write_zone(tmp_path, "us-east-1a_g7.xlarge", [1, 1], spot_price=1.0, on_demand_price=2.5)
    with pytest.raises(ConfigurationError, match=r"metadata\.gpus"):
        load_trace(tmp_path)
    write_zone(
        tmp_path, "us-east-1a_g7.xlarge", [1, 1], spot_price=1.0, on_demand_price=2.5, gpus=1
    )
    assert load_trace(tmp_path).zones["us-east-1a"].on_demand_price == 2.5


@pytest.mark.parametrize(
    ("second", "problem"),
    [
        ({"data": [1, 1, 1], "spot_price": 1.0}, "different lengths"),
        ({"data": [1, 1], "spot_price": 1.0, "gap_seconds": 300}, "different tick spacings"),
        ({"data": [1, 1]}, "no spot prices"),
        ({"data": [1, 1], "prices": [1.0]}, "1 spot prices for 2 ticks"),
        ({"data": [1, -1], "spot_price": 1.0}, "not a zone trace"),
        ({"data": [1, 1], "prices": [1.0, 0.0]}, "not a zone trace"),
    ],
)
def test_a_trace_that_cannot_be_replayed_as_it_is_is_refused(
    tmp_path: Path, second: dict[str, Any], problem: str
) -> None:
    write_zone(tmp_path, "us-east-1a_p3.2xlarge", [1, 0], spot_price=1.0)
    data = second.pop("data")
    write_zone(tmp_path, "us-east-1c_p3.2xlarge", data, **second)
    with pytest.raises(ConfigurationError, match=problem):
        load_trace(tmp_path)


def test_the_published_schema_is_current_and_the_shipped_traces_follow_it() -> None:
    generated = json.dumps(trace_json_schema(), indent=2, sort_keys=True) + "\n"
    assert SCHEMA_FILE.read_text() == generated, "run `make schema` and commit the schema"
    for path in SHIPPED.glob("us-*.json"):
        jsonschema.validate(json.loads(path.read_text()), trace_json_schema())


def test_a_shared_price_file_is_checked_as_the_zone_files_are(tmp_path: Path) -> None:
    write_zone(tmp_path, "us-east-1a_p3.2xlarge", [1, 0])
    (tmp_path / "spot_prices.json").write_text(json.dumps({"us-east-1a_p3.2xlarge": [0.9, -1]}))
    with pytest.raises(ConfigurationError, match="above 0"):
        load_trace(tmp_path)
    (tmp_path / "spot_prices.json").write_text(json.dumps({"us-east-1a_p3.2xlarge": [0.9, 1]}))
    assert load_trace(tmp_path).zones["us-east-1a"].prices == (0.9, 1.0)
