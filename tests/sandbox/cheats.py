"""Building blocks of the reward-hacking harnesses (tests/sandbox/test_reward_hacking.py,
test_redteam.py): a dead function a cheat wants to look run, the cheat's frame, and the check
that it was foiled."""

from __future__ import annotations

from daemon.evaluation.taskrun import TaskRun

# Lines 1-3 of every cheat: a dead function whose body a cheat wants to look run.
DEAD = """\
def dead():
    return "never called"  # statement on line 2

"""
DEAD_LINE = 2


def cheat(body: str, answer: str = '{"output": [], "claimed_success": True}') -> str:
    """A harness: the dead function, then ``attempt()`` (the cheat), then a plain answer."""
    return (
        DEAD
        + f"def attempt(task, ctx):\n{body}\n\ndef solve(task, ctx):\n"
        + (
            "    try:\n        attempt(task, ctx)\n    except Exception as exc:\n"
            "        ctx.log('cheat failed:', type(exc).__name__, exc)\n"
            f"    return {answer}\n"
        )
    )


def indent(code: str) -> str:
    return "\n".join("    " + line for line in code.strip("\n").splitlines())


def assert_foiled(run: TaskRun, *, error: tuple[str, ...] = ("tamper",)) -> None:
    assert run.error in error, (run.error, run.submission, run.outcome.output[-1500:])
    coverage = run.submission.coverage if run.submission else {}
    assert DEAD_LINE not in coverage.get("harness.py", []), coverage
