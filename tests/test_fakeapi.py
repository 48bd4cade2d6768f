"""The fake Messages API, exercised through the real anthropic SDK."""

import json
import math
import threading
import time

import anthropic
import httpx2
import pytest

from tests.fakeapi import (FakeAPI, error_response, fake_api, redacted_thinking, reply, text,  # noqa: F401
                           thinking, tool_use)

MODEL = "claude-sonnet-5-5"
HI = [{"role": "user", "content": "hi"}]


def toks(x: object) -> int:
    """Independent restatement of the documented token formula."""
    return math.ceil(len(json.dumps(x, sort_keys=True, separators=(",", ":"))) / 4)


def client(api: FakeAPI, **kwargs) -> anthropic.Anthropic:
    kwargs.setdefault("api_key", "test-key")
    # plain HTTP only: skipping the certificate bundle saves ~70 ms per client
    kwargs.setdefault("http_client", anthropic.DefaultHttpxClient(verify=False))
    return anthropic.Anthropic(base_url=api.base_url, _strict_response_validation=True, **kwargs)


def stream(c: anthropic.Anthropic, **kwargs):
    kwargs = {"model": MODEL, "max_tokens": 100, "messages": HI, **kwargs}
    with c.messages.stream(**kwargs) as s:
        return s.get_final_message()


def create(c: anthropic.Anthropic, **kwargs):
    return c.messages.create(**{"model": MODEL, "max_tokens": 100, "messages": HI, **kwargs})


def delta_types(c: anthropic.Anthropic, **kwargs) -> list[str]:
    with c.messages.stream(**{"model": MODEL, "max_tokens": 100, "messages": HI, **kwargs}) as s:
        return [e.delta.type for e in s if e.type == "content_block_delta"]


# --- replies ------------------------------------------------------------------

def test_streamed_text_has_exact_usage(fake_api):
    fake_api.script(reply(text("hello world")))
    message = stream(client(fake_api))
    assert [b.text for b in message.content] == ["hello world"]
    assert message.stop_reason == "end_turn"
    assert message.id.startswith("msg_01")
    # '{"text":"hi","type":"text"}' is 27 bytes; '[{"text":"hello world","type":"text"}]' is 37
    assert (message.usage.input_tokens, message.usage.output_tokens) == (7, 10)
    assert (message.usage.cache_read_input_tokens, message.usage.cache_creation_input_tokens) == (0, 0)


def test_text_is_streamed_in_several_deltas(fake_api):
    fake_api.script(reply("hello world"))
    assert delta_types(client(fake_api)) == ["text_delta", "text_delta"]


def test_non_streamed_text_has_exact_usage(fake_api):
    fake_api.script(reply("hello world", usage={"output_tokens": 42}))
    message = create(client(fake_api))
    assert message.content[0].text == "hello world"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (7, 42)
    assert message.stop_reason == "end_turn"


def test_usage_overrides_replace_computed_fields(fake_api):
    fake_api.script(reply("x", usage={"input_tokens": 7, "cache_read_input_tokens": 100,
                                      "cache_creation_input_tokens": 20}))
    message = stream(client(fake_api))
    assert usage_of(message) == (7, 100, 20, 20, 0)
    assert message.usage.output_tokens == toks([text("x")])


def test_tool_use_input_is_assembled_from_json_deltas(fake_api):
    call = tool_use("bash", {"command": "ls -la \"é\"\n", "timeout": 5})
    fake_api.script(reply(text("Running."), call), reply(call))
    c = client(fake_api)
    message = stream(c)
    block = message.content[1]
    assert (block.type, block.name, block.id) == ("tool_use", "bash", call["id"])
    assert block.input == {"command": "ls -la \"é\"\n", "timeout": 5}
    assert block.id.startswith("toolu_01") and len(block.id) == 30
    assert message.stop_reason == "tool_use"
    assert delta_types(c) == ["input_json_delta", "input_json_delta"]


def test_thinking_and_signature_are_kept(fake_api):
    blocks = [thinking("Let me look.", signature="EqQBsig"), redacted_thinking("EmwKopaque"), text("Done.")]
    fake_api.script(reply(*blocks), reply(*blocks))
    c = client(fake_api)
    streamed, created = stream(c), create(c)
    for message in (streamed, created):
        assert [b.type for b in message.content] == ["thinking", "redacted_thinking", "text"]
        assert (message.content[0].thinking, message.content[0].signature) == ("Let me look.", "EqQBsig")
        assert message.content[1].data == "EmwKopaque"
        assert message.usage.output_tokens == toks(blocks)
    assert streamed.content[0].to_dict() == blocks[0]


