"""How harnessctl shows replies to people. ``--json`` bypasses all of this."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.syntax import Syntax
from rich.table import Table

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


def render(view: str, result: Any, console: Console) -> None:
    fn: Callable[[Any, Console], None] | None = _VIEWS.get(view)
    if fn is None:
        console.print_json(json.dumps(result, default=str))
    else:
        fn(result, console)


def _status(r: dict[str, Any], c: Console) -> None:
    c.print(f"harnessd pid {r.get('pid')} up {r.get('uptime_s')} s, state {r.get('state_dir')}")
    endpoint = r.get("endpoint") or {}
    where = [w for w in (endpoint.get("url"), endpoint.get("unix_socket")) if w]
    if where:
        c.print(f"OpenAI-compatible endpoint: {' and '.join(where)}")
    live = r.get("live") or {}
    if live:
        c.print(
            f"live version: [bold]{live.get('version')}[/] (since {_when(live.get('since', 0))})"
        )
        scores = live.get("scores") or []
        if scores:
            t = Table("model", "split", "accuracy", "95% CI", "gap", "tokens/solved", "tasks")
            for s in scores:
                lo, hi = s.get("accuracy_ci95") or (0, 0)
                t.add_row(
                    s["model"],
                    s["split"],
                    f"{s['accuracy']:.1%}",
                    f"{lo:.0%}-{hi:.0%}",
                    f"{s['verification_gap']:+.1%}",
                    f"{s.get('tokens_per_solved') or '-'}",
                    str(s["n"]),
                )
            c.print(t)
    for o in r.get("outages") or []:
        c.print(
            f"[bold red]OUTAGE[/] {_escape(o['what'])} unavailable since {_when(o['since'])} "
            f"({o['probes']} probe(s), next at {_when(o['next_probe_at'])}): "
            f"{_escape(o['error'])}\n  fix: {_escape(o['fix'])}"
        )
    activity = r.get("activity")
    c.print(f"activity: {_escape(activity or 'idle')}")
    if r.get("evaluating") is not None:
        c.print(f"evaluating: candidate c{r['evaluating']}")
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
        t = Table("budget", "spent", "limit", "left")
        for b in budgets:
            t.add_row(b["scope"], str(b["spent"]), str(b["limit"]), str(b["left"]))
        c.print(t)


def _events(r: list[dict[str, Any]], c: Console) -> None:
    for event in r:
        c.print(_event_line(event))


def _lineage(r: dict[str, Any], c: Console) -> None:
    current = r.get("current")
    for v in r.get("versions", []):
        mark = "*" if v["name"] == current else " "
        indent = "  " * int(v.get("depth", 0))
        c.print(
            f"{mark} {indent}{v['name']}  {_when(v['created'])}  {_escape(v.get('message', ''))}"
        )
    cands = r.get("candidates", [])
    if cands:
        # "tested on" is the version its held-out test compares against; "built on" its
        # tree parent (the candidate whose tree it changed, or that version itself).
        t = Table(
            "cand",
            "tested on",
            "built on",
            "state",
            "stage",
            "source",
            "rationale",
            "decided by",
            "why",
        )
        for x in cands:
            place = x.get("queue_position")
            state = x["state"]
            if place:
                state += f" (queue {place})"
            t.add_row(
                f"c{x['id']}",
                x["parent"],
                x.get("base") or x["parent"],
                state,
                x["stage"],
                x["source"],
                _escape((x.get("rationale") or "")[:50]),
                _escape(decided_text(x)),
                _escape((x.get("decision_reason") or x.get("reason") or "")[:60]),
            )
        c.print(t)


def decided_text(x: dict[str, Any]) -> str:
    """Who decided a candidate (the lineage's ``decided_by`` and ``review``), in words."""
    review = x.get("review") or {}
    if x.get("state") == "awaiting_review":
        return "awaiting review"
    if x.get("decided_by") == "person":
        verb = "approved" if x.get("state") == "accepted" else "rejected"
        return f"person ({review.get('reviewer')}, {verb})"
    return str(x.get("decided_by") or "-")


def _show(r: dict[str, Any], c: Console) -> None:
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
        t = Table("gate", "measured", "threshold", "result", "note")
        for g in verdict.get("gates", []):
            ok = "[green]pass[/]" if g["passed"] else "[red]fail[/]"
            if g.get("skipped"):
                ok = "[dim]skipped[/]"
            note = _escape(g.get("note", ""))
            if g.get("test"):
                note += f" [dim]({_escape(g['test'])})[/]"
            t.add_row(g["gate"], str(g.get("measured")), str(g.get("threshold")), ok, note)
        c.print(t)
        c.print(f"decision: [bold]{verdict.get('decision')}[/] {verdict.get('reason', '')}")
    if r.get("patch"):
        c.print(Syntax(r["patch"], "diff", theme="ansi_dark"))


def _print_diff(diff: str, c: Console) -> None:
    c.print(Syntax(diff, "diff", theme="ansi_dark") if diff else "(no difference)")


def _diff(r: dict[str, Any], c: Console) -> None:
    c.print(f"[bold]{_escape(r.get('a', '?'))} -> {_escape(r.get('b', '?'))}[/]")
    _print_diff(r.get("diff") or "", c)


def _propose(r: dict[str, Any], c: Console) -> None:
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


def _gate_rows(verdict: dict[str, Any], c: Console) -> None:
    t = Table("gate", "measured", "threshold", "result")
    for g in verdict.get("gates", []):
        mark = "skip" if g.get("skipped") else "pass" if g.get("passed") else "FAIL"
        t.add_row(g["gate"], _figure(g.get("measured")), _figure(g.get("threshold")), mark)
    c.print(t)


def _review(r: dict[str, Any], c: Console) -> None:
    waiting = r.get("awaiting") or []
    state = "on" if r.get("enabled") else "off"
    c.print(f"review step {state} ([gates.review]); live version {_escape(str(r.get('live')))}")
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
            _gate_rows(verdict, c)
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


def _approve(r: dict[str, Any], c: Console) -> None:
    c.print(
        f"c{r.get('candidate')} approved by {_escape(str(r.get('reviewer')))}: "
        f"[bold]{_escape(str(r.get('live')))}[/] is live"
    )


def _reject(r: dict[str, Any], c: Console) -> None:
    c.print(
        f"c{r.get('candidate')} rejected by {_escape(str(r.get('reviewer')))}: "
        f"{_escape(str(r.get('reason')))}"
    )


def _rollback(r: dict[str, Any], c: Console) -> None:
    c.print(f"rolled back: [bold]{_escape(str(r.get('live')))}[/] is live")


def _loop_switch(r: dict[str, Any], c: Console) -> None:
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


def _policy_show(r: dict[str, Any], c: Console) -> None:
    c.print(f"[bold]policy in force[/] (from {_escape(str(r.get('path')))}):")
    c.print(Syntax("\n".join(toml_lines(r.get("policy") or {})).strip(), "toml", theme="ansi_dark"))


def _policy_check(r: dict[str, Any], c: Console) -> None:
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


def _stop(r: dict[str, Any], c: Console) -> None:
    pid = r.get("pid", "?")
    if r.get("stopped"):
        c.print(f"harnessd (pid {pid}) stopped")
    else:
        c.print(f"harnessd (pid {pid}) is stopping; it has not closed its socket yet")


def _answer(r: dict[str, Any], c: Console) -> None:
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


def _report(r: dict[str, Any], c: Console) -> None:
    c.print(_escape(summary_line(r)))


def _label(r: dict[str, Any], c: Console) -> None:
    c.print(f"task {r['task']} added to suite {r['suite']} ({r['tasks']} tasks, {r['path']})")


def _suite_export(r: dict[str, Any], c: Console) -> None:
    if "written" in r:
        c.print(f"suite {r['suite']}: {r['tasks']} tasks written to {r['written']}")
    else:
        sys.stdout.write(r["text"])  # as it is: the file format, for a redirect


_VIEWS: dict[str, Callable[[Any, Console], None]] = {
    "report": _report,
    "status": _status,
    "events": _events,
    "lineage": _lineage,
    "show": _show,
    "diff": _diff,
    "ask": _answer,
    "run": _answer,
    "propose": _propose,
    "rollback": _rollback,
    "review": _review,
    "approve": _approve,
    "reject": _reject,
    "pause": _loop_switch,
    "resume": _loop_switch,
    "policy_show": _policy_show,
    "policy_check": _policy_check,
    "stop": _stop,
    "label": _label,
    "suite_export": _suite_export,
}


def watch(events: Iterable[dict[str, Any]], *, as_json: bool, console: Console) -> None:
    """Print events as they come; ``progress`` events drive one bar per evaluation."""
    if as_json:
        for event in events:
            print(json.dumps(event), flush=True)
        return
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
