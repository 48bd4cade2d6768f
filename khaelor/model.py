"""Talking to the Messages API through the official SDK's streaming interface.

Owns credentials, the (lazily imported) SDK client, and the retry policy.
The SDK's own retries are off: every attempt is KHAELOR's, so each one is
journaled (`request`, then `usage`, `request_failed` or
`usage_uncertainty`) and every wait is announced. A reply counts only when
the stream delivered `message_stop` and a stop reason; a stream that breaks,
errors or just ends is never taken as complete. An attempt the server
accepted that died before its usage was known is *uncertain*, never zero.
"""

import random
import secrets
import time
from dataclasses import dataclass
from typing import Callable

from khaelor.errors import KhaelorError, ModelError

CREDENTIAL_HINT = "set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN); ANTHROPIC_BASE_URL selects another endpoint"
MAX_SERVER_DELAY = 300.0


class MissingCredentials(KhaelorError):
    """No API key or token in the environment."""


def credentials(environ: dict[str, str]) -> dict[str, str]:
    """SDK keyword for the credential found in the environment (API key wins)."""
    if environ.get("ANTHROPIC_API_KEY"):
        return {"api_key": environ["ANTHROPIC_API_KEY"]}
    if environ.get("ANTHROPIC_AUTH_TOKEN"):
        return {"auth_token": environ["ANTHROPIC_AUTH_TOKEN"]}
    raise MissingCredentials("no Anthropic credentials: ANTHROPIC_API_KEY is not set", hint=CREDENTIAL_HINT)


@dataclass
class Reply:
    """A complete assistant reply."""

    message: dict
    stop_reason: str
    stop_details: dict | None
    usage: dict
    message_id: str
    request_id: str | None


class _Retry(Exception):
    """An attempt failed in a way that another attempt may cure."""

    def __init__(self, reason: str, uncertain: bool, delay: float | None = None, request_id: str | None = None):
        super().__init__(reason)
        self.reason = reason
        self.uncertain = uncertain
        self.delay = delay
        self.request_id = request_id


@dataclass
class RetryPolicy:
    """How many attempts a request gets and how long to wait between them."""

    max_attempts: int = 6
    initial_backoff: float = 1.0
    max_backoff: float = 30.0

    def delay(self, failures: int, requested: float | None) -> float:
        if requested is not None:
            return min(max(requested, 0.0), MAX_SERVER_DELAY)
        base = min(self.initial_backoff * 2 ** (failures - 1), self.max_backoff)
        return base * (1 - 0.25 * random.random())


