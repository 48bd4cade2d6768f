"""Secret redaction for exports and shares (SPEC §12).

Owns finding credentials in text and in JSON values, replacing each one with a
typed marker such as `[REDACTED:github-token]`, and counting what it replaced
by kind. Covered: Authorization, Proxy-Authorization, Cookie and Set-Cookie
headers; token formats of the common providers; credential assignments in env
files, shell, YAML, JSON and code; passwords in URL userinfo and credentials
in URL queries; PEM private-key blocks; JSON documents serialized inside
strings (decoded, redacted, re-encoded only when something was replaced).

Invariants:

* Pure and deterministic: no I/O, no state between calls; the same input
  always gives the same output and the same counts.
* Bounded: every pattern starts with a literal (so the regex engine skips
  ahead in C), checks its left boundary right after that literal in one
  lookbehind, and uses possessive, length-capped runs — no backtracking that
  grows with the input, and no run scanned again from every key or position
  inside it.
* Surgical: only the secret is replaced. Key names, header names and schemes,
  URL hosts, prose, whitespace, ANSI codes and non-ASCII text around it stay
  byte for byte; text with nothing to redact is returned unchanged.
* Idempotent: markers, placeholders (`${TOKEN}`, `<your-key>`, `YOUR_API_KEY`,
  `********`) and references to variables are never redacted.
"""

import json
import re
from collections import Counter
from dataclasses import dataclass, field

MARKER = "[REDACTED:{}]"
MIN_VALUE = 6
"""Shortest assignment value treated as a credential."""
MAX_JSON_IN_STRING = 16 << 20
MAX_JSON_LEVELS = 4
SMALL_TEXT = 4096
"""Below this size a text is first checked for any trigger word at all."""


class RedactionError(ValueError):
    """A value cannot be scanned (nested too deeply); nothing should be written."""


@dataclass
class Redactions:
    """What was replaced, counted by kind."""

    counts: Counter = field(default_factory=Counter)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def by_kind(self) -> dict[str, int]:
        """Counts by kind, sorted by kind name (stable for reports and exports)."""
        return dict(sorted(self.counts.items()))

    def summary(self) -> str:
        """One line: `3 values redacted: 2 github-token, 1 password`, or that none were found."""
        if not self.total:
            return "no secrets found by the redaction scan"
        kinds = ", ".join(f"{count} {kind}" for kind, count in self.by_kind().items())
        return f"{self.total} value{'s' if self.total != 1 else ''} redacted: {kinds}"


# --- patterns ---------------------------------------------------------------------------------------------------

def _left(width: int) -> str:
    """Assert that the literal of `width` chars just matched does not continue a word.

    It may follow any other character, a JSON escape (`\\n`) or an SGR colour code (`ESC[31m`). One
    lookbehind: most word characters rule the match out at once; `n r t` only without a `\\` before
    them, `m` only without a `[` or digit before it.
    """
    return rf"(?<!(?:[A-Za-lo-qsu-z0-9_-]|[nrt](?<!\\.)|m(?<![\[\d].)).{{{width}}})"


_END = r"(?![A-Za-z0-9_-])"
_ASCII = re.ASCII | re.DOTALL


@dataclass(frozen=True)
class _Rule:
    """One pattern: the secret is its first matching value group (`v`, `v2`, …), else the whole match."""

    kind: str
    pattern: re.Pattern
    lowered: bool = False
    """Match against the ASCII-lower-cased text (same indices): keyword rules."""
    checked: bool = True
    """Whether a match may be a placeholder (`${TOKEN}`) to leave alone."""
    triggers: tuple[str, ...] = ()
    """Lower-case literals one of which every match contains; derived from the pattern when empty."""

    @property
    def groups(self) -> tuple[str, ...]:
        return tuple(name for name in ("v", "v2", "v3", "v4", "v5") if name in self.pattern.groupindex)


def _token(kind: str, pattern: str, checked: bool = False, triggers: tuple[str, ...] = ()) -> _Rule:
    return _Rule(kind, re.compile(pattern, _ASCII), checked=checked, triggers=triggers)


