"""Model prices and the cost of usage, in integer nano-dollars.

Owns the price table (`pricing.yaml` beside this module, plus overrides from
config) and the arithmetic that turns an API `usage` into money.

Invariants:
* money is an `int` of nano-dollars (1e-9 USD) everywhere; a rate of $X per
  million tokens is X*1000 nano-dollars per token, so three decimal places of
  a quoted rate are exact. `nanos_to_usd` exists for JSON output only.
* an unknown model, or a date before a model's first priced period, gives
  `None` — never a guessed price.
* a rate applies from its `effective` date (00:00 UTC) until the next period's;
  a prompt-size band bills the whole request at its rates.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timezone
from decimal import Decimal, InvalidOperation
import difflib
import functools
from pathlib import Path
import re
from typing import NoReturn

from khaelor.errors import ConfigError

NANOS_PER_USD = 1_000_000_000
RATE_KEYS = ("input", "output", "cache_write_5m", "cache_write_1h", "cache_read")
PRICING_FILE = Path(__file__).with_name("pricing.yaml")
_DATED_ID = re.compile(r"^(?P<base>.+)-\d{8}$")


@dataclass(frozen=True)
class Rates:
    """The price of each kind of token of one request, in nano-dollars per token."""

    input: int
    """Uncached input tokens (after the last cache breakpoint)."""
    output: int
    """Output tokens, thinking included."""
    cache_write_5m: int
    """Tokens written to the cache with the 5-minute TTL."""
    cache_write_1h: int
    """Tokens written to the cache with the 1-hour TTL."""
    cache_read: int
    """Tokens read from the cache."""


@dataclass(frozen=True)
class Band:
    """Rates for requests whose prompt is at most `max_prompt_tokens`."""

    max_prompt_tokens: int | None
    """Inclusive upper bound of the prompt size; None for the last, open band."""
    rates: Rates
    """What every token of such a request costs."""


@dataclass(frozen=True)
class Period:
    """The prices of a model from one date on."""

    effective: date | None
    """First day (UTC) these prices apply; None means since before any record."""
    bands: tuple[Band, ...]
    """Prompt-size bands in increasing order; a model without bands has one open band."""

    def rates(self, prompt_tokens: int) -> Rates:
        """The band's rates for a request with this prompt size."""
        for band in self.bands:
            if band.max_prompt_tokens is None or prompt_tokens <= band.max_prompt_tokens:
                return band.rates
        raise AssertionError("the last band is open")  # guaranteed by parsing


@dataclass(frozen=True)
class ModelPrice:
    """The price history of one model, oldest period first."""

    periods: tuple[Period, ...]
    """Periods sorted by date; only the first may lack an effective date."""

    def rates(self, at: datetime, prompt_tokens: int) -> Rates | None:
        """Rates in force at `at` (naive means UTC); None before the first period."""
        day = _utc_day(at)
        current = None
        for period in self.periods:
            if period.effective is None or period.effective <= day:
                current = period
        return current.rates(prompt_tokens) if current else None


class PriceTable:
    """Prices by model id: the built-in table with config overrides on top."""

    def __init__(self, models: Mapping[str, ModelPrice]):
        self.models = dict(models)

    @classmethod
    def load(cls, overrides: Mapping | None = None) -> "PriceTable":
        """The built-in table; each override (raw entry or ModelPrice) replaces a model's whole entry."""
        overrides = dict(overrides or {})
        raw = {name: entry for name, entry in overrides.items() if not isinstance(entry, ModelPrice)}
        parsed = parse_prices(raw, lambda keys: "pricing override", ("pricing",))
        return cls({**_builtin_prices(), **{name: parsed.get(name, entry) for name, entry in overrides.items()}})

    def price(self, model: str) -> ModelPrice | None:
        """The entry for `model`, or for its base id when it carries a date suffix."""
        if model in self.models:
            return self.models[model]
        dated = _DATED_ID.match(model)
        return self.models.get(dated["base"]) if dated else None

    def rates(self, model: str, at: datetime, prompt_tokens: int) -> Rates | None:
        """Rates for one request of `model` made at `at`; None = unknown price."""
        price = self.price(model)
        return price.rates(at, prompt_tokens) if price else None


