"""A ratio per part of the prompt, learned from the provider's counts, and kept safe.

A provider bills the parts of a prompt differently: llama.cpp's server renders SmolLM2's chat
template, which shows each message's text and drops tool calls and tool schemas, so a prompt
full of tool calls is billed at half the package's estimate and a prompt of plain tool output
at nine tenths of it. One scalar ratio learned on the first and applied to the second counted
a prompt at 2,425 tokens that the server counted at 3,801. So each observation keeps the
prompt's raw estimate by part (`ApproximateCounter.raw_parts`: text, tool calls, media, tool
schemas, frame), and `fit` solves for one ratio per part such that the parts, each scaled,
add up to what the provider reported, over the newest `WINDOW` observations:

- least squares on each observation's error relative to our raw estimate, each ratio within
  `[0, MAX_RATIO]` (0: a part the provider does not bill at all), solved exactly (`_solve`);
- each ratio pulled towards 1, message text and media much harder (`TEXT_PRIOR_WEIGHT`) than
  tool calls, tool schemas and the frame (`PRIOR_WEIGHT`). The prompts of one thread grow by a
  message or two a call, so the observations often differ too little to tell two parts apart
  (the schemas are the same in every prompt; an agent's steps mix text and calls alike); the
  prior then decides which part the provider bills less. Message text is what every chat
  template shows as it is; calls, schemas and the frame are what templates drop or reformat.
  So the difference goes to them, and a later prompt of plain text is not counted at what a
  prompt of tool calls was billed;
- an observation the fit misses by more than `OUTLIER` is left out (one odd report, say a
  cached prompt's, does not move the ratios), and a report is taken within
  `OBSERVED_RANGE` of our raw estimate.

`applied` then keeps the ratios safe to count with: a ratio under 1 lets a build hold more
than the raw estimate allows, so it applies only to a part the observations could learn it
on: from `TRUST_BELOW_ONE` observations on, and only to a part with at least `MIN_SHARE` of
the raw estimate over them. A part unseen (no media so far), or seen too little to tell its
ratio from the noise of the others, is counted at least at its raw estimate. And what the
newest counts fell short of the provider's by (`margin`) raises the next ones: a ratio that
drifts (the text of one file tokenizes a few percent denser than the last) is caught up with
before a prompt at the limit passes it.

Pure and deterministic: the same observations give the same ratios, to the bit.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from langgraph_ctx.tokens.approximate import PARTS

WINDOW = 9
"""Observations the fit is made over (the newest)."""
PRIOR_WEIGHT = 1e-3
"""Weight of the prior ratio of 1 for tool calls, tool schemas and the frame, against 1 per
observation: small, one observation's error of 3% outweighs such a part's ratio moving by 1."""
TEXT_PRIOR_WEIGHT = 0.1
"""Weight of the prior ratio of 1 for message text and media.

Large enough that a difference the observations cannot place goes to the other parts, small
enough that the text's own ratio (nine tenths of our estimate for SmolLM2's tokenizer) is
learned: text is most of a prompt, so its observations weigh several times more. Chosen on
the recorded runs replayed against llama.cpp (`benchmarks.ratio_rules`; figures in
docs/benchmarks.md) and `tests/unit/test_calibration_rules.py` (a prompt of plain text after
prompts of tool calls)."""
MAX_RATIO = 2.0
"""Highest ratio of a part."""
TRUST_BELOW_ONE = 3
"""Observations needed before a ratio under 1 is applied.

A first prompt of a few words beside tool schemas a server does not bill observes a small
fraction of the estimate; three observations of growing prompts tell the parts apart."""
MIN_SHARE = 0.02
"""Least share of the raw estimate, over the observations, for a part's ratio to go under 1.

