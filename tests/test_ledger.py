"""The usage ledger: exact integer money per record's own rate, known subtotals, the cost ceiling."""

from khaelor import ledger


def usage_record(model="claude-sonnet-5-5", ts="2026-11-01T00:00:00.000Z", operation="turn", **counts):
    usage = {"input_tokens": 0, "output_tokens": 0, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
    usage.update(counts)
    return {"type": "usage", "model": model, "ts": ts, "operation": operation, "usage": usage}


def test_each_record_priced_at_its_own_time():
    before = usage_record(ts="2026-10-06T23:59:59.000Z", cache_read_input_tokens=1_000_000)
    after = usage_record(ts="2026-10-07T00:00:00.000Z", cache_read_input_tokens=1_000_000)
    book = ledger.build([before, after], [])
    assert book.total.nanos == 200_000_000 + 100_000_000
    assert book.complete and ledger.report(book)[0] == "total        $0.3000"


def test_thousands_of_records_sum_exactly():
    records = [usage_record(input_tokens=3, output_tokens=7, cache_read_input_tokens=11) for _ in range(5000)]
    book = ledger.build(records, [])
    per_record = 3 * 2000 + 7 * 10000 + 11 * 100  # nano-dollars at $2 / $10 / $0.10 per million
    assert book.total.nanos == 5000 * per_record
    assert book.by_model["claude-sonnet-5-5"].requests == 5000


def test_cache_writes_split_by_ttl():
    record = usage_record(model="claude-opus-5-5", cache_creation_input_tokens=300,
                          cache_creation={"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 200})
    book = ledger.build([record], [])
    assert book.total.tokens["cache_write_5m"] == 100 and book.total.tokens["cache_write_1h"] == 200
    assert book.total.nanos == 100 * 5000 + 200 * 8000


def test_unknown_model_keeps_real_tokens_and_no_money():
    book = ledger.build([usage_record(model="my-local-model", input_tokens=42)], [])
    assert book.total.money() == "n/a" and book.total.tokens["input"] == 42
    assert book.unpriced_models == {"my-local-model"} and not book.complete


def test_uncertainty_makes_a_known_subtotal():
    book = ledger.build([usage_record(input_tokens=1000)], [{"type": "usage_uncertainty"}])
    assert ledger.report(book)[0] == "total        $0.0020 known subtotal — 1 uncertain attempt(s)"
    assert not book.complete


def test_cache_hit_rate_and_operations():
    book = ledger.build([usage_record(input_tokens=10, cache_read_input_tokens=90),
                         usage_record(operation="compaction", input_tokens=100)], [])
    assert abs(book.cache_hit_rate() - 90 / 200) < 1e-12
    assert set(book.by_operation) == {"turn", "compaction"}
    assert ledger.as_json(book)["by_operation"]["compaction"]["tokens"]["input"] == 100


def test_ceiling_refusals():
    priced = ledger.build([usage_record(output_tokens=100_000)], [])  # $1.00
    assert ledger.ceiling_refusal(priced, None, "claude-sonnet-5-5") is None
    assert ledger.ceiling_refusal(priced, ledger.usd_to_nanos(2), "claude-sonnet-5-5") is None
    assert "reached" in ledger.ceiling_refusal(priced, ledger.usd_to_nanos("0.5"), "claude-sonnet-5-5")
    uncertain = ledger.build([], [{"type": "usage_uncertainty"}])
    assert "unknown usage" in ledger.ceiling_refusal(uncertain, ledger.usd_to_nanos(10), "claude-sonnet-5-5")
    empty = ledger.build([], [])
    assert "no price is known for mystery" in ledger.ceiling_refusal(empty, ledger.usd_to_nanos(10), "mystery")
    assert ledger.usd_to_nanos(0.1) == 100_000_000


def test_a_running_ledger_folds_only_what_was_added_and_matches_a_rebuild():
    records = [usage_record(input_tokens=1000)]
    running = ledger.update(ledger.Ledger(), records, [])
    assert running.folded == 1 and running.total.nanos == 2_000_000
    records += [usage_record(model="my-local-model", output_tokens=5), usage_record(output_tokens=100_000)]
    uncertain = [{"type": "usage_uncertainty"}]
    assert ledger.update(running, records, uncertain) is running
    assert running == ledger.build(records, uncertain) and running.folded == 3
    assert ledger.update(running, records, uncertain).total.requests == 3
