"""The fleet as the purchase policy sees it: one `InstanceView` per instance EC2 lists, its GPUs
in use, its price and how long it has been idle; instances being emptied for scale-in are left
out (no capacity to plan with)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from autoscaler.ec2.ports import ObservedInstance
from autoscaler.instances import InstanceBook
from autoscaler.market.quotes import MarketSnapshot
from autoscaler.snapshot import InstanceView
from kernel.instance_types import kind_of


def instance_views(
    instances: Iterable[ObservedInstance],
    leaving: set[str],
    book: InstanceBook,
    busy: Mapping[str, int],
    market: MarketSnapshot,
    now: datetime,
) -> list[InstanceView]:
    views = []
    for instance in instances:
        if instance.instance_id in leaving:
            continue
        in_use = busy.get(instance.instance_id, 0)
        idle_since = book.idle_since(instance.instance_id, in_use > 0, now)
        quote = market.quote(instance.pool)
        # An adopted instance's launch price is unknown: today's price of its pool.
        launch_price = book.records[instance.instance_id].price_per_hour
        price = launch_price or (quote.price_per_hour if quote else 0)
        views.append(
            InstanceView(
                instance.instance_id,
                instance.pool,
                price,
                instance.launched_at,
                kind_of(instance.pool.instance_type).gpus,
                busy_gpus=in_use,
                idle_since=idle_since,
                unsaved_work=in_use > 0,
            )
        )
    return views