_TOKEN_RULES = (
    _token("private-key", r"-----BEGIN(?P<label>[ A-Z0-9]{0,48}PRIVATE KEY(?: BLOCK)?)-----"
                          r"(?:(?:[^-]|-(?!----)){0,262144}+-----END[ A-Z0-9]{0,48}PRIVATE KEY(?: BLOCK)?-----"
                          r"|[A-Za-z0-9+/=\s\\]{0,262144}+)"),
    _token("anthropic-key", rf"sk-ant-{_left(7)}[a-z]{{2,12}}\d\d-[A-Za-z0-9_-]{{20,}}+"),
    _token("openai-key", rf"sk-{_left(3)}(?=[A-Za-z_-]{{0,80}}+\d)[A-Za-z0-9][A-Za-z0-9_-]{{31,}}+"),
    _token("github-token", rf"gh[pousr]_{_left(4)}[A-Za-z0-9]{{36,}}+"),
    _token("github-token", rf"github_pat_{_left(11)}[A-Za-z0-9_]{{50,}}+"),
    _token("gitlab-token", rf"gl{_left(2)}(?:pat|dt|rt|rtr|ptt|cbt|imt|agent|soat|ffct|ft|oas)-[A-Za-z0-9_.-]{{20,}}+"),
    _token("gitlab-token", rf"GR1348941{_left(9)}[A-Za-z0-9_-]{{20,}}+"),
    _token("slack-token", rf"xox{_left(3)}(?:[abposr]|e\.xox[bp])-[A-Za-z0-9-]{{10,}}+"),
    _token("slack-token", rf"xapp-{_left(5)}\d-[A-Za-z0-9-]{{10,}}+"),
    _token("slack-webhook", r"hooks\.slack\.com/(?P<v>(?:services|workflows|triggers)/[A-Za-z0-9/_-]{8,}+)"),
    _token("discord-webhook", r"discord(?:app)?\.com/api/webhooks/(?P<v>\d{5,}/[A-Za-z0-9_-]{20,}+)"),
    _token("stripe-key", rf"sk_(?:live|test)_{_left(8)}[A-Za-z0-9]{{16,}}+"),
    _token("stripe-key", rf"rk_(?:live|test)_{_left(8)}[A-Za-z0-9]{{16,}}+"),
    _token("stripe-key", rf"whsec_{_left(6)}[A-Za-z0-9]{{20,}}+"),
    _token("aws-access-key-id", rf"A(?:KIA|SIA|BIA|CCA){_left(4)}(?![A-Z2-7]{{9}}EXAMPLE)[A-Z2-7]{{16}}(?![A-Za-z0-9])",
           triggers=("akia", "asia", "abia", "acca")),
    _token("aws-session-token", rf"IQoJb3JpZ2luX2Vj{_left(16)}[A-Za-z0-9/+=]{{40,}}+"),
    _token("aws-session-token", rf"FwoGZXIvYXdz{_left(12)}[A-Za-z0-9/+=]{{40,}}+"),
    _token("google-api-key", rf"AIza{_left(4)}[A-Za-z0-9_-]{{35}}{_END}"),
    _token("google-oauth-token", rf"ya29\.{_left(5)}[A-Za-z0-9_-]{{20,}}+"),
    _token("google-client-secret", rf"GOCSPX-{_left(7)}[A-Za-z0-9_-]{{20,}}+"),
    _token("huggingface-token", rf"hf_{_left(3)}[A-Za-z0-9]{{30,}}+"),
    _token("huggingface-token", rf"api_org_{_left(8)}[A-Za-z0-9]{{30,}}+"),
    _token("npm-token", rf"npm_{_left(4)}[A-Za-z0-9]{{36,}}+"),
    _token("pypi-token", rf"pypi-AgEIcHlwaS5vcmc{_left(20)}[A-Za-z0-9_-]{{50,}}+"),
    _token("twilio-key", rf"SK{_left(2)}[0-9a-fA-F]{{32}}(?![A-Za-z0-9])"),
    _token("sendgrid-key", rf"SG\.{_left(3)}[A-Za-z0-9_-]{{22}}\.[A-Za-z0-9_-]{{43}}{_END}"),
    _token("jwt", rf"eyJ{_left(3)}[A-Za-z0-9_-]{{8,}}+\.eyJ[A-Za-z0-9_-]{{8,}}+\.[A-Za-z0-9_-]*+"),
    _token("digitalocean-token", rf"do[por]_v1_{_left(7)}[a-f0-9]{{64}}"),
    _token("databricks-token", rf"dapi{_left(4)}[a-f0-9]{{32}}(?:-\d)?(?![A-Za-z0-9])"),
    _token("shopify-token", rf"shp(?:at|ca|pa|ss)_{_left(6)}[a-fA-F0-9]{{32}}"),
    _token("age-secret-key", r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"),
    _token("url-password", r"://(?<=[A-Za-z0-9]://)[^\s:/@\"'<>\\?#\[\]]{0,256}+:(?P<v>[^\s/\"'<>\\?#]{1,1024})@"
                           r"(?=[A-Za-z0-9\[])", checked=True),
    *(_token("password", rf"{flag}{_left(len(flag))}[\"']?[^\s:\"'\\]{{1,256}}+:"
                         rf"(?!\d++(?![^\s\"'\\]))(?P<v>[^\s\"'\\]{{1,1024}}+)", checked=True)
      for flag in ("-u ", "--user ", "--user=")),
)

_SEP = r"""(?:["']|\\\\{0,6}+["']|)[ \t]{0,16}+(?::=|=>|[:=])(?![=>])[ \t]{0,16}+"""
"""Between a key and its value: a closing quote (escaped or not), `:`, `=`, `:=` or `=>`, spaces. The quote
is a choice of alternatives that each start with a literal, which the regex engine passes over in C."""
_NOT_REF = r"(?![$%<\[{])"
_BARE = r"!#$%*+\-./0-9:=?@A-Z^_a-z~"
"""Characters of an unquoted value; an `&` belongs to one too unless it starts the next `name=`."""
_BARE_START = r"!#*+\-./0-9:=?@A-Z^_a-z~&"
"""What an unquoted value may start with: not `$` or `%`, which start references (`_NOT_REF`)."""
_VALUE = rf""""{_NOT_REF}(?P<v>(?:[^"\\\r\n]|\\[^\r\n]){{{MIN_VALUE},4096}}+)"
|'{_NOT_REF}(?P<v2>[^'\\\r\n]{{{MIN_VALUE},4096}}+)'
|\\(?P<eq>\\{{0,6}})"{_NOT_REF}(?P<v3>[^"\\\r\n]{{{MIN_VALUE},4096}}+)\\(?P=eq)"
|(?=[{_BARE_START}][{_BARE}&]{{{MIN_VALUE - 1}}})
 (?>(?=[{_BARE}]{{0,4095}}+&)(?P<v5>(?:[{_BARE}]|&(?![A-Za-z_][\w.-]{{0,30}}=)){{{MIN_VALUE},4096}}+)
   |(?P<v4>[{_BARE}]{{{MIN_VALUE},4096}}+))
 (?:(?![(\[])|(?P<skip>))"""
"""A credential's value (for verbose patterns): double-quoted, single-quoted, JSON-escaped or bare.

A bare value goes a character at a time only when an `&` interrupts it (`v5`); otherwise one fast run
(`v4`). A bare value followed by `(` or `[` is code, not a secret: the empty `skip` group then ends the
match after it, as every later key inside it would end at the same bracket; without that, `token=token=…(`
would be rescanned from every key.
"""
_KEY_QUALIFIERS = ("api", "app", "auth", "x-api", "access", "secret", "master", "client", "private", "signing",
                   "account", "session", "license", "consumer", "encryption", "sharedaccess", "shared_access")


def _alternation(words: list[str]) -> str:
    """`words` as one group with common prefixes factored out (`a(?:pi_key|uth)`): the regex engine then
    enters one branch per character instead of one per word sharing it."""
    if len(words) == 1:
        return re.escape(words[0])
    by_first: dict[str, list[str]] = {}
    for word in words:
        by_first.setdefault(word[:1], []).append(word[1:])
    if len(by_first) == 1 and "" not in by_first:
        [(first, rests)] = by_first.items()
        return re.escape(first) + _alternation(rests)
    branches = [re.escape(first) + _alternation(rests) for first, rests in sorted(by_first.items()) if first]
    return f"(?:{'|'.join(branches)}{'|' if '' in by_first else ''})"


def _qualified_key() -> str:
    """`key` right after a qualifier (`api_key`, `AccountKey`).

    One lookbehind dispatches on the character before `key` (or before its `_`), where the regex engine
    passes over alternatives that start with another literal in C; only the qualifiers ending in that
    character are then checked whole. Qualifiers ending in another (`x-api`, `sharedaccess`) add nothing.
    """
    words = [word for word in _KEY_QUALIFIERS
             if not any(word != other and word.endswith(other) for other in _KEY_QUALIFIERS)]
    by_end: dict[str, dict[int, list[str]]] = {}
    for word in words:
        by_end.setdefault(word[-1], {}).setdefault(len(word), []).append(word)
    branches = []
    for last, by_width in by_end.items():
        checks = [f"(?<={'|'.join(same)})" for same in by_width.values()]  # a lookbehind has one width
        branches.append(last + (checks[0] if len(checks) == 1 else f"(?:{'|'.join(checks)})"))
    ends = "|".join(branches)
    return f"key(?<=(?:{ends}|[_.-](?<=(?:{ends}).))key)"


_PASSWORD_KEYS = (r"pass(?:word|wd|phrase|(?<![a-z]pass))", r"pwd(?<![a-z]pwd)")
_CREDENTIAL_KEYS = (r"secret", r"token", r"credentials?", _qualified_key(), r"private[_.-]?key[_.-]?id",
                    r"auth(?<![a-z]auth)", r"sharedaccesssignature")


def _keyword(kind: str, key: str) -> _Rule:
    return _Rule(kind, re.compile(f"{key}{_SEP}(?:{_VALUE})", _ASCII | re.VERBOSE), lowered=True,
                 triggers=(re.match("[a-z]+", key).group()[:4],))


_QUERY_NAMES = ("access_token|refresh_token|id_token|auth_token|token|api_key|api-key|apikey|key|client_secret"
                "|private_token|x-amz-signature|x-amz-credential|x-amz-security-token|x-goog-signature"
                "|x-goog-credential|signature|sig|password|passwd|pwd|secret|code|session|sessionid|jwt|auth")
_CONTEXT_RULES = (
    _Rule("authorization", re.compile(
        r"""authorization(?:\\{0,7}["'])?[ \t]{0,16}+[:=][ \t]{0,16}+(?:\\{0,7}["'])?(?:
              (?:bearer|basic|token|bot|apikey|sso-key|jwt|otp)[ \t]++(?P<v>[^\s"'\\,;]{1,8192}+)
            | (?:digest|aws4-hmac-sha256|negotiate|ntlm|hmac|signature)[ \t]++(?P<v2>[^"'\\\r\n]{1,8192}+)
            | (?P<v3>[^\s"'\\,;]{8,8192}+))""", _ASCII | re.VERBOSE), lowered=True),
    *(_Rule("url-query", re.compile(rf"{separator}{_alternation(_QUERY_NAMES.split('|'))}="
                                    rf"(?P<v>[^&\s#\"'<>\\]{{4,4096}}+)", _ASCII),
            lowered=True) for separator in (r"[?&;](?=[a-z])(?:amp;|)", r"\\u0026")),
    _Rule("credential", re.compile(rf"--(?=[a-z]){_left(2)}(?:[a-z0-9]+-)*+(?:password|passwd|token|secret|api-key|apikey)"
                                   rf"[ \t]++(?!-)(?:{_VALUE})", _ASCII | re.VERBOSE), lowered=True),
    *(_keyword("password", key) for key in _PASSWORD_KEYS),
    *(_keyword("credential", key) for key in _CREDENTIAL_KEYS),
)
_RULES = _TOKEN_RULES + _CONTEXT_RULES
_KIND_ORDER = {kind: index for index, kind in enumerate(dict.fromkeys([rule.kind for rule in _RULES] + ["cookie"]))}
_MARKERS = {kind: MARKER.format(kind) for kind in _KIND_ORDER}
_COOKIE = re.compile(r"""cookie(?:\\{0,7}["'])?[ \t]{0,16}+:[ \t]{0,16}+(?:\\{0,7}["'])?(?P<v>[^\r\n"'\\]{1,8192}+)""",
                     _ASCII)
_COOKIE_PAIR = re.compile(r"[ \t]*+(?P<name>[^=;\s]++)(?:=(?P<v>[^;]{1,8192}+))?", _ASCII)
"""A `name=value` pair; a name without a value is matched too (and passed over), so that no position
inside it is tried again."""
_COOKIE_ATTRIBUTES = frozenset({"path", "domain", "expires", "max-age", "samesite", "priority", "partitioned"})


def _triggers(rule: _Rule) -> tuple[str, ...]:
    """Literals one of which every match of `rule` contains: given, or the pattern's leading literal, or `=`."""
    return rule.triggers or (re.match(r"[A-Za-z0-9_ :/-]*", rule.pattern.pattern).group().lower() or "=",)


_TRIGGER = re.compile("|".join(sorted({re.escape(t) for rule in _RULES for t in _triggers(rule)} | {"cookie"})))

# --- what is not a secret -----------------------------------------------------------------------------------------

_STOPWORDS = frozenset("""string str boolean bool number int integer object optional required undefined null none nil
true false hidden secret secrets password passwd token redacted default provided missing invalid expired unset empty
example masked sensitive notset bearer basic""".split())
_PLACEHOLDER_WORDS = re.compile(_alternation("""your example placeholder redacted dummy sample insert replace xxxx
process.env environ getenv secrets. env( env. vault:""".split()))
_STANDS_FOR = re.compile(r"[A-Z][A-Z0-9]*+(?:_[A-Z0-9]++)+"         # an environment variable's name
                         r"|[A-Za-z_]\w*+(?:\.[A-Za-z_]\w*+)+(?:\(\))?"  # attribute access or a call
                         r"|[~/][\w./-]*+"                           # a path
                         r"|[xX*•.#_0-]++")                          # a mask


def is_placeholder(value: str) -> bool:
    """Whether a value only stands for a secret (a variable, a mask, an example) rather than being one."""
    text = value.strip()
    if not text or text[0] in "$%{<[" or text.endswith(("...", "…")):
        return True
    lowered = text.lower()
    return bool(lowered in _STOPWORDS or _PLACEHOLDER_WORDS.search(lowered) or _STANDS_FOR.fullmatch(text))


# --- scanning ------------------------------------------------------------------------------------------------------

def _ascii_lower(text: str) -> str:
    """`text` lower-cased with every index unchanged (ASCII letters only when lower() would shift them)."""
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered
    return text.translate({code: code + 32 for code in range(65, 91)})


def _placeholder(value: str, known: dict[str, bool]) -> bool:
    """`is_placeholder(value)`, decided once per scan: several rules may find one value, and text dense
    with secrets repeats its values."""
    if value not in known:
        known[value] = is_placeholder(value)
    return known[value]


def _rule_spans(rule: _Rule, text: str, subject: str, known: dict[str, bool]) -> list[tuple[int, int, str]]:
    matches, groups, kind = rule.pattern.finditer(subject), rule.groups, rule.kind
    if len(groups) > 1:
        spans = [match.span(match.lastgroup) for match in matches if match.lastgroup != "skip"]
    else:
        group = groups[0] if groups else 0
        spans = [match.span(group) for match in matches]
    if not rule.checked:
        return [(start, end, kind) for start, end in spans]
    return [(start, end, kind) for start, end in spans if not _placeholder(text[start:end], known)]


def _cookie_spans(text: str, lowered: str, known: dict[str, bool]) -> list[tuple[int, int, str]]:
    spans = []
    for header in _COOKIE.finditer(lowered):
        first_only = lowered[max(0, header.start() - 4):header.start()] == "set-"
        for pair in _COOKIE_PAIR.finditer(text, *header.span("v")):
            name, value = pair.group("name", "v")
            if value is None or name.lower() in _COOKIE_ATTRIBUTES:
                continue
            value, start = value.rstrip(), pair.start("v")
            if not _placeholder(value, known):
                spans.append((start, start + len(value), "cookie"))
            if first_only:
                break
    return spans


def _find(text: str) -> list[list[tuple[int, int, str]]]:
    """Every secret span in `text`: one sorted list per rule that found any."""
    lowered = _ascii_lower(text)
    if len(text) < SMALL_TEXT and not _TRIGGER.search(lowered):
        return []
    spans, known = [], {}
    for rule in _RULES:
        found = _rule_spans(rule, text, lowered if rule.lowered else text, known)
        if found:
            spans.append(found)
    cookies = _cookie_spans(text, lowered, known)
    return spans + [cookies] if cookies else spans


def _merge(found: list[list[tuple[int, int, str]]]) -> list[tuple[int, int, str]]:
    """Spans in order, overlaps joined. Of spans starting at one place the first-listed rule wins,
    so `token:` in `https://x-access-token:…@host` yields to the URL userinfo rule."""
    if len(found) == 1:
        return found[0]
    merged: list[list] = []
    for start, _, end, kind in sorted((s, _KIND_ORDER[k], e, k) for spans in found for s, e, k in spans):
        if merged and start == merged[-1][0]:
            continue
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end, kind])
    return merged


