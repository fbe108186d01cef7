"""Live policy and config: watch the files, validate a change first, apply only if valid.

Modelled on watchfiles' own reload loop: editors save by writing a new file and renaming it
over the old one, so we watch the parent folders and filter by path. An invalid edit is
reported (event naming the file and the problem) and the previous policy stays in force.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import watchfiles
from anyio.abc import TaskStatus

from daemon.config.policy import Policy, load_policy

log = logging.getLogger("harnessd.reload")


@dataclass
class PolicyHolder:
    """The policy in force. Readers call :meth:`get` each time, so a reload applies at once."""

    path: Path
    current: Policy
    # Checks beyond the file's own validity (e.g. that every model it names can be made);
    # each raises ConfigError to refuse the new policy.
    checks: list[Callable[[Policy], Awaitable[None]]] = field(default_factory=list)

    def get(self) -> Policy:
        return self.current

    async def reload(self) -> Policy:
        """Validate the file and apply it; raises ConfigError and keeps the old one if invalid."""
        new = await anyio.to_thread.run_sync(load_policy, self.path)
        for check in self.checks:
            await check(new)
        self.current = new
        return new


async def watch_files(
    paths: Callable[[], list[Path]],
    on_change: Callable[[Path], Awaitable[None]],
    *,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    debounce_ms: int = 200,
) -> None:
    """Call ``on_change(path)`` whenever one of ``paths()`` is written, created or replaced.

    ``paths`` is re-read after each batch, so a config reload that names another policy
    file moves the watch to it.
    """
    started = False
    while True:
        targets = {p.resolve() for p in paths()}
        folders = sorted({t.parent for t in targets if t.parent.is_dir()})
        if not started:
            task_status.started()
            started = True
        if not folders:
            await anyio.sleep(1.0)
            continue
        stop = anyio.Event()
        async for changes in watchfiles.awatch(
            *folders, debounce=debounce_ms, stop_event=stop, recursive=False
        ):
            changed = {Path(p).resolve() for _, p in changes} & targets
            for path in sorted(changed):
                await on_change(path)
            if {p.resolve() for p in paths()} != targets:
                stop.set()  # the watched set changed: restart with the new folders