def test_stop_details_and_model_override(fake_api):
    details = {"type": "refusal", "category": "cyber", "explanation": "no"}
    fake_api.script(reply("", stop_reason="refusal", stop_details=details, model="claude-opus-5-5"))
    message = stream(client(fake_api))
    assert (message.stop_reason, message.stop_details.category, message.model) == ("refusal", "cyber",
                                                                                     "claude-opus-5-5")


# --- prompt caching -----------------------------------------------------------

TOOL = {"name": "bash", "description": "Run a command.",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}
SYSTEM = {"type": "text", "text": "You are terse."}
HELLO, NOW, OK, NEXT = (text(s) for s in ("hello there", "what now?", "ok", "next step"))


def cached(block: dict, ttl: str | None = None) -> dict:
    control = {"type": "ephemeral", **({"ttl": ttl} if ttl else {})}
    return {**block, "cache_control": control}


def usage_of(message) -> tuple[int, int, int, int, int]:
    u = message.usage
    return (u.input_tokens, u.cache_read_input_tokens, u.cache_creation_input_tokens,
            u.cache_creation.ephemeral_5m_input_tokens, u.cache_creation.ephemeral_1h_input_tokens)


def assert_matches_count(c: anthropic.Anthropic, message, payload: dict) -> None:
    counted = c.messages.count_tokens(**payload).input_tokens
    u = message.usage
    assert u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens == counted


def test_cache_write_then_read_then_moving_breakpoint(fake_api):
    c = client(fake_api)
    fake_api.script(*[reply("ok")] * 3)
    turn1 = {"model": MODEL, "tools": [cached(TOOL, "1h")], "system": [cached(SYSTEM)],
             "messages": [{"role": "user", "content": [cached(HELLO), NOW]}]}
    tool, system, hello, now = toks(TOOL), toks(SYSTEM), toks(HELLO), toks(NOW)

    first = stream(c, **turn1)
    assert usage_of(first) == (now, 0, system + hello + tool, system + hello, tool)
    assert_matches_count(c, first, turn1)

    second = stream(c, **turn1)
    assert usage_of(second) == (now, tool + system + hello, 0, 0, 0)
    assert_matches_count(c, second, turn1)

    # the breakpoint moves to the newest block; the old prefix is found by lookback
    turn2 = {**turn1, "messages": [{"role": "user", "content": [HELLO, NOW]},
                                   {"role": "assistant", "content": [OK]},
                                   {"role": "user", "content": [cached(NEXT)]}]}
    third = create(c, **turn2)
    grown = now + toks(OK) + toks(NEXT)
    assert usage_of(third) == (0, tool + system + hello, grown, grown, 0)
    assert_matches_count(c, third, turn2)


def test_cache_is_per_model_and_count_tokens_does_not_write(fake_api):
    c = client(fake_api)
    payload = {"model": MODEL, "system": [cached(SYSTEM)], "messages": HI}
    c.messages.count_tokens(**payload)
    fake_api.script(reply("a"), reply("b"))
    assert usage_of(stream(c, **payload))[1:3] == (0, toks(SYSTEM))
    assert usage_of(stream(c, **{**payload, "model": "claude-opus-5-5"}))[1:3] == (0, toks(SYSTEM))


def test_short_prefix_is_not_cached():
    with FakeAPI(min_cache_tokens=1024) as api:
        c = client(api)
        api.script(reply("a"), reply("b"))
        payload = {"system": [cached(SYSTEM)]}
        for message in (stream(c, **payload), stream(c, **payload)):
            assert usage_of(message) == (toks(SYSTEM) + 7, 0, 0, 0, 0)