def redact_text(text: str, found: Redactions | None = None) -> str:
    """`text` with every secret replaced by its marker; `found` (if given) counts them by kind."""
    if len(text) < 8:
        return text
    spans = _merge(_find(text))
    if not spans:
        return text
    if found is not None:
        found.counts.update(kind for _, _, kind in spans)
    pieces, position = [], 0
    for start, end, kind in spans:
        pieces += (text[position:start], _MARKERS[kind])
        position = end
    pieces.append(text[position:])
    return "".join(pieces)


# --- JSON values ----------------------------------------------------------------------------------------------------

_HEADER_KEYS = frozenset({"authorization", "proxy-authorization"})
_COOKIE_KEYS = frozenset({"cookie", "set-cookie"})
_PASSWORD_KEY = re.compile(f"(?:{'|'.join(_PASSWORD_KEYS)})$", _ASCII)
_CREDENTIAL_KEY = re.compile(f"(?:{'|'.join(_CREDENTIAL_KEYS)})$", _ASCII)
_SCHEME = re.compile(r"(?:bearer|basic|token|bot|digest|apikey|aws4-hmac-sha256)\s+", re.IGNORECASE)


def redact_value(value, found: Redactions | None = None):
    """A copy of a JSON value with secrets redacted in every string (keys are kept).

    A string under a credential-named key (`"api_key": "…"`) is replaced whole;
    a string holding a JSON document is decoded, redacted and re-encoded.
    Raises RedactionError when the value is nested too deeply to scan.
    """
    found = found if found is not None else Redactions()
    try:
        return _redact(value, found, 0)
    except RecursionError:
        raise RedactionError("a value is nested too deeply to scan for secrets") from None


