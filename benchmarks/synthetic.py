"""A seeded generator of long, realistic coding-agent runs with planted facts.

The run looks like what a coding agent's graph holds after many steps: a system prompt, several
user turns, and between them AI messages calling `read_file`, `grep` and `run_tests` (sometimes
two or three in parallel), tool outputs of varied size (200 to 8,000 characters, mostly small),
occasional tool errors, short AI notes and a final answer per turn.

Facts are planted as lines `FACT-0001: <text>` inside some user messages and tool outputs, never
on their first line (transcript renderers prefix the first line with a role). Benchmarks check
whether each fact is still visible in the final prompt, or can be recovered from state and
archive.

Same `seed` and `n_messages`, same run, byte for byte: ids are derived from positions.

Example:
    >>> run = generate_run(300, seed=7)
    >>> len(run.messages) >= 300, run.messages[0].type, run.messages[1].type
    (True, 'system', 'human')
    >>> all(f.message_id for f in run.facts)
    True
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

__all__ = ["FACT_RE", "PlantedFact", "SyntheticRun", "generate_run"]

FACT_RE = re.compile(r"FACT-\d{4}: [A-Za-z0-9 ,=._/-]+[A-Za-z0-9]")
"""A planted fact as it appears in text: `FACT-0001: <words>` (no markup characters)."""

SYSTEM_PROMPT = """\
You are a senior software engineer working in a Python repository through tools.
Tools: read_file(path) returns a file's text; grep(pattern, path) searches the tree;
run_tests(target) runs pytest on a file or directory and returns its report.
Work step by step: look at the code before changing it, keep changes small, run the tests
after each change, and explain what you did when the user's request is done.
Never invent file contents; if a tool fails, read the error and try a better call.
Keep notes of identifiers, paths and numbers the user gives you: they matter later."""

_MODULES = [
    "billing",
    "invoices",
    "ledger",
    "accounts",
    "auth",
    "sessions",
    "scheduler",
    "workers",
    "storage",
    "cache",
    "search",
    "reports",
    "exports",
    "webhooks",
    "notifications",
    "pricing",
]
_WORDS = [
    "amount",
    "balance",
    "batch",
    "buffer",
    "client",
    "config",
    "currency",
    "cursor",
    "deadline",
    "entry",
    "event",
    "handler",
    "items",
    "key",
    "limit",
    "lock",
    "offset",
    "order",
    "page",
    "payload",
    "queue",
    "record",
    "region",
    "request",
    "result",
    "retry",
    "row",
    "schema",
    "state",
    "status",
    "tenant",
    "timeout",
    "token",
    "total",
    "user",
    "value",
    "window",
]
_VERBS = ["load", "parse", "apply", "compute", "flush", "merge", "resolve", "validate", "sync"]
_FACT_SUBJECTS = [
    "the staging database host is db-{n}.internal.example.org",
    "invoice rounding must use banker rounding with scale {n}",
    "the customer id under investigation is CUST-{n}",
    "the retry budget for webhooks is {n} attempts",
    "feature flag fast_ledger_{n} must stay disabled",
    "the regression started in release 4.{n}.2",
    "tenant t{n} uses the legacy pricing table",
    "the cache key prefix is v{n}_prices",
    "the cron job runs at minute {n} past each hour",
    "max page size for exports is {n} rows",
    "ticket BUG-{n} tracks the flaky scheduler test",
    "the signing key was rotated on day {n} of the quarter",
]
_TASKS = [
    "The invoice totals are off by one cent for some currencies. Find out why and fix it.",
    "Exports time out for big tenants. Make the export paginate and add a test for it.",
    "The scheduler runs some jobs twice after a restart. Track it down and fix it.",
    "Add a retry with backoff to webhook delivery and cover it with tests.",
    "Search returns stale results after an update. Fix the cache invalidation.",
    "Session tokens are not refreshed near expiry. Fix the refresh window.",
    "The ledger balance report double counts reversed entries. Fix the query.",
    "Pricing for tenants on the legacy table is wrong. Make it use the right table.",
]


@dataclass(frozen=True, slots=True)
class PlantedFact:
    """One planted fact and where it lives."""

    fact_id: str
    """`FACT-0001`, ..."""
    text: str
    """The whole fact line, `FACT-0001: ...`."""
    message_id: str
    """Id of the message that carries it."""
    index: int
    """Position of that message in the run."""


@dataclass(slots=True)
class SyntheticRun:
    """A generated run: the messages and the facts planted in them."""

    messages: list[BaseMessage]
    facts: list[PlantedFact] = field(default_factory=list)


class _Gen:
    def __init__(self, seed: int, fact_rate: float) -> None:
        self.rng = random.Random(seed)
        self.fact_rate = fact_rate
        self.messages: list[BaseMessage] = []
        self.facts: list[PlantedFact] = []
        self.calls = 0

    # --- text --------------------------------------------------------------------------

    def ident(self) -> str:
        r = self.rng
        return f"{r.choice(_VERBS)}_{r.choice(_WORDS)}"

    def path(self) -> str:
        r = self.rng
        mod = r.choice(_MODULES)
        return f"src/app/{mod}/{r.choice(['core', 'models', 'service', 'api', 'utils'])}.py"

    def code_line(self, indent: int) -> str:
        r = self.rng
        pad = "    " * indent
        kind = r.random()
        a, b = r.choice(_WORDS), r.choice(_WORDS)
        if kind < 0.15:
            return f"{pad}def {self.ident()}(self, {a}, {b}=None):"
        if kind < 0.3:
            return f"{pad}if {a} is None or {b} > self.{r.choice(_WORDS)}:"
        if kind < 0.45:
            return f"{pad}{a} = self._{self.ident()}({b}, limit={r.randint(1, 500)})"
        if kind < 0.55:
            return f"{pad}return {a}.{r.choice(_VERBS)}({b})"
        if kind < 0.65:
            return f"{pad}# {r.choice(_VERBS)} the {a} before the {b} is committed"
        if kind < 0.75:
            return f"{pad}for {a} in self.{b}s:"
        if kind < 0.85:
            return f'{pad}logger.debug("{r.choice(_VERBS)} %s for %s", {a}, {b})'
        return f"{pad}raise {r.choice(['ValueError', 'KeyError', 'RuntimeError'])}({a!r})"

    def sized(self, lines_fn: object, target: int) -> str:
        out: list[str] = []
        size = 0
        i = 0
        while size < target:
            line = lines_fn(i)  # type: ignore[operator]
            out.append(line)
            size += len(line) + 1
            i += 1
        return "\n".join(out)

    def output_size(self) -> int:
        # Mostly small outputs, a long tail of big ones: log-uniform over 200..8000 characters.
        return int(200 * (40 ** self.rng.random()))

    def maybe_fact(self, text: str, message_index: int, message_id: str) -> str:
        if self.rng.random() >= self.fact_rate:
            return text
        n = len(self.facts) + 1
        fact_id = f"FACT-{n:04d}"
        body = self.rng.choice(_FACT_SUBJECTS).format(n=self.rng.randint(10, 9999))
        line = f"{fact_id}: {body}"
        lines = text.split("\n")
        at = self.rng.randint(1, max(1, len(lines)))  # never the first line
        lines.insert(at, line)
        self.facts.append(PlantedFact(fact_id, line, message_id, message_index))
        return "\n".join(lines)

    # --- messages ------------------------------------------------------------------------

    def add(self, message: BaseMessage) -> None:
        self.messages.append(message)

    def next_id(self) -> str:
        return f"syn-{len(self.messages):06d}"

    def user(self, turn: int) -> None:
        r = self.rng
        task = _TASKS[turn % len(_TASKS)]
        extra = [
            f"Start from {self.path()} and check the callers of {self.ident()}.",
            f"Please keep the public API of {r.choice(_MODULES)} unchanged.",
            "Run the tests for the affected module when you are done.",
        ]
        text = task + "\n" + "\n".join(r.sample(extra, k=r.randint(1, 3)))
        mid = self.next_id()
        self.fact_rate, saved = min(1.0, self.fact_rate * 6), self.fact_rate
        text = self.maybe_fact(text, len(self.messages), mid)
        self.fact_rate = saved
        self.add(HumanMessage(text, id=mid))

    def tool_output(self, name: str, args: dict[str, str], error: bool) -> str:
        r = self.rng
        if error:
            if name == "read_file":
                return (
                    "Error: FileNotFoundError: [Errno 2] No such file or directory:"
                    f" '{args['path']}'"
                )
            if name == "grep":
                return f"Error: grep: invalid regular expression: {args['pattern']}("
            return "Error: pytest exited with code 4: usage error, file or directory not found"
        size = self.output_size()
        if name == "read_file":
            return self.sized(lambda i: f"{i + 1:4d}  " + self.code_line(r.randint(0, 3)), size)
        if name == "grep":
            return self.sized(
                lambda i: f"{self.path()}:{r.randint(1, 900)}:    " + self.code_line(1).strip(),
                size,
            )
        rule = "=" * 29
        head = f"{rule} test session starts {rule}\ncollected {r.randint(5, 400)} items\n"

        def test_line(i: int) -> str:
            status = "PASSED" if r.random() > 0.08 else "FAILED"
            return f"tests/test_{r.choice(_MODULES)}.py::test_{self.ident()}_{i} {status}"

        body = self.sized(test_line, max(size - len(head) - 80, 50))
        failed, passed, secs = r.randint(0, 9), r.randint(5, 400), r.uniform(0.5, 90)
        tail = f"\n{'=' * 10} {failed} failed, {passed} passed in {secs:.2f}s {'=' * 10}"
        return head + body + tail

    def tool_step(self) -> None:
        r = self.rng
        n_calls = 1 if r.random() > 0.15 else r.randint(2, 3)
        calls = []
        for _ in range(n_calls):
            self.calls += 1
            name = r.choices(["read_file", "grep", "run_tests"], weights=[5, 3, 2])[0]
            if name == "read_file":
                args = {"path": self.path()}
            elif name == "grep":
                args = {"pattern": self.ident(), "path": "src/app"}
            else:
                args = {"target": f"tests/test_{r.choice(_MODULES)}.py"}
            calls.append({"name": name, "args": args, "id": f"call_{self.calls:06d}"})
        thought = ""
        if r.random() < 0.4:
            thought = f"Let me look at how {self.ident()} handles the {r.choice(_WORDS)}."
        self.add(AIMessage(thought, tool_calls=calls, id=self.next_id()))
        for call in calls:
            error = r.random() < 0.06
            mid = self.next_id()
            text = self.tool_output(call["name"], call["args"], error)
            if not error:
                text = self.maybe_fact(text, len(self.messages), mid)
            self.add(
                ToolMessage(
                    text,
                    tool_call_id=call["id"],
                    name=call["name"],
                    id=mid,
                    status="error" if error else "success",
                )
            )

    def final_answer(self) -> None:
        r = self.rng
        text = (
            f"Done. I changed {self.path()} so that {self.ident()} checks the "
            f"{r.choice(_WORDS)} first, and the tests for {r.choice(_MODULES)} pass."
        )
        self.add(AIMessage(text, id=self.next_id()))


def generate_run(
    n_messages: int, *, seed: int = 0, turn_length: int = 400, fact_rate: float = 0.03
) -> SyntheticRun:
    """Generate a coding-agent run of at least `n_messages` messages.

    Args:
        n_messages: Minimum length; the run ends with a final AI answer after reaching it.
        seed: Random seed; same seed, same run.
        turn_length: Average messages per user turn.
        fact_rate: Chance that a tool output carries a planted fact (user messages: 6x).

    Returns:
        The messages (system first) and the planted facts.
    """
    gen = _Gen(seed, fact_rate)
    gen.add(SystemMessage(SYSTEM_PROMPT, id="syn-system"))
    turn = 0
    while len(gen.messages) < n_messages:
        gen.user(turn)
        steps = max(2, int(gen.rng.gauss(turn_length / 2.4, turn_length / 8)))
        for _ in range(steps):
            gen.tool_step()
            if len(gen.messages) >= n_messages:
                break
        gen.final_answer()
        turn += 1
    return SyntheticRun(gen.messages, gen.facts)
