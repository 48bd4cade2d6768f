"""The price table and integer cost arithmetic."""

from datetime import datetime, timedelta, timezone

import pytest

from khaelor.cost import (ModelPrice, PriceTable, Rates, format_usd, nanos_to_usd, parse_prices, prompt_tokens,
                          usage_cost_nanos)
from khaelor.errors import ConfigError

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=timezone.utc)

# Reference table §7, $ per million tokens: input, output, 5m write, 1h write, cache read.
TABLE = {
    "claude-fable-5-2": ("8", "40", "10", "16", "0.20"),
    "claude-fable-5-1": ("10", "50", "12.50", "20", "0.25"),
    "claude-mythos-5-1": ("10", "50", "12.50", "20", "0.25"),
    "claude-opus-5-5": ("4", "20", "5", "8", "0.20"),
    "claude-sonnet-5-5": ("2", "10", "2.50", "4", "0.10"),
    "claude-haiku-5-5": ("0.10", "0.50", "0.125", "0.20", "0.01"),
    "claude-opus-5": ("5", "25", "6.25", "10", "0.50"),
    "claude-sonnet-5": ("2", "10", "2.50", "4", "0.20"),
    "claude-opus-4-8": ("5", "25", "6.25", "10", "0.50"),
    "claude-opus-4-7": ("5", "25", "6.25", "10", "0.50"),
    "claude-opus-4-6": ("5", "25", "6.25", "10", "0.50"),
    "claude-opus-4-5": ("5", "25", "6.25", "10", "0.50"),
    "claude-sonnet-4-6": ("3", "15", "3.75", "6", "0.30"),
    "claude-sonnet-4-5": ("3", "15", "3.75", "6", "0.30"),
    "claude-haiku-4-5": ("1", "5", "1.25", "2", "0.10"),
}


def nanos(usd_per_mtok: str) -> int:
    whole, _, frac = usd_per_mtok.partition(".")
    return int(whole) * 1000 + int((frac + "000")[:3])


@pytest.fixture(scope="module")
def table() -> PriceTable:
    return PriceTable.load()


@pytest.mark.parametrize("model", sorted(TABLE))
def test_every_reference_model_resolves_to_its_rates(table, model):
    expected = Rates(*(nanos(rate) for rate in TABLE[model]))
    assert table.rates(model, NOW, 1000) == expected


def test_the_table_has_exactly_the_reference_models(table):
    assert sorted(table.models) == sorted(TABLE)


def test_rates_are_integer_nanos_per_token(table):
    rates = table.rates("claude-haiku-5-5", NOW, 1)
    assert rates.cache_write_5m == 125 and rates.cache_read == 10
    assert all(type(value) is int for value in vars(rates).values())


def test_sonnet_5_5_cache_read_halves_on_2026_10_07(table):
    midnight = datetime(2026, 10, 7, tzinfo=timezone.utc)
    assert table.rates("claude-sonnet-5-5", midnight - timedelta(seconds=1), 10).cache_read == 200
    assert table.rates("claude-sonnet-5-5", midnight, 10).cache_read == 100
    assert table.rates("claude-sonnet-5-5", datetime(2025, 1, 1), 10).cache_read == 200
    # 01:00 in UTC+2 is still 6 October in UTC; a naive time is taken as UTC.
    assert table.rates("claude-sonnet-5-5", datetime(2026, 10, 7, 1, tzinfo=timezone(timedelta(hours=2))), 10) \
        .cache_read == 200
    assert table.rates("claude-sonnet-5-5", datetime(2026, 10, 7), 10).cache_read == 100
    assert table.rates("claude-sonnet-5-5", midnight, 10).input == 2000


def test_haiku_5_5_band_switches_above_100000_prompt_tokens(table):
    low = table.rates("claude-haiku-5-5", NOW, 100_000)
    high = table.rates("claude-haiku-5-5", NOW, 100_001)
    assert low == Rates(100, 500, 125, 200, 10)
    assert high == Rates(500, 2500, 625, 1000, 50)