def _redact(value, found: Redactions, level: int):
    if isinstance(value, str):
        return _redact_string(value, found, level)
    if isinstance(value, list):
        return [_redact(item, found, level) for item in value]
    if isinstance(value, dict):
        return {key: _redact_member(key, item, found, level) for key, item in value.items()}
    return value


def _redact_member(key, value, found: Redactions, level: int):
    if not isinstance(value, str) or not isinstance(key, str) or len(value) < MIN_VALUE:
        return _redact(value, found, level)
    lowered = key.lower()
    if lowered in _COOKIE_KEYS:
        return redact_text(f"Cookie: {value}", found)[len("Cookie: "):]
    kind = _member_kind(lowered)
    scheme = _SCHEME.match(value) if kind == "authorization" else None
    secret = value[scheme.end():] if scheme else value
    if kind is None or is_placeholder(secret):
        return _redact(value, found, level)
    found.counts[kind] += 1
    return value[:len(value) - len(secret)] + MARKER.format(kind)


def _member_kind(key: str) -> str | None:
    """The kind of secret a JSON member named `key` holds, if its name says it holds one."""
    if key in _HEADER_KEYS:
        return "authorization"
    if _PASSWORD_KEY.search(key):
        return "password"
    return "credential" if _CREDENTIAL_KEY.search(key) else None


