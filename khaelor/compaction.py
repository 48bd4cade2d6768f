"""Compaction: distil the older part of the branch into a structured checkpoint (SPEC §7).

The model is asked for a YAML checkpoint with exactly the keys of
`CHECKPOINT_KEYS`; the reply is parsed with `yaml.safe_load` and validated,
retried once, and on failure nothing is compacted. Beside the checkpoint goes
raw evidence taken from the log, never from the model: the exact error
messages of failed tool calls and the diffs of edits, most recent first,
bounded. The result is one `compaction` entry appended at the head; nothing
is rewritten. Its `boundary` names the first entry of the kept tail (a
request of the person's, so a tool_use is never separated from its result);
from then on the branch's messages are the checkpoint, the tail, and what
follows.
"""

import re
from dataclasses import dataclass

import yaml

from khaelor.errors import KhaelorError
from khaelor.session import SessionState, merge_messages

CHECKPOINT_KEYS = ("objective", "completed", "current_state", "important_files", "failed_attempts", "decisions",
                   "running_processes", "next_steps")
LIST_KEYS = ("completed", "important_files", "failed_attempts", "decisions", "running_processes", "next_steps")
EVIDENCE_ITEM = 2_000
EVIDENCE_TOTAL = 12_000
CHECKPOINT_LIMIT = 64_000

INSTRUCTION = """\
The conversation so far is about to be replaced by a checkpoint. Write that checkpoint now: a YAML \
document with exactly these top-level keys and nothing else: objective (string), completed (list of \
strings), current_state (string), important_files (list of mappings with path and reason), \
failed_attempts (list of strings: what was tried and why it failed), decisions (list of strings), \
running_processes (list of strings), next_steps (list of strings). Keep identifiers, file paths, \
commands, rules the person gave and exact error texts verbatim. Reply with the YAML only."""


class CompactionFailed(KhaelorError):
    """The model did not produce a valid checkpoint; nothing was compacted."""


@dataclass
class Plan:
    """What to summarize and where the kept tail starts."""

    span: list[dict]
    boundary: str | None


def plan(state: SessionState) -> Plan | None:
    """The span to compact: everything live before the person's latest request (or all of it)."""
    live = state.live_entries()
    requests = [i for i, entry in enumerate(live) if entry.get("kind") == "user" and i > 0]
    cut = requests[-1] if requests else len(live)
    span = [entry for entry in live[:cut] if entry.get("message")]
    if not span or (len(span) == 1 and span[0].get("kind") == "compaction"):
        return None
    return Plan(merge_messages([entry["message"] for entry in span]), live[cut]["id"] if cut < len(live) else None)


def request_messages(span: list[dict], instructions: str) -> list[dict]:
    """The span followed by the request for a checkpoint."""
    ask = INSTRUCTION + (f"\n\nThe person adds: {instructions}" if instructions else "")
    return merge_messages(span + [{"role": "user", "content": [{"type": "text", "text": ask}]}])


def parse_checkpoint(text: str) -> dict:
    """The checkpoint in a reply; ValueError saying what is wrong."""
    body = _strip_fence(text)
    if len(body) > CHECKPOINT_LIMIT:
        raise ValueError(f"the checkpoint is longer than {CHECKPOINT_LIMIT} characters")
    try:
        data = yaml.safe_load(body)
    except yaml.YAMLError as exc:
        raise ValueError(f"not valid YAML ({getattr(exc, 'problem', None) or exc})") from None
    if not isinstance(data, dict):
        raise ValueError("not a YAML mapping")
    missing = [k for k in CHECKPOINT_KEYS if k not in data]
    extra = [str(k) for k in data if k not in CHECKPOINT_KEYS]
    if missing or extra:
        raise ValueError("keys differ: " + "; ".join(filter(None, [
            f"missing {', '.join(missing)}" if missing else "", f"unexpected {', '.join(extra)}" if extra else ""])))
    for key in LIST_KEYS:
        if data[key] is None:
            data[key] = []
        if not isinstance(data[key], list):
            raise ValueError(f"'{key}' must be a list")
    for item in data["important_files"]:
        if not isinstance(item, dict) or "path" not in item or "reason" not in item:
            raise ValueError("each of 'important_files' needs a path and a reason")
    return data


def _strip_fence(text: str) -> str:
    match = re.search(r"```(?:ya?ml)?\s*\n(.*?)```", text, re.DOTALL)
    return match.group(1) if match else text.strip()


def evidence(state: SessionState) -> dict:
    """Exact failures and edit diffs from the log, most recent first, bounded."""
    errors, diffs, budget = [], [], EVIDENCE_TOTAL
    for call in reversed(list(state.calls.values())):
        result = call.result or {}
        content = str(result.get("content", ""))
        if result.get("is_error") and budget > 0:
            item = f"{call.name} {_brief(call.input)}: {content[:EVIDENCE_ITEM]}"
            errors.append(item)
            budget -= len(item)
        elif call.name == "edit" and "\n--- " in content and budget > 0:
            item = content[content.index("\n--- ") + 1:][:EVIDENCE_ITEM]
            diffs.append(item)
            budget -= len(item)
    return {"errors": errors, "diffs": diffs}


def _brief(arguments) -> str:
    if not isinstance(arguments, dict):
        return ""
    value = arguments.get("command") or arguments.get("path") or arguments.get("pattern") or ""
    return " ".join(str(value).split())[:200]


def checkpoint_message(checkpoint: dict, found: dict) -> dict:
    """The user message that stands for the compacted span."""
    parts = ["[Checkpoint: the earlier part of this conversation was compacted into the summary below; "
             "the evidence after it is copied verbatim from the session log.]",
             "```yaml", yaml.safe_dump(checkpoint, sort_keys=False, allow_unicode=True).rstrip(), "```"]
    if found["errors"]:
        parts += ["", "Exact errors of failed tool calls (most recent first):"]
        parts += [f"- {item}" for item in found["errors"]]
    if found["diffs"]:
        parts += ["", "Diffs of edits (most recent first):"]
        parts += [f"```diff\n{item.rstrip()}\n```" for item in found["diffs"]]
    return {"role": "user", "content": [{"type": "text", "text": "\n".join(parts)}]}
