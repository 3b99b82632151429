"""The ledger's writes (ledger.py) and the report's recorder (report.py)."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.store.memory import InMemoryStore

from langgraph_ctx._effects import run_plan
from langgraph_ctx.archive import Archive
from langgraph_ctx.archive.dumps import all_dump_refs, plan_spill_dump_refs
from langgraph_ctx.ledger import (
    add_dump_ref,
    adopt_summary,
    covered_ids,
    empty_ledger,
    fold_summary,
    forget_entries,
    load_ledger,
    record_compacted,
    record_dump_index,
    record_extraction,
    record_pruned,
    repair_ledger,
    set_hint,
    set_window,
)
from langgraph_ctx.ledger.summary import DUMP_REFS_KEPT, dump_refs_to_spill, listed_dump_refs
from langgraph_ctx.prompt.report import ContextCostReport, Decision, append_to_ledger_report


def test_fold_summary_covers_each_id_once_and_takes_over_from_the_hint() -> None:
    ledger = empty_ledger()
    set_hint(ledger, text="h", cleared_ids=["a"], dump_ref="r0", prompt_tokens=9, after_id="x")
    order = ["a", "b", "c"].index
    fold_summary(
        ledger, text="one", covered_ids=["a", "b"], dump_ref="r1", source="model", position=order
    )
    fold_summary(
        ledger, text="two", covered_ids=["b", "c"], dump_ref=None, source="fallback", position=order
    )
    assert ledger["hint"] is None
    assert ledger["summary"] == {
        "text": "two",
        "covered": 3,
        "covered_last": "c",
        "dump_refs": ["r1"],
        "source": "fallback",
        "updates": 2,
    }
    # A reset window summarized again never moves the newest covered id back.
    fold_summary(
        ledger, text="three", covered_ids=["a"], dump_ref=None, source="model", position=order
    )
    assert ledger["summary"]["covered_last"] == "c" and ledger["summary"]["covered"] == 3  # type: ignore[index]
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


def test_a_ledger_holding_covered_ids_is_migrated_when_read() -> None:
    old = {
        "summary": {
            "text": "earlier",
            "covered_ids": ["a", "b", "c"],
            "dump_refs": ["r1"],
            "source": "model",
            "updates": 2,
        }
    }
    ledger, repairs = repair_ledger(old)
    assert repairs == []  # a migration, not damage
    assert ledger["summary"] == {
        "text": "earlier",
        "covered": 3,
        "covered_last": "c",
        "dump_refs": ["r1"],
        "source": "model",
        "updates": 2,
    }
    assert old["summary"]["covered_ids"] == ["a", "b", "c"]  # the input is untouched
    # The ids are derived from the state as they were stored.
    messages = [SystemMessage("base", id="s"), *(HumanMessage(x, id=x) for x in "abcd")]
    assert covered_ids(messages, ledger) == ["a", "b", "c"]
    # Damaged items are left out, the good ones kept.
    damaged, lines = repair_ledger({"summary": {"text": "t", "covered_ids": ["a", 5, "b"]}})
    assert damaged["summary"]["covered_last"] == "b" and damaged["summary"]["covered"] == 2  # type: ignore[index]
    assert any("covered_ids" in line for line in lines)


def test_covered_ids_are_derived_from_the_state() -> None:
    task = HumanMessage("the task", id="task")
    repair = ToolMessage("made up", tool_call_id="x", id="fix")
    repair.additional_kwargs["langgraph_ctx"] = {"repair": True}
    messages = [
        SystemMessage("base", id="sys"),
        HumanMessage("one", id="h1"),
        AIMessage("a1", id="a1"),
        task,
        AIMessage("step", id="a2"),
        repair,
        AIMessage("step", id="a3"),
        HumanMessage("later", id="h2"),
    ]
    ledger = {"summary": {"covered_last": "a3"}, "window": {"start_id": "h2", "pin_id": "task"}}
    # The base prompt, the pinned task and a made-up result are never covered.
    assert covered_ids(messages, ledger) == ["h1", "a1", "a2", "a3"]
    # Once the newest covered message left the state, so did everything it covered.
    assert covered_ids(messages[4:], {"summary": {"covered_last": "gone"}}) == []
    assert covered_ids(messages, {"summary": {"text": "adopted"}}) == []


def test_older_dump_refs_move_to_an_archive_index_and_all_stay_readable() -> None:
    archive = Archive(InMemoryStore(), thread_id="t")
    refs = [archive.put_messages([HumanMessage(f"m{i}", id=f"m{i}")]) for i in range(11)]
    ledger: dict[str, Any] = {"summary": {"text": "s", "dump_refs": refs[:6]}}
    assert run_plan(plan_spill_dump_refs(ledger, archive)) is None
    first_index = ledger["summary"]["dump_index"]
    assert ledger["summary"]["dump_refs"] == refs[6 - DUMP_REFS_KEPT : 6]  # the newest
    assert len(ledger["summary"]["dump_refs"]) == DUMP_REFS_KEPT
    assert run_plan(plan_spill_dump_refs(ledger, archive)) is None  # nothing more to move
    for ref in refs[6:]:
        add_dump_ref(ledger, ref)
    assert run_plan(plan_spill_dump_refs(ledger, archive)) is None  # a second index, chained
    assert ledger["summary"]["dump_index"] != first_index
    assert all_dump_refs(ledger, archive) == refs
    # The index is an archive entry the agent can read with `recall`.
    assert refs[0] in str(archive.read(first_index))
    # An archive that fails keeps every ref in the ledger.
    broken = Archive(FailingBackend(), thread_id="t")
    kept: dict[str, Any] = {"summary": {"text": "s", "dump_refs": refs[:6]}}
    assert "disk full" in str(run_plan(plan_spill_dump_refs(kept, broken)))
    assert kept["summary"]["dump_refs"] == refs[:6] and "dump_index" not in kept["summary"]


class FailingBackend:
    """An archive backend whose every write fails."""

    def put(self, namespace: tuple[str, ...], key: str, data: bytes) -> None:
        raise OSError("disk full")

    def get(self, namespace: tuple[str, ...], key: str) -> bytes | None:
        return None

    async def aput(self, namespace: tuple[str, ...], key: str, data: bytes) -> None:
        raise OSError("disk full")

    async def aget(self, namespace: tuple[str, ...], key: str) -> bytes | None:
        return None


def test_removal_dumps_are_unlisted_and_spill_with_their_neighbours() -> None:
    listed = [f"s{i}" for i in range(DUMP_REFS_KEPT)]
    ledger: dict[str, Any] = {"summary": {"text": "s", "dump_refs": list(listed)}}
    add_dump_ref(ledger, "u1", listed=False)  # a removal span: not in the summary message
    assert listed_dump_refs(ledger["summary"]) == listed
    assert dump_refs_to_spill(ledger) == []
    add_dump_ref(ledger, "new")
    # The oldest listed ref goes, with the unlisted refs up to the next listed one.
    spilled = dump_refs_to_spill(ledger)
    assert spilled == ["s0", *(["u1"] if DUMP_REFS_KEPT == 1 else [])]
    record_dump_index(ledger, spilled, "index")
    assert listed_dump_refs(ledger["summary"]) == [*listed[1:], "new"]
    assert ledger["summary"]["dump_index"] == "index"
    assert ("u1" in ledger["summary"]["unlisted"]) == (DUMP_REFS_KEPT > 1)