def _redact_string(text: str, found: Redactions, level: int) -> str:
    document = _embedded_json(text, level)
    if document is None:
        return redact_text(text, found)
    local = Redactions()
    cleaned = _redact(document, local, level + 1)
    if not local.total:
        return redact_text(text, found)
    found.counts.update(local.counts)
    return _reencode(cleaned, text)


def _embedded_json(text: str, level: int):
    """The object or array `text` serializes, if it is one (and may be decoded at this level)."""
    stripped = text.strip()
    if (level >= MAX_JSON_LEVELS or len(text) > MAX_JSON_IN_STRING or stripped[:1] not in ("{", "[")
            or stripped[-1:] not in ("}", "]")):
        return None
    try:
        document = json.loads(stripped)
    except (ValueError, RecursionError):
        return None
    return document if isinstance(document, (dict, list)) else None


def _reencode(document, original: str) -> str:
    """`document` serialized in the layout of `original` (indentation, separators, escaping, outer spaces)."""
    stripped = original.strip()
    lines = stripped.split("\n", 2)
    indent = len(lines[1]) - len(lines[1].lstrip(" ")) if len(lines) > 1 else None
    compact = indent is None and ", " not in stripped and ": " not in stripped
    text = json.dumps(document, ensure_ascii=stripped.isascii(), indent=indent or None,
                      separators=(",", ":") if compact else ((",", ": ") if indent else (", ", ": ")))
    head = original[:len(original) - len(original.lstrip())]
    return head + text + original[len(original.rstrip()):]