def test_band_is_chosen_from_the_whole_prompt(table):
    usage = {"input_tokens": 1, "cache_read_input_tokens": 60_000, "cache_creation_input_tokens": 40_000,
             "output_tokens": 7}
    assert prompt_tokens(usage) == 100_001
    rates = table.rates("claude-haiku-5-5", NOW, prompt_tokens(usage))
    # every token of the request at the high band
    assert usage_cost_nanos(usage, rates) == 1 * 500 + 60_000 * 50 + 40_000 * 625 + 7 * 2500


def test_cost_with_5m_and_1h_split_is_exact(table):
    usage = {"input_tokens": 1234, "output_tokens": 567, "cache_read_input_tokens": 20_000,
             "cache_creation_input_tokens": 3000,
             "cache_creation": {"ephemeral_5m_input_tokens": 1000, "ephemeral_1h_input_tokens": 2000}}
    rates = table.rates("claude-opus-5-5", NOW, prompt_tokens(usage))
    # $4, $20, $5 (5m), $8 (1h), $0.20 per Mtok
    expected = 1234 * 4000 + 567 * 20000 + 1000 * 5000 + 2000 * 8000 + 20_000 * 200
    assert usage_cost_nanos(usage, rates) == expected == 41_276_000
    assert format_usd(expected) == "$0.0413"


def test_missing_split_bills_all_cache_writes_at_5m():
    rates = Rates(input=1, output=1, cache_write_5m=10, cache_write_1h=100, cache_read=1)
    assert usage_cost_nanos({"cache_creation_input_tokens": 50}, rates) == 500
    assert usage_cost_nanos({"cache_creation_input_tokens": 50, "cache_creation": None}, rates) == 500
    # tokens the split does not account for are also billed at 5m
    split = {"ephemeral_5m_input_tokens": 10, "ephemeral_1h_input_tokens": 30}
    assert usage_cost_nanos({"cache_creation_input_tokens": 50, "cache_creation": split}, rates) == 20 * 10 + 30 * 100


def test_missing_and_none_counts_are_zero():
    rates = Rates(1, 2, 3, 4, 5)
    assert usage_cost_nanos({}, rates) == 0
    assert usage_cost_nanos({"input_tokens": None, "output_tokens": 3}, rates) == 6
    assert prompt_tokens({"input_tokens": 5, "cache_read_input_tokens": None}) == 5


def test_malformed_counts_are_refused():
    with pytest.raises(ValueError):
        usage_cost_nanos({"input_tokens": 1.5}, Rates(1, 1, 1, 1, 1))
    with pytest.raises(ValueError):
        usage_cost_nanos({"input_tokens": -1}, Rates(1, 1, 1, 1, 1))


def test_unknown_model_has_no_price(table):
    assert table.rates("claude-unknown-9", NOW, 10) is None
    assert table.rates("claude-mythos-5", NOW, 10) is None
    assert table.rates("claude-sonnet-5-5-fast", NOW, 10) is None
    assert table.rates("claude-unknown-9-20250929", NOW, 10) is None


def test_dated_id_resolves_to_its_base(table):
    assert table.rates("claude-sonnet-4-5-20250929", NOW, 10) == table.rates("claude-sonnet-4-5", NOW, 10)
    assert table.rates("claude-sonnet-4-5-2025092", NOW, 10) is None


def test_override_adds_and_replaces_models(table):
    entry = {"input": "1.5", "output": "7", "cache_write_5m": "2", "cache_write_1h": "3", "cache_read": "0.001"}
    custom = PriceTable.load({"local-model": [entry], "claude-opus-5-5": entry})
    assert custom.rates("local-model", NOW, 10) == Rates(1500, 7000, 2000, 3000, 1)
    assert custom.rates("claude-opus-5-5", NOW, 10).input == 1500
    assert custom.rates("claude-haiku-4-5", NOW, 10) == table.rates("claude-haiku-4-5", NOW, 10)
    assert table.rates("local-model", NOW, 10) is None and table.rates("claude-opus-5-5", NOW, 10).input == 4000


