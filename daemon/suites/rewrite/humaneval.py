"""A counterfactual copy of one HumanEval problem: the entry point under another name.

The name changes wherever it is written: the prompt (signature, docstring examples, helpers
that call it), the canonical solution (recursion) and the hidden tests. The tests' inputs stay:
changing them would need expected values no one has checked (see DESIGN notes).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from daemon.suites.rewrite.names import new_name

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class CodeCopy:
    prompt: str
    entry_point: str
    canonical_solution: str
    test: str


def rename_entry_point(
    prompt: str, entry_point: str, canonical: str, test: str, rng: random.Random
) -> CodeCopy:
    taken = set(_IDENT.findall(prompt + "\n" + canonical + "\n" + test))
    new = new_name(entry_point, rng, taken)
    pattern = re.compile(r"(?<![\w.])" + re.escape(entry_point) + r"(?!\w)")
    return CodeCopy(
        prompt=pattern.sub(new, prompt),
        entry_point=new,
        canonical_solution=pattern.sub(new, canonical),
        test=pattern.sub(new, test),
    )