def test_only_prefixes_above_the_minimum_are_remembered():
    system, hello = toks(SYSTEM), toks(HELLO)
    with FakeAPI(min_cache_tokens=system + 1) as api:
        c = client(api)
        api.script(reply("a"), reply("b"))
        first = stream(c, system=[cached(SYSTEM)], messages=[{"role": "user", "content": [cached(HELLO)]}])
        assert usage_of(first) == (0, 0, system + hello, system + hello, 0)
        # the system prefix was written as part of the longer one, but is too short to be kept alone
        second = stream(c, system=[cached(SYSTEM)], messages=[{"role": "user", "content": [cached(NOW)]}])
        assert usage_of(second) == (0, 0, system + toks(NOW), system + toks(NOW), 0)


def test_more_than_four_breakpoints_is_a_bad_request(fake_api):
    fake_api.script(reply("unused"))
    blocks = [cached(text(str(i))) for i in range(5)]
    with pytest.raises(anthropic.BadRequestError) as caught:
        create(client(fake_api), messages=[{"role": "user", "content": blocks}])
    assert caught.value.type == "invalid_request_error"
    assert fake_api.pending() == 1


# --- auth ---------------------------------------------------------------------

def test_bearer_and_x_api_key_are_both_accepted():
    with FakeAPI(api_key="right") as api:
        api.script(reply("a"), reply("b"))
        assert create(client(api, api_key="right")).content[0].text == "a"
        old_style = client(api, api_key="unused", default_headers={"x-api-key": "right",
                                                                   "Authorization": anthropic.Omit()})
        assert create(old_style).content[0].text == "b"
        first, second = api.message_requests
        assert first.headers["authorization"] == "Bearer right" and "x-api-key" not in first.headers
        assert second.headers["x-api-key"] == "right" and "authorization" not in second.headers


def test_wrong_or_missing_key_is_401():
    with FakeAPI(api_key="right") as api:
        api.script(reply("never"))
        with pytest.raises(anthropic.AuthenticationError):
            create(client(api, api_key="wrong"))
    with FakeAPI() as api:
        api.script(reply("never"))
        keyless = client(api, default_headers={"Authorization": anthropic.Omit()})
        with pytest.raises(anthropic.AuthenticationError) as caught:
            create(keyless)
        assert caught.value.type == "authentication_error"
        assert api.pending() == 1


# --- errors and retries -------------------------------------------------------

@pytest.mark.parametrize("status", [429, 529])
def test_retryable_status_is_retried_by_the_sdk(fake_api, status):
    fake_api.script(error_response(status), error_response(status), reply("finally"))
    started = time.monotonic()
    assert create(client(fake_api)).content[0].text == "finally"
    assert time.monotonic() - started < 0.8  # the SDK's own backoff would take over 1 s
    retries = [r.headers["x-stainless-retry-count"] for r in fake_api.message_requests]
    assert retries == ["0", "1", "2"]


def test_streams_are_retried_before_the_body_too(fake_api):
    fake_api.script(error_response(529), reply("streamed"))
    assert stream(client(fake_api)).content[0].text == "streamed"
    assert len(fake_api.message_requests) == 2


def test_500_with_should_retry_false_is_not_retried(fake_api):
    fake_api.script(error_response(500, "boom", should_retry=False), reply("unused"))
    with pytest.raises(anthropic.InternalServerError) as caught:
        create(client(fake_api))
    assert (caught.value.type, caught.value.api_message) == ("api_error", "boom")
    assert caught.value.request_id.startswith("req_011")
    assert len(fake_api.message_requests) == 1 and fake_api.pending() == 1


def test_error_type_follows_status(fake_api):
    fake_api.script(error_response(413))
    with pytest.raises(anthropic.APIStatusError) as caught:
        create(client(fake_api))
    assert (caught.value.status_code, caught.value.type) == (413, "request_too_large")


def test_empty_queue_is_a_non_retried_500(fake_api):
    with pytest.raises(anthropic.InternalServerError) as caught:
        stream(client(fake_api))
    assert caught.value.api_message == "fake API: no scripted response left"
    assert len(fake_api.message_requests) == 1


def test_unknown_path_is_404(fake_api):
    with pytest.raises(anthropic.NotFoundError) as caught:
        client(fake_api).get("/v1/nowhere", cast_to=object)
    assert caught.value.type == "not_found_error"


# --- stream faults ------------------------------------------------------------

def test_cut_after_raises_mid_stream(fake_api):
    fake_api.script(reply("hello world", cut_after=3), reply("unused"))
    with pytest.raises(httpx2.RemoteProtocolError):
        stream(client(fake_api))
    assert len(fake_api.message_requests) == 1 and fake_api.pending() == 1


