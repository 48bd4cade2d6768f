"""`/context`: where the context window goes, from the API's own counts (SPEC §7).

Each part — system prompt, tools, memory files, checkpoint and evidence, the
conversation — is measured with `count_tokens` (a part's figure is the
count with it minus the count without it); what cannot be counted is `n/a`,
never an estimate.
"""

from khaelor.model import ModelClient
from khaelor.status import context_window

PROBE = [{"role": "user", "content": "."}]
MEMORY_MARK = "\n\nInstructions from "


def budget(client: ModelClient, model: str, system: str, tools: list[dict], messages: list[dict],
           checkpoint: dict | None) -> list[tuple[str, int | None]]:
    """(part, tokens) rows; None where the API could not count."""
    def count(**body) -> int | None:
        return client.count_tokens(model=model, **body)

    def minus(value: int | None, *others: int | None) -> int | None:
        return None if value is None or any(o is None for o in others) else value - sum(others)

    base = count(messages=PROBE)
    split = system.find(MEMORY_MARK)
    memory_text = system[split:] if split >= 0 else ""
    whole_system = minus(count(system=system, messages=PROBE), base)
    memory = minus(count(system=memory_text, messages=PROBE), base) if memory_text else 0
    tool_tokens = minus(count(tools=tools, messages=PROBE), base)
    saved = count(messages=[checkpoint]) if checkpoint else 0
    if messages:
        total = count(system=system, tools=tools, messages=messages)
        conversation = minus(total, whole_system, tool_tokens, saved)
    else:
        total = None if whole_system is None or tool_tokens is None else whole_system + tool_tokens
        conversation = 0
    window = context_window(model)
    return [
        ("system prompt", minus(whole_system, memory)),
        ("tools", tool_tokens),
        ("memory files", memory),
        ("checkpoint + evidence", saved),
        ("conversation", conversation),
        ("free", minus(window, total) if window else None),
    ]


def render(rows: list[tuple[str, int | None]], window: int | None) -> list[str]:
    """One aligned line per part, with its share of the window when known."""
    lines = []
    for label, tokens in rows:
        share = f" ({tokens / window:.1%})" if tokens is not None and window else ""
        lines.append(f"{label:<22} {'n/a' if tokens is None else f'{tokens:,}'}{share}")
    return lines
