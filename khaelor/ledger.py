"""The usage ledger: what a session consumed and cost, rebuilt from its `usage` records (SPEC §8).

Each record is priced at the rate in force at its own time; money is integer
nano-dollars (micro-dollars and a remainder) and never a float until display.
A model without a price contributes real token counts and no money: the
ledger then reports a *known subtotal*, as it does when any attempt's usage
is uncertain. The cost ceiling is decided here too, before any dispatch.

A session's usage records only ever grow, so a running ledger is kept by
`update`, which folds just the records added since its last call: a check
before every model call costs one record, not a rebuild of the whole session.
"""

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Mapping

from khaelor import cost

KINDS = ("input", "output", "cache_write_5m", "cache_write_1h", "cache_read")


@dataclass
class Bucket:
    """Tokens by kind and money for a slice of the usage."""

    tokens: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    nanos: int = 0
    unpriced: int = 0
    requests: int = 0

    def add(self, usage: dict, nanos: int | None) -> None:
        write_5m, write_1h = _writes(usage)
        for kind, count in zip(KINDS, (usage.get("input_tokens"), usage.get("output_tokens"), write_5m, write_1h,
                                       usage.get("cache_read_input_tokens"))):
            self.tokens[kind] += count or 0
        self.requests += 1
        if nanos is None:
            self.unpriced += 1
        else:
            self.nanos += nanos

    def money(self) -> str:
        """The cost, `n/a` when nothing of it is priced, marked known-subtotal when part is."""
        if self.unpriced and not self.nanos:
            return "n/a"
        text = cost.format_usd(self.nanos)
        return f"{text} known subtotal" if self.unpriced else text


@dataclass
class Ledger:
    """Totals of a session, per model and per operation."""

    total: Bucket = field(default_factory=Bucket)
    by_model: dict[str, Bucket] = field(default_factory=dict)
    by_operation: dict[str, Bucket] = field(default_factory=dict)
    uncertain: int = 0
    unpriced_models: set[str] = field(default_factory=set)
    folded: int = 0
    """How many usage records the totals hold (see `update`)."""

    @property
    def complete(self) -> bool:
        """Whether the total is the whole cost (every attempt known, every model priced)."""
        return not self.uncertain and not self.unpriced_models

    def cache_hit_rate(self) -> float | None:
        """Cache reads over all prompt tokens; None before any usage."""
        tokens = self.total.tokens
        prompt = tokens["input"] + tokens["cache_read"] + tokens["cache_write_5m"] + tokens["cache_write_1h"]
        return tokens["cache_read"] / prompt if prompt else None


def build(usage_records: list[dict], uncertain_records: list[dict], overrides: Mapping | None = None) -> Ledger:
    """The ledger of a session's records."""
    return update(Ledger(), usage_records, uncertain_records, overrides)


def update(ledger: Ledger, usage_records: list[dict], uncertain_records: list[dict],
           overrides: Mapping | None = None) -> Ledger:
    """`ledger` with the usage records after its first `folded` ones added; the lists must only have grown."""
    ledger.uncertain = len(uncertain_records)
    if ledger.folded == len(usage_records):
        return ledger  # nothing new: no price table to build (the status line asks after every turn)
    table = cost.PriceTable.load(overrides)
    for record in usage_records[ledger.folded:]:
        _add(ledger, record, table)
    ledger.folded = len(usage_records)
    return ledger


def _add(ledger: Ledger, record: dict, table: cost.PriceTable) -> None:
    usage = record.get("usage") or {}
    model = record.get("model") or "?"
    rates = table.rates(model, _moment(record["ts"]), cost.prompt_tokens(usage))
    nanos = cost.usage_cost_nanos(usage, rates) if rates else None
    if nanos is None:
        ledger.unpriced_models.add(model)
    for bucket in (ledger.total, ledger.by_model.setdefault(model, Bucket()),
                   ledger.by_operation.setdefault(record.get("operation") or "turn", Bucket())):
        bucket.add(usage, nanos)


def usd_to_nanos(amount: float | str) -> int:
    """A dollar amount from config or the command line as exact nano-dollars."""
    return int(Decimal(str(amount)) * cost.NANOS_PER_USD)


def ceiling_refusal(ledger: Ledger, max_nanos: int | None, next_model: str,
                    overrides: Mapping | None = None) -> str | None:
    """Why the next model call must not be made under a cost ceiling, or None."""
    if max_nanos is None:
        return None
    ceiling = cost.format_usd(max_nanos)
    if ledger.uncertain:
        return (f"cost ceiling {ceiling}: {ledger.uncertain} attempt(s) have unknown usage, "
                "so the session cannot be shown to be under the ceiling")
    unpriced = ledger.unpriced_models | ({next_model} if cost.PriceTable.load(overrides).price(next_model) is None else set())
    if unpriced:
        return f"cost ceiling {ceiling}: no price is known for {', '.join(sorted(unpriced))}"
    if ledger.total.nanos >= max_nanos:
        return f"cost ceiling {ceiling} reached: the session has cost {cost.format_usd(ledger.total.nanos)}"
    return None


def report(ledger: Ledger) -> list[str]:
    """The `/cost` lines."""
    total = ledger.total
    money = total.money()
    if ledger.uncertain and "known subtotal" not in money:
        money += " known subtotal"
    lines = [f"total        {money}" + (f" — {ledger.uncertain} uncertain attempt(s)" if ledger.uncertain else ""),
             "tokens       " + ", ".join(f"{kind.replace('_', ' ')} {total.tokens[kind]:,}" for kind in KINDS)]
    rate = ledger.cache_hit_rate()
    lines.append(f"cache hits   {'n/a' if rate is None else f'{rate:.1%}'} of prompt tokens read from cache")
    for title, buckets in (("model", ledger.by_model), ("operation", ledger.by_operation)):
        for name, bucket in sorted(buckets.items()):
            lines.append(f"{title:<12} {name}: {bucket.money()} · {bucket.requests} request(s)")
    return lines


def as_json(ledger: Ledger) -> dict:
    """The ledger as plain data for JSON output (money as USD numbers and exact nano-dollars)."""
    def bucket(b: Bucket) -> dict:
        return {"tokens": dict(b.tokens), "nanos": b.nanos, "usd": cost.nanos_to_usd(b.nanos),
                "unpriced_requests": b.unpriced, "requests": b.requests}

    return {"total": bucket(ledger.total), "complete": ledger.complete, "uncertain_attempts": ledger.uncertain,
            "unpriced_models": sorted(ledger.unpriced_models), "cache_hit_rate": ledger.cache_hit_rate(),
            "by_model": {k: bucket(v) for k, v in ledger.by_model.items()},
            "by_operation": {k: bucket(v) for k, v in ledger.by_operation.items()}}


def _writes(usage: dict) -> tuple[int, int]:
    split = usage.get("cache_creation") or {}
    write_1h = split.get("ephemeral_1h_input_tokens") or 0
    return (usage.get("cache_creation_input_tokens") or 0) - write_1h, write_1h


def _moment(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
