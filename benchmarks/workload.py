"""The heavy-tailed synthetic workload of the cost benchmark (issue 16), seeded.

One task, then `steps` agent steps. Each step is an AI message with 1, 2 or 3 parallel tool
calls (60/25/15%) and their results. Result sizes are heavy-tailed: 88% log-uniform in 100 to
2,000 tokens, 12% in 5,000 to 20,000 tokens. Results are of realistic kinds: code listings
(`open_file`), grep hits (`search_code`), test sessions (`run_tests`), logs (`read_logs`),
JSON (`http_get`) and directory listings (`list_dir`). No tool is named as one deepagents never
evicts by name (`read_file`, `grep`, `ls`, ...): every output is evictable by every system.
In about 4% of steps the agent writes a progress report and the user answers with a follow-up
request.

Facts are planted in natural forms (a log line, a JSON field, a code comment, a sentence in
a follow-up), each carrying a unique `key` (a host name, an id, a number with its unit) that
the benchmark looks for. Large results carry facts more often than small ones (they are where
agents find things), and a fact sits anywhere in a result, its middle included.

Same seed, same run, byte for byte. Sizes are measured with the exact gpt-4o counter.

Example:
    >>> run = generate_workload(steps=20, seed=1)
    >>> run.messages[0].type, run.messages[1].type, len(run.steps_with_report) >= 0
    ('system', 'human', True)
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from benchmarks.synthetic import _MODULES, _TASKS, _WORDS, _Gen
from langgraph_ctx.tokens import TiktokenCounter

__all__ = ["Fact", "Workload", "generate_workload"]

SYSTEM_PROMPT = """\
You are a senior software engineer working in a Python repository through tools.
Tools: open_file(path), search_code(pattern, path), run_tests(target), read_logs(service, lines),
http_get(url) for the internal admin API, list_dir(path).
Work step by step: look before you change, keep changes small, run the tests after each change.
When you report progress, say what you found and what is left.
Keep notes of identifiers, hosts, ids and numbers you find: they matter later."""

_KINDS = ["open_file", "search_code", "run_tests", "read_logs", "http_get", "list_dir"]
_KIND_WEIGHTS = [30, 20, 15, 15, 10, 10]

# (key template, how the fact reads in prose); {n} is a number unique to the fact.
_FACTS = [
    ("db-{n}.internal.example.org", "the staging database host is {key}"),
    ("CUST-{n}", "the customer under investigation is {key}"),
    ("BUG-{n}", "ticket {key} tracks the flaky scheduler test"),
    ("fast_ledger_{n}", "feature flag {key} must stay disabled"),
    ("release 4.{n}.2", "the regression started in {key}"),
    ("v{n}_prices", "the cache key prefix is {key}"),
    ("tenant t{n}", "{key} uses the legacy pricing table"),
    ("{n} retry attempts", "the webhook retry budget is {key}"),
]


@dataclass(frozen=True, slots=True)
class Fact:
    """A planted fact: the unique `key` whose survival is measured, and where it lives."""

    key: str
    text: str
    message_id: str
    large: bool


@dataclass(slots=True)
class Workload:
    """A generated run: messages, planted facts, and the steps with a progress report."""

    messages: list[BaseMessage]
    facts: list[Fact] = field(default_factory=list)
    steps_with_report: list[int] = field(default_factory=list)


class _Workload(_Gen):
    def __init__(self, seed: int) -> None:
        super().__init__(seed, 0.0)
        self.count = TiktokenCounter("gpt-4o")
        self.used: set[int] = set()
        self.planted: list[Fact] = []

    # --- sizes and text --------------------------------------------------------------------

    def target_tokens(self) -> tuple[int, bool]:
        r = self.rng
        if r.random() < 0.12:
            return r.randint(5_000, 20_000), True
        return int(100 * math.exp(r.random() * math.log(20))), False

    def fact(self) -> tuple[str, str]:
        key_t, prose = self.rng.choice(_FACTS)
        n = self.rng.randint(100, 99_999)
        while n in self.used:
            n = self.rng.randint(100, 99_999)
        self.used.add(n)
        key = key_t.format(n=n)
        return key, prose.format(key=key)

    def line(self, kind: str, i: int) -> str:
        r = self.rng
        if kind == "open_file":
            return f"{i + 1:4d}  " + self.code_line(r.randint(0, 3))
        if kind == "search_code":
            return f"{self.path()}:{r.randint(1, 900)}:    " + self.code_line(1).strip()
        if kind == "run_tests":
            status = "PASSED" if r.random() > 0.08 else "FAILED"
            return f"tests/test_{r.choice(_MODULES)}.py::test_{self.ident()}_{i} {status}"
        if kind == "read_logs":
            level = r.choices(["INFO", "DEBUG", "WARN", "ERROR"], weights=[6, 3, 2, 1])[0]
            return (
                f"2026-11-{r.randint(1, 28):02d}T{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:"
                f"{r.randint(0, 59):02d}.{r.randint(0, 999):03d}Z {level} "
                f"{r.choice(_MODULES)}.{self.ident()}: {r.choice(_WORDS)}={r.randint(0, 9999)} "
                f"{r.choice(_WORDS)}={r.choice(_WORDS)} took {r.randint(1, 900)}ms"
            )
        if kind == "http_get":
            item = {
                "id": f"{r.choice(_WORDS)}_{r.randint(1000, 99999)}",
                "status": r.choice(["active", "pending", "failed", "archived"]),
                r.choice(_WORDS): r.randint(0, 10_000),
                "updated_at": f"2026-11-{r.randint(1, 28):02d}",
            }
            return "  " + json.dumps(item) + ","
        mod = r.choice(_MODULES)
        size = r.randint(120, 90_000)
        return f"-rw-r--r--  1 dev dev {size:>7d}  src/app/{mod}/{self.ident()}.py"

    def fact_line(self, kind: str, prose: str, key: str) -> str:
        r = self.rng
        if kind in ("open_file", "search_code"):
            return f"    # NOTE: {prose}"
        if kind == "read_logs":
            return f"2026-11-{r.randint(1, 28):02d}T08:00:00.000Z WARN config: {prose}"
        if kind == "http_get":
            return "  " + json.dumps({"note": prose}) + ","
        if kind == "run_tests":
            return f"E   AssertionError: {prose}"
        return f"-rw-r--r--  1 dev dev     512  NOTES.txt  ({prose})"

    def output(self, kind: str, mid: str) -> str:
        target, large = self.target_tokens()
        lines: list[str] = []
        tokens = 0
        i = 0
        while tokens < target:
            chunk = [self.line(kind, i + k) for k in range(40)]
            tokens += self.count.count_text("\n".join(chunk)) + 1
            lines.extend(chunk)
            i += 40
        while len(lines) > 1 and tokens > target:  # trim the last chunk to the target
            tokens -= self.count.count_text(lines.pop()) + 1
        if self.rng.random() < (0.3 if large else 0.03):
            key, prose = self.fact()
            at = self.rng.randint(1, len(lines))  # anywhere, the middle included
            lines.insert(at, self.fact_line(kind, prose, key))
            self.planted.append(Fact(key, prose, mid, large))
        if kind == "http_get":
            return "[\n" + "\n".join(lines) + "\n]"
        if kind == "run_tests":
            rule = "=" * 29
            return f"{rule} test session starts {rule}\n" + "\n".join(lines)
        return "\n".join(lines)

    # --- messages --------------------------------------------------------------------------

    def call_args(self, kind: str) -> dict[str, object]:
        r = self.rng
        if kind == "open_file":
            return {"path": self.path()}
        if kind == "search_code":
            return {"pattern": self.ident(), "path": "src/app"}
        if kind == "run_tests":
            return {"target": f"tests/test_{r.choice(_MODULES)}.py"}
        if kind == "read_logs":
            return {"service": r.choice(_MODULES), "lines": r.choice([200, 1000, 5000])}
        if kind == "http_get":
            return {"url": f"/admin/{r.choice(_MODULES)}?page={r.randint(1, 40)}"}
        return {"path": f"src/app/{r.choice(_MODULES)}"}

    def step(self) -> None:
        r = self.rng
        n = r.choices([1, 2, 3], weights=[60, 25, 15])[0]
        calls = []
        for _ in range(n):
            self.calls += 1
            kind = r.choices(_KINDS, weights=_KIND_WEIGHTS)[0]
            calls.append(
                {"name": kind, "args": self.call_args(kind), "id": f"call_{self.calls:06d}"}
            )
        thought = (
            f"Checking how {self.ident()} handles the {r.choice(_WORDS)}."
            if r.random() < 0.4
            else ""
        )
        self.add(AIMessage(thought, tool_calls=calls, id=self.next_id()))
        for call in calls:
            mid = self.next_id()
            text = self.output(str(call["name"]), mid)
            self.add(ToolMessage(text, tool_call_id=call["id"], name=call["name"], id=mid))

    def report_and_follow_up(self) -> None:
        r = self.rng
        self.add(
            AIMessage(
                f"Progress: I traced the problem to {self.path()}; {self.ident()} skips the "
                f"{r.choice(_WORDS)} check. Next I will fix it and run the {r.choice(_MODULES)} "
                "tests.",
                id=self.next_id(),
            )
        )
        text = f"Thanks. Also look at {self.path()} while you are there."
        mid = self.next_id()
        if r.random() < 0.5:
            key, prose = self.fact()
            text += f" For context: {prose}."
            self.planted.append(Fact(key, prose, mid, False))
        self.add(HumanMessage(text, id=mid))


def generate_workload(*, steps: int = 300, seed: int = 16) -> Workload:
    """The issue's synthetic run: one task, `steps` tool steps, reports in ~4% of steps.

    Args:
        steps: Tool steps (AI messages with tool calls).
        seed: Random seed; same seed, same run.
    """
    gen = _Workload(seed)
    gen.add(SystemMessage(SYSTEM_PROMPT, id="wl-system"))
    task = gen.rng.choice(_TASKS) + f"\nStart from {gen.path()}."
    gen.add(HumanMessage(task, id=gen.next_id()))
    reports: list[int] = []
    for k in range(steps):
        gen.step()
        if gen.rng.random() < 0.04:
            gen.report_and_follow_up()
            reports.append(k)
    gen.add(AIMessage("Done: the fix is in and the tests pass.", id=gen.next_id()))
    return Workload(gen.messages, gen.planted, reports)
