"""How harnessctl shows replies to people. ``--json`` bypasses all of this."""

from __future__ import annotations

import json
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


def _event_line(event: dict[str, Any]) -> str:
    style = LEVEL_STYLE.get(str(event.get("level")), "")
    stamp = _when(float(event.get("ts", 0)))
    text = f"{stamp} {event.get('kind', '?'):<22} {event.get('message', '')}"
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
                    s["model"], s["split"], f"{s['accuracy']:.1%}", f"{lo:.0%}-{hi:.0%}",
                    f"{s['verification_gap']:+.1%}", f"{s.get('tokens_per_solved') or '-'}",
                    str(s["n"]),
                )  # fmt: skip
            c.print(t)
    activity = r.get("activity")
    c.print(f"activity: {_escape(activity or 'idle')}")
    for p in r.get("progress") or []:
        c.print(f"  {_escape(p['label'])}: {p['done']}/{p['total']} tasks")
    c.print(f"loop: {'[yellow]paused[/]' if r.get('paused') else 'running'}")
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
        t = Table("cand", "parent", "state", "stage", "source", "rationale")
        for x in cands:
            t.add_row(
                f"c{x['id']}", x["parent"], x["state"], x["stage"], x["source"],
                (x.get("rationale") or "")[:60],
            )  # fmt: skip
        c.print(t)


def _show(r: dict[str, Any], c: Console) -> None:
    for key in ("name", "kind", "state", "parent", "source", "proposer_model", "rationale"):
        if r.get(key) is not None:
            c.print(f"[bold]{key}:[/] {_escape(str(r[key]))}")
    verdict = r.get("verdict")
    if verdict:
        t = Table("gate", "measured", "threshold", "result", "note")
        for g in verdict.get("gates", []):
            ok = "[green]pass[/]" if g["passed"] else "[red]fail[/]"
            if g.get("skipped"):
                ok = "[dim]skipped[/]"
            t.add_row(
                g["gate"], str(g.get("measured")), str(g.get("threshold")), ok, g.get("note", "")
            )
        c.print(t)
        c.print(f"decision: [bold]{verdict.get('decision')}[/] {verdict.get('reason', '')}")
    if r.get("patch"):
        c.print(Syntax(r["patch"], "diff", theme="ansi_dark"))


def _diff(r: dict[str, Any], c: Console) -> None:
    c.print(
        Syntax(r.get("diff", ""), "diff", theme="ansi_dark") if r.get("diff") else "(no difference)"
    )


def _answer(r: dict[str, Any], c: Console) -> None:
    c.print(f"[dim]version {r.get('version')} · {r.get('tokens')} tokens · {r.get('wall_s')} s[/]")
    if r.get("error"):
        c.print(f"[red]task ended: {r['error']}[/]")
    output = r.get("output")
    c.print(output if isinstance(output, str) else json.dumps(output, indent=2))
    if "passed" in r and r["passed"] is not None:
        c.print("verified: " + ("[green]correct[/]" if r["passed"] else "[red]wrong[/]"))


def _report(r: dict[str, Any], c: Console) -> None:
    c.print(_escape(summary_line(r)))


_VIEWS: dict[str, Callable[[Any, Console], None]] = {
    "report": _report,
    "status": _status,
    "events": _events,
    "lineage": _lineage,
    "show": _show,
    "diff": _diff,
    "ask": _answer,
    "run": _answer,
}


def watch(events: Iterable[dict[str, Any]], *, as_json: bool, console: Console) -> None:
    """Print events as they come; ``progress`` events drive one bar per evaluation."""
    if as_json:
        for event in events:
            print(json.dumps(event), flush=True)
        return
    bars: dict[str, TaskID] = {}
    with Progress(
        TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(), console=console, transient=False,
    ) as progress:  # fmt: skip
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
