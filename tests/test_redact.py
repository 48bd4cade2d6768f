"""The redaction engine's contract: surgical, idempotent, JSON-aware, and bounded on hostile input."""

import json
import random
import string
import time

import pytest

from khaelor.redact import RedactionError, Redactions, is_placeholder, redact_text, redact_value

RNG = random.Random(3)


def github_token() -> str:
    return "ghp_" + "".join(RNG.choice(string.ascii_letters + string.digits) for _ in range(36))


def test_only_the_secret_is_replaced_and_counted_by_kind():
    token = github_token()
    found = Redactions()
    out = redact_text(f"export GITHUB_TOKEN={token}\n  # ünïcödé 🙂 stays\nDB_PASSWORD=Kestrel!harbor2291\n", found)
    assert out == ("export GITHUB_TOKEN=[REDACTED:github-token]\n  # ünïcödé 🙂 stays\n"
                   "DB_PASSWORD=[REDACTED:password]\n")
    assert found.by_kind() == {"github-token": 1, "password": 1}
    assert found.summary() == "2 values redacted: 1 github-token, 1 password"


def test_redaction_is_idempotent_and_deterministic():
    text = f"Authorization: Bearer {github_token()}\npassword: hunter2hunter2\nhttps://u:pw12345@h/x?token=abcdef12"
    once = redact_text(text)
    assert redact_text(once) == once
    assert redact_text(text) == once


def test_headers_keep_their_scheme_and_cookies_keep_attributes():
    assert redact_text("Authorization: Basic ZGVwbG95OnNlY3JldA==") == "Authorization: Basic [REDACTED:authorization]"
    assert (redact_text("Set-Cookie: sid=abc123def456; Path=/; HttpOnly")
            == "Set-Cookie: sid=[REDACTED:cookie]; Path=/; HttpOnly")


def test_url_userinfo_and_query_keep_host_and_benign_parameters():
    out = redact_text("postgres://app:S3cr3t!pw@db.internal:5432/x and https://h.io/p?page=2&api_key=abcdef123456&q=ok")
    assert out == ("postgres://app:[REDACTED:url-password]@db.internal:5432/x and "
                   "https://h.io/p?page=2&api_key=[REDACTED:url-query]&q=ok")


def test_private_key_block_is_removed_whole_even_json_escaped():
    block = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nAAAAAAAAAAAA\n-----END OPENSSH PRIVATE KEY-----"
    assert redact_text(f"key:\n{block}\ndone") == "key:\n[REDACTED:private-key]\ndone"
    escaped = json.dumps(block)
    assert redact_text(escaped) == '"[REDACTED:private-key]"'


def test_json_document_inside_a_string_is_decoded_redacted_and_reencoded_in_its_layout():
    token = github_token()
    inner = json.dumps({"headers": {"Authorization": f"token {token}"}, "n": 1}, indent=2)
    out = redact_value({"content": inner})
    assert json.loads(out["content"]) == {"headers": {"Authorization": "token [REDACTED:authorization]"}, "n": 1}
    assert out["content"].startswith('{\n  "headers"')
    untouched = json.dumps({"a": "plain"}, indent=3)
    assert redact_value({"content": untouched})["content"] == untouched


def test_a_bare_value_that_is_called_or_indexed_is_code_even_behind_other_keys():
    text = "token=token=token=abcdef( and api_key=read_key['x'] but token=abcdefgh12 (x)"
    assert redact_text(text) == ("token=token=token=abcdef( and api_key=read_key['x'] "
                                 "but token=[REDACTED:credential] (x)")


def test_key_is_a_credential_name_only_after_a_qualifier():
    text = "SIGNING_KEY=abcdefgh12 consumer.key=abcdefgh12 x-api-key=abcdefgh12 monkey=bananas12 ikey=abcdefgh12"
    assert redact_text(text) == ("SIGNING_KEY=[REDACTED:credential] consumer.key=[REDACTED:credential] "
                                 "x-api-key=[REDACTED:credential] monkey=bananas12 ikey=abcdefgh12")


def test_cookie_names_without_values_are_passed_over_and_long_names_kept():
    assert redact_text("Cookie: debug; sessionid=abc123def456") == "Cookie: debug; sessionid=[REDACTED:cookie]"
    name = "n" * 300
    assert redact_text(f"Cookie: {name}=abc123def456; b") == f"Cookie: {name}=[REDACTED:cookie]; b"


def test_credential_named_members_are_replaced_whole_but_counts_and_ids_stay():
    value = {"api_key": "abcdefgh12345", "input_tokens": 1200, "id": "msg_01abc", "password": "${DB_PASSWORD}"}
    found = Redactions()
    assert redact_value(value, found) == {"api_key": "[REDACTED:credential]", "input_tokens": 1200,
                                          "id": "msg_01abc", "password": "${DB_PASSWORD}"}
    assert found.total == 1


@pytest.mark.parametrize("value", ["${TOKEN}", "<your-key>", "YOUR_API_KEY", "********", "os.environ.get",
                                   "sk-ant-...", "[REDACTED:github-token]", "/run/secrets/db"])
def test_placeholders_are_not_secrets(value):
    assert is_placeholder(value)


def test_nesting_too_deep_to_scan_fails_closed():
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(RedactionError):
        redact_value(deep)


@pytest.mark.parametrize("unit", ["a", "eyJ", "sk-ant-", "-----BEGIN RSA PRIVATE KEY-----", "password=", '\\"',
                                  "://", "&", "key=", "&a", "ikey=", "secret=x "])
def test_hostile_repetition_finishes(unit):
    text = unit * (200_000 // len(unit))
    out = redact_text(text)
    assert isinstance(out, str) and len(out) <= len(text) + 100_000


@pytest.mark.parametrize("unit", ["token=" * 680 + "(", "api_key:" * 400 + "[", "Cookie: " + "a" * 8184])
def test_keys_and_names_inside_one_long_run_are_not_scanned_again_from_each(unit):
    """These once cost the run's length per key or per position: 1.5 to 13 CPU seconds a megabyte."""
    text = (unit * (1_000_000 // len(unit) + 1))[:1_000_000]
    started = time.process_time()
    redact_text(text)
    assert time.process_time() - started < 1.0