A part of under 2% of every prompt (the frame of a few long messages, the instructions beside
a long tool output) is lost in the noise of the others: its fitted ratio may land anywhere,
and a later prompt made of it (a plain tool output after prompts of tool calls, a file written
through a tool call's arguments) would be counted by that. Too low a share keeps the noise;
too high a one counts whole the parts a server does not bill (llama.cpp's tool calls are often
under 2% of a prompt of file text). Chosen on the recorded runs replayed against llama.cpp
(`benchmarks.ratio_rules`; figures in docs/benchmarks.md)."""
RECENT_MISSES = 3
"""The newest observations whose under-count raises the next counts (`margin`)."""
MAX_MARGIN = 0.05
"""The most the next counts are raised by.

The margin catches up with a drift of a few percent; a count further off is an odd report or
a change of what the prompts hold, which the fit itself learns from the next observation. On
the replayed runs it keeps the prompts the package counts within the limit from passing it,
for a little less precision (figures in docs/benchmarks.md)."""
OUTLIER = 0.1
"""An observation the fit misses by more than this (relative to our raw estimate) is left out."""
OBSERVED_RANGE = (0.1, MAX_RATIO)
"""A report is taken as at least a tenth and at most twice our raw estimate."""


def fit(seen: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The ratio of each part that best explains `seen` (`{"parts", "reported"}`, oldest first).

    A part absent from every observation keeps 1.
    """
    rows = [r for r in map(_row, seen[-WINDOW:]) if r is not None]
    if not rows:
        return dict.fromkeys(PARTS, 1.0)
    ratios = _solve(rows)
    if len(rows) >= 4:
        misses = [abs(sum(a * r for a, r in zip(x, ratios, strict=True)) - t) for x, t in rows]
        worst = max(range(len(rows)), key=misses.__getitem__)
        if misses[worst] > OUTLIER:
            ratios = _solve(rows[:worst] + rows[worst + 1 :])
    return {p: round(r, 6) for p, r in zip(PARTS, ratios, strict=True)}


def applied(fitted: Mapping[str, float], seen: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The ratios to count with: `fitted`, not under 1 where the observations cannot tell.

    Each raised by the newest under-count (`margin`).
    """
    recent = seen[-WINDOW:]
    totals = {p: sum(float(s["parts"].get(p, 0.0)) for s in recent) for p in PARTS}
    whole = sum(totals.values())
    scale = 1.0 + margin(seen)
    out = {}
    for p in PARTS:
        ratio = float(fitted.get(p, 1.0))
        learned = len(recent) >= TRUST_BELOW_ONE and whole > 0 and totals[p] >= MIN_SHARE * whole
        out[p] = round((ratio if learned else max(ratio, 1.0)) * scale, 6)
    return out


def margin(seen: Sequence[Mapping[str, Any]]) -> float:
    """How much one of the newest counts fell short of the provider's, at most.

    The largest share by which the package's count (`estimated`) of one of the newest
    `RECENT_MISSES` observations was under the provider's (`reported`), at most `MAX_MARGIN`;
    0 when none was.
    """
    short = [
        (s["reported"] - s["estimated"]) / s["reported"]
        for s in seen[-RECENT_MISSES:]
        if s.get("estimated") is not None and s["reported"] > 0
    ]
    return float(min(max([0.0, *short]), MAX_MARGIN))


def _row(observation: Mapping[str, Any]) -> tuple[list[float], float] | None:
    """The observation as shares of its raw estimate and the reported size over it."""
    parts = observation.get("parts") or {}
    x = [max(0.0, float(parts.get(p, 0.0))) for p in PARTS]
    raw = sum(x)
    if raw <= 0:
        return None
    low, high = OBSERVED_RANGE
    return [v / raw for v in x], min(max(float(observation["reported"]) / raw, low), high)


def _solve(rows: Sequence[tuple[list[float], float]]) -> list[float]:
    """The ratios minimizing sum (a.r - t)^2 + sum w (r - 1)^2 within [0, MAX_RATIO].

    `w` is each part's prior weight (`TEXT_PRIOR_WEIGHT` or `PRIOR_WEIGHT`).

    Exact: the objective is strictly convex, so its minimum over the box is the best of the
    points where each ratio of a part seen is free (solving the normal equations) or at a bound.
    Five parts make at most 3^5 small solves, once per observation.
    """
    n = len(PARTS)
    prior = [1.0] * n
    weights = [TEXT_PRIOR_WEIGHT if p in ("text", "media") else PRIOR_WEIGHT for p in PARTS]
    gram = [[weights[i] * (i == j) for j in range(n)] for i in range(n)]
    rhs = list(weights)
    for a, t in rows:
        for i in range(n):
            rhs[i] += a[i] * t
            for j in range(n):
                gram[i][j] += a[i] * a[j]
    live = [i for i in range(n) if any(a[i] > 0 for a, _ in rows)]
    best, best_value = list(prior), float("inf")
    for states in itertools.product((None, 0.0, MAX_RATIO), repeat=len(live)):
        r = list(prior)
        free = [i for i, s in zip(live, states, strict=True) if s is None]
        for i, s in zip(live, states, strict=True):
            if s is not None:
                r[i] = s
        if free:
            fixed = [j for j in range(n) if j not in free]
            sub = [[gram[i][j] for j in free] for i in free]
            b = [rhs[i] - sum(gram[i][j] * r[j] for j in fixed) for i in free]
            values = _gauss(sub, b)
            if any(not 0.0 <= v <= MAX_RATIO for v in values):
                continue
            for i, v in zip(free, values, strict=True):
                r[i] = v
        value = sum(
            r[i] * (sum(gram[i][j] * r[j] for j in range(n)) - 2 * rhs[i]) for i in range(n)
        )
        if value < best_value - 1e-15:
            best, best_value = r, value
    return best


def _gauss(matrix: list[list[float]], rhs: list[float]) -> list[float]:
    """Solve a small symmetric positive definite system (Gaussian elimination)."""
    m = [[*row, b] for row, b in zip(matrix, rhs, strict=True)]
    n = len(m)
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(m[r][col]))
        m[col], m[pivot] = m[pivot], m[col]
        for r in range(col + 1, n):
            f = m[r][col] / m[col][col]
            for c in range(col, n + 1):
                m[r][c] -= f * m[col][c]
    x = [0.0] * n
    for r in range(n - 1, -1, -1):
        x[r] = (m[r][n] - sum(m[r][c] * x[c] for c in range(r + 1, n))) / m[r][r]
    return x