def test_override_accepts_parsed_entries():
    parsed = parse_prices({"m": {"input": 1, "output": 1, "cache_write_5m": 1, "cache_write_1h": 1,
                                 "cache_read": 1}}, lambda keys: "here")
    assert isinstance(parsed["m"], ModelPrice)
    assert PriceTable.load(parsed).rates("m", NOW, 1).input == 1000


def test_before_the_first_dated_period_the_price_is_unknown():
    entry = [{"effective": "2026-11-01", "input": "1", "output": "1", "cache_write_5m": "1",
              "cache_write_1h": "1", "cache_read": "1"}]
    custom = PriceTable.load({"new-model": entry})
    assert custom.rates("new-model", datetime(2026, 10, 31, 23, 59), 1) is None
    assert custom.rates("new-model", datetime(2026, 11, 1), 1).input == 1000


RATES = {"input": "1", "output": "1", "cache_write_5m": "1", "cache_write_1h": "1", "cache_read": "1"}


@pytest.mark.parametrize("entry, message", [
    ([{**RATES, "input": 0.5}],
     "'pricing.m[0].input' must be a quoted decimal string of USD per million tokens such as \"0.125\", not float (0.5)"),
    ([{**RATES, "input": "0.0001"}],
     "'pricing.m[0].input' must be a non-negative amount with at most 3 decimal places, not '0.0001'"),
    ([{**RATES, "input": "-1"}], "'pricing.m[0].input' must be a non-negative amount with at most 3 decimal places, not '-1'"),
    ([{**RATES, "input": True}], "must be a quoted decimal string"),
    ([{**RATES, "imput": "1"}], "unknown key 'pricing.m[0].imput' (did you mean 'input'?)"),
    ([RATES, RATES], "'pricing.m[1]' needs an 'effective' date: only the first period may omit it"),
    ([{**RATES, "effective": "soon"}], "'pricing.m[0].effective' must be a date such as 2026-10-07, not str ('soon')"),
    ([], "'pricing.m' must list at least one price period"),
    ("2", "'pricing.m' must be a list of price periods, not str ('2')"),
    ([{"bands": [{**RATES, "max_prompt_tokens": 10}]}],
     "'pricing.m[0].bands[0]' is the last band: it must not have 'max_prompt_tokens'"),
    ([{"bands": [RATES, RATES]}], "'pricing.m[0].bands[0].max_prompt_tokens' must be an integer above 0, not null"),
    ([{**RATES, "bands": [RATES]}], "'pricing.m[0]' has both 'bands' and rates"),
])
def test_invalid_overrides_are_config_errors(entry, message):
    with pytest.raises(ConfigError) as caught:
        PriceTable.load({"m": entry})
    assert "\n" not in str(caught.value)
    assert str(caught.value).startswith("pricing override: ")
    assert message in str(caught.value)


def test_format_usd():
    assert format_usd(None) == "n/a"
    assert format_usd(0) == "$0.0000"
    assert format_usd(12_300_000) == "$0.0123"
    assert format_usd(12_345_000) == "$0.0123"
    assert format_usd(12_350_000) == "$0.0124"  # half up
    assert format_usd(1_500_000_000) == "$1.5000"
    assert format_usd(123_456_789_012) == "$123.4568"
    assert format_usd(99_999) == "$0.0001"
    assert format_usd(49_999) == "$0.00005"  # never shows a real cost as $0.0000
    assert format_usd(1_234) == "$0.0000012"
    assert format_usd(7) == "$0.000000007"
    assert format_usd(-12_350_000) == "-$0.0124"


def test_nanos_to_usd():
    assert nanos_to_usd(40_276_000) == 0.040276
    assert nanos_to_usd(0) == 0.0
