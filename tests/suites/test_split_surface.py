"""Nothing on a task's surface says which split it is in.

A harness that could tell a held-out task from a dev task could behave well only where it is
judged, or apply what it knows about the public tasks only where no proposer's dev transcript
would show it. Dev tasks and held-out tasks therefore come from one transformation
(counterfactual copies, and the same share of generated tasks in each). Here a classifier
built as an adversary would build it, knowing every public task (their function, parameter
and entry-point names and their exact questions) and the copies' marks (name suffixes, verb
synonyms), is trained on served tasks of both splits and scored by cross-validation: it must
not do better than chance. Its twin, the arrangement before (public dev tasks, copies only
held out), shows the same classifier finds the split at once, so the test can fail.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from pathlib import Path

import pytest

from daemon.config.policy import SuitePolicy
from daemon.suites import Splits, evaluated_suite, evaluation_copies, load_suite, policy_splits
from daemon.suites.base import Suite
from daemon.suites.rewrite.names import words

SEED = "surface-secret"
FOLDS = 5
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)?")


def _names(suite: Suite, task_id: str) -> set[str]:
    task = suite.task(task_id)
    names = {t.name for t in task.tools}
    for tool in task.tools:
        names |= set((tool.parameters or {}).get("properties", {}))
    if not task.tools:  # code: the names the prompt defines
        text = task.prompt[-1].content or ""
        names |= set(re.findall(r"def (\w+)", text))
    return names


def _question(suite: Suite, task_id: str) -> str:
    return suite.task(task_id).prompt[-1].content or ""


def features(suite: Suite, task_id: str, public_names: set[str], public_text: set[str]) -> set[str]:
    """What an adversary reads off one task: every word of its text and names, each name's
    last word (the copies' suffixes) and first (verbs), its shape, and whether its names or
    its question are the public task's."""
    task = suite.task(task_id)
    question = _question(suite, task_id)
    out = {f"w:{w.lower()}" for w in _TOKEN.findall(question)}
    for name in _names(suite, task_id):
        parts = words(name) or [name]
        out |= {f"n:{p}" for p in parts} | {f"last:{parts[-1]}", f"first:{parts[0]}"}
        out.add("public-name" if name in public_names else "new-name")
    for tool in task.tools:
        out |= {f"d:{w.lower()}" for w in _TOKEN.findall(tool.description or "")}
    out.add("public-question" if question in public_text else "new-question")
    out.add(f"tools:{len(task.tools)}")
    out.add(f"length:{len(question) // 80}")
    return out


def _fold(task_id: str) -> int:
    return hashlib.sha256(task_id.encode()).digest()[0] % FOLDS


def cross_validated_accuracy(samples: list[tuple[str, set[str], int]]) -> float:
    """Bernoulli naive Bayes (Laplace-smoothed), five folds by a hash of the id: the share of
    tasks whose split it names right when trained on the other folds. Written out (a dozen
    lines) rather than adding scikit-learn and its numerical stack to the test install for
    one test."""
    right = 0
    for fold in range(FOLDS):
        train = [(f, y) for i, f, y in samples if _fold(i) != fold]
        counts = [Counter[str](), Counter[str]()]
        sizes = [0, 0]
        for feats, label in train:
            counts[label].update(feats)
            sizes[label] += 1
        vocab = {f for feats, _ in train for f in feats}
        for task_id, feats, label in samples:
            if _fold(task_id) != fold:
                continue
            scores = []
            for y in (0, 1):
                score = math.log(sizes[y] / len(train))
                for f in vocab:
                    p = (counts[y][f] + 1) / (sizes[y] + 2)
                    score += math.log(p if f in feats else 1 - p)
                scores.append(score)
            right += int(scores[1] > scores[0]) == label
    return right / len(samples)


def above_chance_p(accuracy: float, n: int) -> float:
    """One-sided binomial p-value of ``accuracy`` over ``n`` against guessing (1/2)."""
    k = round(accuracy * n)
    return sum(math.comb(n, j) for j in range(k, n + 1)) / 2**n


def _samples(
    served: Suite, public: Suite, splits: Splits, balance: int
) -> list[tuple[str, set[str], int]]:
    public_names = {n for t in public.task_ids() for n in _names(public, t)}
    public_text = {_question(public, t) for t in public.task_ids()}
    dev, held = splits.dev[:balance], splits.heldout[:balance]
    return [
        (t, features(served, t, public_names, public_text), label)
        for label, ids in ((0, dev), (1, held))
        for t in ids
    ]


@pytest.mark.unit
@pytest.mark.parametrize(("spec", "size"), [("bfcl:simple", 150), ("humaneval", 75)])
def test_a_classifier_on_task_surface_cannot_tell_dev_from_heldout(
    asset_cache: Path, spec: str, size: int
) -> None:
    p = SuitePolicy(name=spec, dev_size=size, heldout_size=size, split_seed=SEED)
    served = evaluated_suite(p, asset_cache, SEED)
    public = load_suite(spec, asset_cache)
    splits = policy_splits(p, asset_cache, SEED)
    samples = _samples(served, public, splits, size)
    accuracy = cross_validated_accuracy(samples)
    assert above_chance_p(accuracy, len(samples)) > 0.01, accuracy

    # The twin: public dev tasks beside held-out copies (as before), the same classifier.
    before = evaluation_copies(
        public, Splits(dev=[], heldout=splits.heldout), f"counterfactual\0{SEED}", 0.5
    )
    told = cross_validated_accuracy(_samples(before, public, splits, size))
    assert told >= 0.95, told