def test_cut_non_streamed_body_is_a_connection_error(fake_api):
    fake_api.script(reply("hello", cut_after=0), reply("hello", cut_after=0), reply("recovered"))
    with pytest.raises(anthropic.APIConnectionError):
        create(client(fake_api, max_retries=0))
    # unlike a broken stream, a broken plain response is retried by the SDK
    assert create(client(fake_api)).content[0].text == "recovered"


def test_no_message_stop_gives_stop_reason_none(fake_api):
    fake_api.script(reply("partial answer", no_message_stop=True))
    message = stream(client(fake_api))
    assert message.stop_reason is None
    assert message.content[0].text == "partial answer"
    assert message.usage.output_tokens == 1


def test_error_event_raises_api_status_error(fake_api):
    fake_api.script(reply("hello world", error_event_after=4))
    c = client(fake_api)
    with c.messages.stream(model=MODEL, max_tokens=10, messages=HI) as s:
        with pytest.raises(anthropic.APIStatusError) as caught:
            s.get_final_message()
        assert s.current_message_snapshot.content[0].text == "hello"
    assert (caught.value.status_code, caught.value.type) == (200, "overloaded_error")
    assert not isinstance(caught.value, anthropic.InternalServerError)


def run_in_thread(target) -> tuple[threading.Thread, dict]:
    outcome: dict = {}

    def run():
        try:
            outcome["value"] = target()
        except Exception as e:  # handed to the test thread
            outcome["error"] = e
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def test_hold_after_blocks_until_release(fake_api):
    fake_api.script(reply("held text", hold_after=3))
    thread, outcome = run_in_thread(lambda: stream(client(fake_api)))
    assert fake_api.held.wait(5)
    time.sleep(0.05)
    assert thread.is_alive() and not outcome
    fake_api.release()
    thread.join(5)
    assert outcome["value"].content[0].text == "held text"
    assert not fake_api.held.is_set()


def test_close_unblocks_a_held_stream():
    before = set(threading.enumerate())
    api = FakeAPI().start()
    api.script(reply("never finished", hold_after=2))
    thread, outcome = run_in_thread(lambda: stream(client(api)))
    assert api.held.wait(5)
    started = time.monotonic()
    api.close()
    assert time.monotonic() - started < 2
    thread.join(5)
    assert isinstance(outcome.get("error"), httpx2.TransportError)
    for leftover in set(threading.enumerate()) - before:  # the server's own threads end too
        leftover.join(2)
        assert not leftover.is_alive(), leftover.name


def test_close_is_quick_with_keep_alive_connections():
    api = FakeAPI().start()
    api.script(reply("a"))
    c = client(api)
    create(c)
    started = time.monotonic()
    api.close()
    assert time.monotonic() - started < 1


def test_delay_spaces_out_events(fake_api):
    fake_api.script(reply("slow", delay=0.05), reply("late", delay=0.2))
    c = client(fake_api)
    started = time.monotonic()
    stream(c)
    assert time.monotonic() - started >= 0.05 * 7  # 8 frames, a pause between each
    started = time.monotonic()
    create(c)
    assert time.monotonic() - started >= 0.2


# --- recording ----------------------------------------------------------------

def test_requests_are_recorded_with_body_and_headers(fake_api):
    fake_api.script(reply("a"))
    c = client(fake_api)
    stream(c, system="Be brief.")
    c.messages.count_tokens(model=MODEL, messages=HI)
    assert [r.path for r in fake_api.requests] == ["/v1/messages", "/v1/messages/count_tokens"]
    (recorded,) = fake_api.message_requests
    assert recorded.method == "POST"
    assert recorded.body["stream"] is True and recorded.body["system"] == "Be brief."
    assert json.loads(recorded.raw) == recorded.body
    assert recorded.headers["authorization"] == "Bearer test-key"
    assert recorded.headers["x-stainless-helper-method"] == "stream"
    assert fake_api.pending() == 0


def test_wait_for_requests(fake_api):
    fake_api.script(reply("a"))
    thread, _ = run_in_thread(lambda: create(client(fake_api)))
    fake_api.wait_for_requests(1, timeout=5)
    thread.join(5)
    with pytest.raises(AssertionError):
        fake_api.wait_for_requests(2, timeout=0.05)
