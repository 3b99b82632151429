"""The ledger's writes (ledger.py) and the report's recorder (report.py)."""

from __future__ import annotations

import json

from langgraph_ctx.ledger import (
    add_dump_ref,
    adopt_summary,
    empty_ledger,
    fold_summary,
    forget_entries,
    load_ledger,
    record_compacted,
    record_extraction,
    record_pruned,
    set_hint,
    set_window,
)
from langgraph_ctx.report import ContextCostReport, Decision, append_to_ledger_report


def test_fold_summary_covers_each_id_once_and_takes_over_from_the_hint() -> None:
    ledger = empty_ledger()
    set_hint(ledger, text="h", cleared_ids=["a"], dump_ref="r0", prompt_tokens=9, after_id="x")
    fold_summary(ledger, text="one", covered_ids=["a", "b"], dump_ref="r1", source="model")
    fold_summary(ledger, text="two", covered_ids=["b", "c"], dump_ref=None, source="fallback")
    assert ledger["hint"] is None
    assert ledger["summary"] == {
        "text": "two",
        "covered_ids": ["a", "b", "c"],
        "dump_refs": ["r1"],
        "source": "fallback",
        "updates": 2,
    }
    assert not adopt_summary(ledger, "found in the history")  # a summary is kept
    fresh = empty_ledger()
    assert adopt_summary(fresh, "found") and fresh["summary"]["source"] == "input"  # type: ignore[index]
    assert load_ledger(json.loads(json.dumps(ledger))) == ledger  # plain data


def test_entries_window_and_dump_refs() -> None:
    ledger = empty_ledger()
    record_pruned(ledger, "m1", {"tool": "bash", "chars": 10})
    record_compacted(ledger, "m1", {"ref": "r", "tool": "bash", "chars": 10})
    record_pruned(ledger, "m2", {"tool": "bash", "chars": 10})
    assert list(ledger["pruned"]) == ["m2"] and list(ledger["compacted"]) == ["m1"]
    state = dict(ledger)
    forget_entries(state, {"m1", "m2"})
    assert state["pruned"] == {} and state["compacted"] == {}
    assert ledger["pruned"] and ledger["compacted"]  # new dicts, the old ones untouched
    add_dump_ref(state, "d1")
    assert state["summary"] == {"dump_refs": ["d1"]} and ledger["summary"] is None
    set_window(ledger, "s", pin_id="p")
    assert ledger["window"] == {"start_id": "s", "pin_id": "p"}
    set_window(ledger, "s", task_dropped=True)
    assert ledger["window"] == {"start_id": "s", "pin_id": None, "task_dropped": True}
    set_window(ledger)
    assert ledger["window"] == {}


def test_record_extraction_keeps_values_on_failure() -> None:
    ledger = empty_ledger()
    record_extraction(ledger, last_input_id="h1", values={"city": "Oslo"})
    record_extraction(ledger, last_input_id="h2", error="ValueError: no")
    assert ledger["entities"] == {
        "values": {"city": "Oslo"},
        "last_input_id": "h2",
        "error": "ValueError: no",
    }


def test_report_records_and_fails_and_appends_after_the_build() -> None:
    report = ContextCostReport(limit=100, tokens=50)
    decision = report.record("prune", tokens_before=60, tokens_after=50, attempt=1)
    assert report.decisions == [decision] and decision.message_ids == [] and decision.saved == 10
    report.fail("too big")
    assert not report.ok and report.error == "too big"
    ledger = empty_ledger()
    ledger["last_report"] = report.to_dict()
    append_to_ledger_report(ledger, Decision(kind="rebuild", tokens_before=90, tokens_after=0))
    kinds = [d["kind"] for d in ledger["last_report"]["decisions"]]  # type: ignore[index]
    assert kinds == ["prune", "rebuild"]
    assert report.kinds() == ["prune"]  # the build's own report is not changed