class ModelClient:
    """Sends requests, streams replies, journals every attempt."""

    def __init__(self, environ: dict[str, str], policy: RetryPolicy, timeout: float,
                 notice: Callable[[str], None], on_text: Callable[[str], None] | None = None,
                 sleep: Callable[[float], None] = time.sleep):
        self._environ = environ
        self._policy = policy
        self._timeout = timeout
        self.notice = notice
        self._on_text = on_text
        self._sleep = sleep
        self._client = None

    def client(self):
        """The SDK client, created (and the SDK imported) on first use."""
        if self._client is None:
            import anthropic

            self._client = anthropic.Anthropic(
                **credentials(self._environ),
                base_url=self._environ.get("ANTHROPIC_BASE_URL") or None,
                max_retries=0,
                timeout=self._timeout,
            )
        return self._client

    def count_tokens(self, **body) -> int | None:
        """The API's token count for a request body, or None when it cannot be had (never an estimate)."""
        import anthropic

        try:
            return self.client().messages.count_tokens(**body).input_tokens
        except (anthropic.AnthropicError, MissingCredentials):
            return None

    def send(self, request: dict, record: Callable[..., dict], operation: str) -> Reply:
        """One model reply for `request`, retrying within the policy; journals via `record`."""
        for number in range(1, self._policy.max_attempts + 1):
            attempt = secrets.token_hex(4)
            record("request", attempt=attempt, model=request["model"], operation=operation, number=number)
            try:
                reply = self._attempt(request)
            except _Retry as failure:
                self._after_failure(failure, attempt, request["model"], operation, record, number)
                continue
            except ModelError as refused:
                record("request_failed", attempt=attempt, reason=refused.message)
                raise
            except BaseException:
                record("usage_uncertainty", attempt=attempt, model=request["model"], operation=operation,
                       reason="interrupted during the request")
                raise
            record("usage", attempt=attempt, model=request["model"], operation=operation,
                   request_id=reply.request_id, message_id=reply.message_id, usage=reply.usage)
            return reply
        raise ModelError(f"the model request failed {self._policy.max_attempts} times; giving up")

    def _after_failure(self, failure: _Retry, attempt: str, model: str, operation: str,
                       record: Callable[..., dict], number: int) -> None:
        if failure.uncertain:
            record("usage_uncertainty", attempt=attempt, model=model, operation=operation,
                   reason=failure.reason, request_id=failure.request_id)
        else:
            record("request_failed", attempt=attempt, reason=failure.reason, request_id=failure.request_id)
        if number >= self._policy.max_attempts:
            return
        delay = self._policy.delay(number, failure.delay)
        record("retry", attempt=attempt, reason=failure.reason, delay=round(delay, 3))
        self.notice(f"retrying in {delay:.0f}s ({failure.reason})" if delay >= 1 else f"retrying ({failure.reason})")
        self._sleep(delay)

    def _attempt(self, request: dict) -> Reply:
        import anthropic

        try:
            manager = self.client().messages.stream(**request)
            stream = manager.__enter__()
        except anthropic.APIStatusError as exc:
            raise _status_failure(exc) from None
        except anthropic.APITimeoutError:
            raise _Retry("timed out waiting for the reply to start", uncertain=True) from None
        except anthropic.APIConnectionError as exc:
            raise _Retry(f"connection failed: {_cause(exc)}", uncertain=False) from None
        request_id = getattr(stream, "request_id", None)
        try:
            return self._consume(stream, request_id)
        except _Retry:
            raise
        except Exception as exc:
            raise _Retry(f"stream broke: {_describe(exc)}", uncertain=True, request_id=request_id) from None
        finally:
            manager.__exit__(None, None, None)

    def _consume(self, stream, request_id: str | None) -> Reply:
        stopped = False
        for event in stream:
            kind = event.type
            if kind == "text" and self._on_text:
                self._on_text(event.text)
            elif kind == "message_stop":
                stopped = True
        final = stream.current_message_snapshot
        if not stopped or final.stop_reason is None:
            raise _Retry("the reply stream ended before it was complete", uncertain=True, request_id=request_id)
        return Reply(
            message={"role": "assistant", "content": [_block(b) for b in final.content]},
            stop_reason=final.stop_reason,
            stop_details=_dump(getattr(final, "stop_details", None)),
            usage=_dump(final.usage) or {},
            message_id=final.id,
            request_id=request_id,
        )


def _status_failure(exc) -> Exception:
    status = exc.status_code
    kind = _error_type(exc)
    message = getattr(exc, "api_message", None) or _error_message(exc)
    headers = exc.response.headers if exc.response is not None else {}
    should_retry = (headers.get("x-should-retry") or "").lower()
    retryable = status in (408, 409, 429) or status >= 500
    if should_retry in ("true", "false"):
        retryable = should_retry == "true"
    reason = {429: "rate limited", 529: "overloaded"}.get(status, f"{kind or 'error'} {status}")
    if not retryable:
        return ModelError(f"the API refused the request: {status} {kind or ''}: {message}".replace("  ", " "),
                          hint=CREDENTIAL_HINT if status == 401 else "")
    return _Retry(reason, uncertain=False, delay=_requested_delay(headers), request_id=getattr(exc, "request_id", None))


def _requested_delay(headers) -> float | None:
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value:
            try:
                return float(value) * scale
            except ValueError:
                continue
    return None


def _error_type(exc) -> str | None:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            return error.get("type")
    return getattr(exc, "type", None)


def _error_message(exc) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return str(body["error"].get("message", ""))
    return str(exc)


def _describe(exc: Exception) -> str:
    kind = _error_type(exc)
    return kind or type(exc).__name__


def _cause(exc: Exception) -> str:
    cause = exc.__cause__ or exc.__context__
    return type(cause).__name__ if cause else str(exc)


def _dump(value) -> dict | None:
    if value is None:
        return None
    return value.model_dump(mode="json", exclude_none=True)


def _block(block) -> dict:
    return block.model_dump(mode="json", exclude_none=True)