def usage_cost_nanos(usage: Mapping, rates: Rates) -> int:
    """The cost of one response's usage, in nano-dollars."""
    write_5m, write_1h = _cache_writes(usage)
    return (rates.input * _count(usage, "input_tokens")
            + rates.output * _count(usage, "output_tokens")
            + rates.cache_write_5m * write_5m
            + rates.cache_write_1h * write_1h
            + rates.cache_read * _count(usage, "cache_read_input_tokens"))


def prompt_tokens(usage: Mapping) -> int:
    """The request's whole prompt: uncached input + cache read + cache write."""
    return _count(usage, "input_tokens") + _count(usage, "cache_read_input_tokens") + sum(_cache_writes(usage))


def format_usd(nanos: int | None) -> str:
    """`$1.2346` (4 decimals, half up); tiny non-zero amounts keep 2 significant digits; None is `n/a`."""
    if nanos is None:
        return "n/a"
    sign, n = ("-" if nanos < 0 else ""), abs(nanos)
    units = _round_half_up(n, NANOS_PER_USD // 10_000)
    if units or not n:
        return f"{sign}${units // 10_000}.{units % 10_000:04d}"
    # Below $0.00005 four decimals would show a real cost as $0.0000.
    step = 10 ** max(len(str(n)) - 2, 0)
    rounded = _round_half_up(n, step) * step
    return f"{sign}$0.{rounded:09d}".rstrip("0")


def nanos_to_usd(nanos: int) -> float:
    """Dollars as a float, for JSON output only — never for arithmetic."""
    return nanos / NANOS_PER_USD


def parse_prices(data, where: Callable[[tuple], str], prefix: tuple = ()) -> dict[str, ModelPrice]:
    """Validate a mapping of model id → entry; `where(keys)` names the place of an error.

    An entry is a list of periods, or one period written as a mapping. A period
    holds an optional `effective` date and either the five rates (quoted
    decimal USD per million tokens) or `bands`: a list of rate sets, each but
    the last with an inclusive `max_prompt_tokens`.
    """
    return _PriceParser(where).table(data, prefix)


class _PriceParser:
    """Turns plain YAML data into ModelPrice objects, raising one-line ConfigErrors."""

    def __init__(self, where: Callable[[tuple], str]):
        self.where = where

    def table(self, data, keys: tuple) -> dict[str, ModelPrice]:
        if data is None:
            return {}
        if not isinstance(data, Mapping):
            self.fail(keys, f"must be a mapping of model ids to prices, not {_describe(data)}")
        for model in data:
            if not isinstance(model, str) or not model.strip():
                self.fail(keys, f"has a model id that is not a name: {model!r}")
        return {model: self.model(entry, keys + (model,)) for model, entry in data.items()}

    def model(self, entry, keys: tuple) -> ModelPrice:
        if entry == []:
            self.fail(keys, "must list at least one price period")
        if isinstance(entry, Mapping):
            items = [(keys, entry)]
        elif isinstance(entry, list):
            items = [(keys + (index,), period) for index, period in enumerate(entry)]
        else:
            self.fail(keys, f"must be a list of price periods, not {_describe(entry)}")
        periods = [self.period(period, place) for place, period in items]
        undated = [place for (place, _), period in zip(items, periods) if period.effective is None]
        if len(undated) > 1:
            self.fail(undated[1], "needs an 'effective' date: only the first period may omit it")
        days = [period.effective for period in periods if period.effective]
        if len(set(days)) != len(days):
            self.fail(keys, "has two periods with the same 'effective' date")
        return ModelPrice(tuple(sorted(periods, key=lambda p: p.effective or date.min)))

    def period(self, data, keys: tuple) -> Period:
        self.check_keys(data, keys, {"effective", "bands", *RATE_KEYS})
        effective = self.effective(data["effective"], keys + ("effective",)) if "effective" in data else None
        if "bands" not in data:
            return Period(effective, (Band(None, self.rates(data, keys)),))
        if any(key in data for key in RATE_KEYS):
            self.fail(keys, "has both 'bands' and rates; put the rates inside the bands")
        return Period(effective, self.bands(data["bands"], keys + ("bands",)))

    def bands(self, data, keys: tuple) -> tuple[Band, ...]:
        if not isinstance(data, list) or not data:
            self.fail(keys, f"must be a non-empty list of bands, not {_describe(data)}")
        bands, floor = [], 0
        for i, band in enumerate(data):
            here = keys + (i,)
            self.check_keys(band, here, {"max_prompt_tokens", *RATE_KEYS})
            last = i == len(data) - 1
            limit = band.get("max_prompt_tokens")
            if last and limit is not None:
                self.fail(here, "is the last band: it must not have 'max_prompt_tokens'")
            if not last and (not _is_int(limit) or limit <= floor):
                self.fail(here + ("max_prompt_tokens",), f"must be an integer above {floor}, not {_describe(limit)}")
            bands.append(Band(limit, self.rates(band, here)))
            floor = limit or floor
        return tuple(bands)

    def rates(self, data: Mapping, keys: tuple) -> Rates:
        missing = [key for key in RATE_KEYS if key not in data]
        if missing:
            self.fail(keys, f"is missing {', '.join(repr(key) for key in missing)}")
        return Rates(**{key: self.rate(data[key], keys + (key,)) for key in RATE_KEYS})

    def rate(self, value, keys: tuple) -> int:
        """USD per million tokens as a quoted decimal → nano-dollars per token."""
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            self.fail(keys, f'must be a quoted decimal string of USD per million tokens such as "0.125", not {_describe(value)}')
        try:
            amount = Decimal(str(value).strip())
        except InvalidOperation:
            self.fail(keys, f'must be a decimal number of USD per million tokens such as "0.125", not {value!r}')
        nanos = amount * 1000
        if not amount.is_finite() or amount < 0 or nanos != nanos.to_integral_value():
            self.fail(keys, f"must be a non-negative amount with at most 3 decimal places, not {value!r}")
        return int(nanos)

    def effective(self, value, keys: tuple) -> date:
        if isinstance(value, str):
            try:
                return date.fromisoformat(value.strip())
            except ValueError:
                pass
        elif isinstance(value, date) and not isinstance(value, datetime):
            return value
        self.fail(keys, f"must be a date such as 2026-10-07, not {_describe(value)}")

    def check_keys(self, data, keys: tuple, allowed: set[str]) -> None:
        if not isinstance(data, Mapping):
            self.fail(keys, f"must be a mapping, not {_describe(data)}")
        for key in data:
            if key not in allowed:
                close = difflib.get_close_matches(str(key), sorted(allowed), n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                raise ConfigError(f"{self.where(keys + (key,))}: unknown key '{_dotted(keys + (key,))}'{hint}")

    def fail(self, keys: tuple, problem: str) -> NoReturn:
        subject = f"'{_dotted(keys)}' " if keys else "the price table "
        raise ConfigError(f"{self.where(keys)}: {subject}{problem}")


@functools.cache
def _builtin_prices() -> dict[str, ModelPrice]:
    from khaelor.config import read_yaml  # the YAML edge lives in config; imported late to avoid a cycle

    document = read_yaml(PRICING_FILE)
    if document is None:
        raise ConfigError(f"{PRICING_FILE}: the built-in price table is missing")
    return parse_prices(document.data, document.where)


def _cache_writes(usage: Mapping) -> tuple[int, int]:
    """(5m, 1h) cache-write tokens; tokens the TTL split does not cover are billed at 5m."""
    total = _count(usage, "cache_creation_input_tokens")
    split = usage.get("cache_creation")
    if not isinstance(split, Mapping):
        return total, 0
    write_5m = _count(split, "ephemeral_5m_input_tokens")
    write_1h = _count(split, "ephemeral_1h_input_tokens")
    return write_5m + max(total - write_5m - write_1h, 0), write_1h


def _count(usage: Mapping, key: str) -> int:
    value = usage.get(key)
    if value is None:
        return 0
    if not _is_int(value) or value < 0:
        raise ValueError(f"usage field '{key}' must be a non-negative integer, not {value!r}")
    return value


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _round_half_up(n: int, step: int) -> int:
    return (n + step // 2) // step


def _utc_day(at: datetime) -> date:
    if at.tzinfo is None:
        return at.date()
    return at.astimezone(timezone.utc).date()


def _dotted(keys: tuple) -> str:
    text = ""
    for key in keys:
        text += f"[{key}]" if isinstance(key, int) else (f".{key}" if text else str(key))
    return text


def _describe(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"bool ({str(value).lower()})"
    kind = {dict: "mapping", list: "list"}.get(type(value), type(value).__name__)
    return kind if isinstance(value, (dict, list)) else f"{kind} ({value!r})"
