"""How harnessctl shows replies to people (each verb's ``view`` in :mod:`daemon.control.verbs`).
``--json`` bypasses all of this.

The views that hold tables (``status``, ``lineage``, ``show``, ``review``) fit the console's
width (:mod:`daemon.control.columns`): fewer columns when it is narrow, every row on one line;
``--wide`` gives them a console without a width limit, so they show everything.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.syntax import Syntax
from rich.text import Text

from daemon.control.columns import Col, fitted, one_line
from daemon.report import summary_line

LEVEL_STYLE = {"debug": "dim", "info": "", "warning": "yellow", "error": "bold red"}


def _when(ts: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ts))


def _figure(value: Any) -> str:
    return "-" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def gates_text(gates: list[dict[str, Any]], kind: str) -> str:
    """The gates that decided a candidate (event data ``gates``), with their figures."""
    parts = [
        f"{g.get('gate', '?')} {_figure(g.get('measured'))} vs {_figure(g.get('threshold'))}"
        for g in gates
    ]
    passed = kind in ("version.promoted", "candidate.awaiting_review")
    head = "gates passed" if passed else "decided by"
    return f"{head}: {', '.join(parts)}"


def _event_line(event: dict[str, Any]) -> str:
    style = LEVEL_STYLE.get(str(event.get("level")), "")
    stamp = _when(float(event.get("ts", 0)))
    kind = str(event.get("kind", "?"))
    text = f"{stamp} {kind:<22} {event.get('message', '')}"
    gates = (event.get("data") or {}).get("gates")
    if isinstance(gates, list) and gates:
        text += f" [{gates_text(gates, kind)}]"
    return f"[{style}]{_escape(text)}[/]" if style else _escape(text)


def _escape(text: str) -> str:
    return text.replace("[", "\\[")


# The live version's scores: what a model reached, then how sure and at what cost.
SCORE_COLUMNS = (
    Col("model", 1, text=True),
    Col("split", 2),
    Col("accuracy", 3),
    Col("95% CI", 5),
    Col("gap", 6),
    Col("tokens/solved", 7),
    Col("tasks", 4),
)
BUDGET_COLUMNS = (Col("budget", 1, text=True), Col("spent", 3), Col("limit", 4), Col("left", 2))


def _score_row(s: dict[str, Any]) -> list[str]:
    lo, hi = s.get("accuracy_ci95") or (0, 0)
    return [
        _escape(str(s["model"])),
        str(s["split"]),
        f"{s['accuracy']:.1%}",
        f"{lo:.0%}-{hi:.0%}",
        f"{s['verification_gap']:+.1%}",
        f"{s.get('tokens_per_solved') or '-'}",
        str(s["n"]),
    ]


def status(r: dict[str, Any], c: Console) -> None:
    c.print(
        f"harnessd pid {r.get('pid')} up {r.get('uptime_s')} s, "
        f"state {_escape(str(r.get('state_dir')))}"
    )
    endpoint = r.get("endpoint") or {}
    where = [w for w in (endpoint.get("url"), endpoint.get("unix_socket")) if w]
    if where:
        c.print(f"OpenAI-compatible endpoint: {' and '.join(where)}")
    metrics = (r.get("metrics") or {}).get("url")
    if metrics:
        c.print(f"metrics: {metrics}/metrics (and /healthz, /readyz)")
    live = r.get("live") or {}
    if live:
        c.print(
            f"live version: [bold]{live.get('version')}[/] (since {_when(live.get('since', 0))})"
        )
        scores = live.get("scores") or []
        if scores:
            c.print(fitted(SCORE_COLUMNS, [_score_row(s) for s in scores], c.width))
    for o in r.get("outages") or []:
        c.print(
            f"[bold red]OUTAGE[/] {_escape(o['what'])} unavailable since {_when(o['since'])} "
            f"({o['probes']} probe(s), next at {_when(o['next_probe_at'])}): "
            f"{_escape(o['error'])}\n  fix: {_escape(o['fix'])}"
        )
    rep = r.get("replication")
    if rep:
        c.print(f"last promotion (c{rep['candidate_id']}): {_escape(rep['line'])}")
    activity = r.get("activity")
    c.print(f"activity: {_escape(activity or 'idle')}")
    if r.get("evaluating") is not None:
        c.print(f"evaluating: candidate c{r['evaluating']}")
    reserve = r.get("dev_reserve") or []
    if reserve:
        c.print(
            "dev reserve (screened, waiting for a later cycle's choice): "
            + ", ".join(f"c{cid}" for cid in reserve)
        )
    queue = r.get("queue") or []
    if queue:
        c.print(
            "queue: "
            + ", ".join(
                f"{q['position']}. c{q['candidate']} ({_escape(q['source'])})" for q in queue
            )
        )
    calls = r.get("model_calls") or {}
    if calls:
        c.print(
            "model calls under way: "
            + ", ".join(
                f"{m} ({n['calls']} call(s), {n['tokens_so_far']} tokens so far)"
                for m, n in calls.items()
            )
        )
    for p in r.get("progress") or []:
        c.print(f"  {_escape(p['label'])}: {p['done']}/{p['total']} tasks")
    c.print(f"loop: {'[yellow]paused[/]' if r.get('paused') else 'running'}")
    waiting = r.get("awaiting_review") or []
    if waiting:
        names = ", ".join(f"c{cid}" for cid in waiting)
        c.print(f"[yellow]awaiting review:[/] {names} ('harnessctl review')")
    budgets = r.get("budgets") or []
    if budgets:
        rows = [
            [_escape(b["scope"]), str(b["spent"]), str(b["limit"]), str(b["left"])] for b in budgets
        ]
        c.print(fitted(BUDGET_COLUMNS, rows, c.width))


def events(r: list[dict[str, Any]], c: Console) -> None:
    for event in r:
        c.print(_event_line(event))


# "tested on" is the version a candidate's held-out test compares against; "built on" its
# tree parent (the candidate whose tree it changed, or that version itself). At 80 columns
# the candidate, its state and stage, its rationale and why it was decided remain.
LINEAGE_COLUMNS = (
    Col("cand", 1),
    Col("tested on", 7),
    Col("built on", 9),
    Col("state", 2),
    Col("stage", 5),
    Col("source", 8),
    Col("rationale", 3, text=True),
    Col("decided by", 6),
    Col("why", 4, text=True),
)


def _candidate_row(x: dict[str, Any]) -> list[str]:
    place = x.get("queue_position")
    state = str(x["state"]) + (f" (queue {place})" if place else "")
    if x.get("in_dev_reserve"):
        state += " (dev reserve)"
    return [
        f"c{x['id']}",
        _escape(str(x["parent"])),
        _escape(str(x.get("base") or x["parent"])),
        _escape(state),
        _escape(str(x["stage"])),
        _escape(str(x["source"])),
        _escape(x.get("rationale") or ""),
        _escape(decided_text(x)),
        _escape(x.get("decision_reason") or x.get("reason") or ""),
    ]


def lineage(r: dict[str, Any], c: Console) -> None:
    current = r.get("current")
    for v in r.get("versions", []):
        mark = "*" if v["name"] == current else " "
        indent = "  " * int(v.get("depth", 0))
        line = Text(f"{mark} {indent}{v['name']}  {_when(v['created'])}  ")
        line.append_text(one_line(_escape(v.get("message", ""))))
        c.print(line, no_wrap=True, overflow="ellipsis")  # one line a version
    cands = r.get("candidates", [])
    if cands:
        c.print(fitted(LINEAGE_COLUMNS, [_candidate_row(x) for x in cands], c.width))


def decided_text(x: dict[str, Any]) -> str:
    """Who decided a candidate (the lineage's ``decided_by`` and ``review``), in words."""
    review = x.get("review") or {}
    if x.get("state") == "awaiting_review":
        return "awaiting review"
    if x.get("decided_by") == "person":
        verb = "approved" if x.get("state") == "accepted" else "rejected"
        return f"person ({review.get('reviewer')}, {verb})"
    return str(x.get("decided_by") or "-")


def show(r: dict[str, Any], c: Console) -> None:
    for key in ("name", "kind", "state", "parent", "base", "source", "proposer_model", "rationale"):
        if r.get(key) is not None:
            c.print(f"[bold]{key}:[/] {_escape(str(r[key]))}")
    if r.get("decided_by") or r.get("state") == "awaiting_review":
        c.print(f"[bold]decided by:[/] {_escape(decided_text(r))}")
        review = r.get("review") or {}
        if review.get("decided") is not None:
            c.print(
                f"[bold]review:[/] {_escape(str(review.get('reviewer')))} at "
                f"{_when(float(review['decided']))}: {_escape(review.get('reason') or '-')}"
            )
    verdict = r.get("verdict")
    if verdict:
        gates(verdict, c)
        c.print(
            f"decision: [bold]{_escape(str(verdict.get('decision')))}[/] "
            f"{_escape(verdict.get('reason', ''))}"
        )
    rep = r.get("replication")
    if rep:
        # Beside the verdict, not part of it: a check of the test on fresh tasks.
        c.print(f"[bold]replication:[/] {_escape(rep['line'])}")
    if r.get("patch"):
        c.print(_code(r["patch"], "diff"))


def _code(text: str, lexer: str) -> Syntax:
    # Wrapped, not cropped, where the console has a width limit (a terminal).
    return Syntax(text, lexer, theme="ansi_dark", word_wrap=True)


def _print_diff(diff: str, c: Console) -> None:
    c.print(_code(diff, "diff") if diff else "(no difference)")


def diff(r: dict[str, Any], c: Console) -> None:
    c.print(f"[bold]{_escape(r.get('a', '?'))} -> {_escape(r.get('b', '?'))}[/]")
    _print_diff(r.get("diff") or "", c)


def propose(r: dict[str, Any], c: Console) -> None:
    if r.get("dry_run"):
        c.print(
            f"[green]valid[/] against {_escape(r.get('against', '?'))} "
            "(dry run: nothing recorded); the change it makes:"
        )
    else:
        paused = " (the loop is paused: 'harnessctl resume' to evaluate it)"
        place = r.get("position")
        where = f" at position {place}" if place else ""
        if place and r.get("evaluating") is not None:
            where += f" (after candidate c{r['evaluating']}, under evaluation now)"
        c.print(
            f"candidate [bold]c{r.get('candidate')}[/] passed the static stage and is queued "
            f"for evaluation{where}{paused if r.get('paused') else ''}; the change it makes:"
        )
    _print_diff(r.get("diff") or "", c)


# A verdict's gates: which, and how they went, kept longest; the note goes first.
GATE_COLUMNS = (
    Col("gate", 1),
    Col("measured", 3),
    Col("threshold", 4),
    Col("result", 2),
    Col("note", 5, text=True),
)
_MARK_STYLE = {"pass": "green", "FAIL": "red", "skip": "dim", "off": "dim"}


def _mark(g: dict[str, Any]) -> str:
    """A gate's outcome in the words of ``GateResult.mark``, from the reply's JSON."""
    if g.get("skipped"):
        return "skip"
    if not g.get("enabled", True):
        return "off"
    return "pass" if g.get("passed") else "FAIL"


def _gate_row(g: dict[str, Any]) -> list[str]:
    mark = _mark(g)
    note = _escape(g.get("note") or "")
    if g.get("test"):
        note += f" [dim]({_escape(g['test'])})[/]"
    return [
        _escape(str(g.get("gate"))),
        _figure(g.get("measured")),
        _figure(g.get("threshold")),
        f"[{_MARK_STYLE[mark]}]{mark}[/]",
        note,
    ]


def gates(verdict: dict[str, Any], c: Console) -> None:
    """A verdict's gates as a table that fits the console."""
    rows = [_gate_row(g) for g in verdict.get("gates", [])]
    c.print(fitted(GATE_COLUMNS, rows, c.width))


def review(r: dict[str, Any], c: Console) -> None:
    waiting = r.get("awaiting") or []
    state = "on" if r.get("enabled") else "off"
    c.print(f"review step {state} (\\[gates.review]); live version {_escape(str(r.get('live')))}")
    if not waiting:
        c.print("no candidate awaits review")
        return
    for x in waiting:
        test = x.get("test") or {}
        slot = (
            f", held-out test epoch {test.get('epoch')} candidate {test.get('position')} at "
            f"alpha {_figure(test.get('alpha'))}"
            if test
            else ""
        )
        c.print(
            f"\n[bold]c{x['id']}[/] on {_escape(str(x['parent']))} ({_escape(str(x['source']))}"
            f"{slot}), awaiting review since {_when(float(x.get('held') or 0))}"
        )
        if x.get("rationale"):
            c.print(f"rationale: {_escape(x['rationale'])}")
        verdict = x.get("verdict") or {}
        if verdict:
            c.print(f"verdict: {_escape(verdict.get('reason', ''))}")
            gates(verdict, c)
        _print_diff(x.get("patch") or "", c)
        if x.get("approvable"):
            c.print(
                f"decide: harnessctl approve c{x['id']}  |  "
                f"harnessctl reject c{x['id']} --reason TEXT"
            )
        else:
            c.print(
                f"[yellow]{_escape(str(x['live']))} is live, not its parent "
                f"{_escape(str(x['parent']))}[/]: approving it is refused; reject it, or "
                f"'harnessctl rollback {_escape(str(x['parent']))}' first"
            )


def approve(r: dict[str, Any], c: Console) -> None:
    c.print(
        f"c{r.get('candidate')} approved by {_escape(str(r.get('reviewer')))}: "
        f"[bold]{_escape(str(r.get('live')))}[/] is live"
    )


def reject(r: dict[str, Any], c: Console) -> None:
    c.print(
        f"c{r.get('candidate')} rejected by {_escape(str(r.get('reviewer')))}: "
        f"{_escape(str(r.get('reason')))}"
    )


def rollback(r: dict[str, Any], c: Console) -> None:
    c.print(f"rolled back: [bold]{_escape(str(r.get('live')))}[/] is live")


def loop_switch(r: dict[str, Any], c: Console) -> None:
    if r.get("paused"):
        c.print("improvement loop [yellow]paused[/] ('harnessctl resume' to continue)")
    else:
        c.print("improvement loop running")


def toml_lines(data: dict[str, Any], table: str = "") -> list[str]:
    """``data`` written as TOML (unset values as comments), tables after their keys."""
    lines = [f"[{table}]"] if table and any(not isinstance(v, dict) for v in data.values()) else []
    for key, value in data.items():
        if value is None:
            lines.append(f"# {key}: not set")
        elif not isinstance(value, dict):
            lines.append(f"{key} = {json.dumps(value)}")
    for key, value in data.items():
        if isinstance(value, dict):
            lines += ["", *toml_lines(value, f"{table}.{key}" if table else key)]
    return lines


def policy_show(r: dict[str, Any], c: Console) -> None:
    c.print(f"[bold]policy in force[/] (from {_escape(str(r.get('path')))}):")
    c.print(_code("\n".join(toml_lines(r.get("policy") or {})).strip(), "toml"))


def policy_check(r: dict[str, Any], c: Console) -> None:
    c.print(
        f"{_escape(str(r.get('name')))}: [green]valid[/] (not applied; edit the policy file "
        "in force to apply it)"
    )
    if r.get("heldout_evidence"):
        c.print(_escape(str(r["heldout_evidence"])))
    for line in r.get("power_text") or []:
        c.print(_escape(line))
    if r.get("review_text"):
        c.print(_escape(r["review_text"]))


def stop(r: dict[str, Any], c: Console) -> None:
    pid = r.get("pid", "?")
    if r.get("stopped"):
        c.print(f"harnessd (pid {pid}) stopped")
    else:
        c.print(f"harnessd (pid {pid}) is stopping; it has not closed its socket yet")


def answer(r: dict[str, Any], c: Console) -> None:
    c.print(
        f"[dim]request {r.get('request')} · version {r.get('version')} · "
        f"{r.get('tokens')} tokens · {r.get('wall_s')} s[/]"
    )
    if r.get("error"):
        c.print(f"[red]task ended: {r['error']}[/]")
    output = r.get("output")
    c.print(output if isinstance(output, str) else json.dumps(output, indent=2))
    if "passed" in r and r["passed"] is not None:
        c.print("verified: " + ("[green]correct[/]" if r["passed"] else "[red]wrong[/]"))


def report(r: dict[str, Any], c: Console) -> None:
    c.print(_escape(summary_line(r)))


def label(r: dict[str, Any], c: Console) -> None:
    c.print(f"task {r['task']} added to suite {r['suite']} ({r['tasks']} tasks, {r['path']})")


def suite_export(r: dict[str, Any], c: Console) -> None:
    if "written" in r:
        c.print(f"suite {r['suite']}: {r['tasks']} tasks written to {r['written']}")
    else:
        sys.stdout.write(r["text"])  # as it is: the file format, for a redirect


def watch(events: Iterable[dict[str, Any]], console: Console) -> None:
    """Print events as they come; ``progress`` events drive one bar per evaluation."""
    bars: dict[str, TaskID] = {}
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:
        for event in events:
            data = event.get("data") or {}
            if event.get("kind") == "eval.progress" and "run_id" in data:
                key = str(data["run_id"])
                if key not in bars:
                    bars[key] = progress.add_task(
                        str(data.get("label", key)), total=data.get("total")
                    )
                progress.update(bars[key], completed=data.get("done", 0))
                if data.get("done") == data.get("total"):
                    progress.remove_task(bars.pop(key))
                continue
            progress.console.print(_event_line(event))
