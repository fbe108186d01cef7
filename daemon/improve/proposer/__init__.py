"""proposer: what a proposer model is shown, and how its reply becomes a patch.

Owns: the prompt (``prompt``: harness source, the dev-split report, failed dev tasks, the
archive section), the archive's rendering and selection within a token budget (``archive``,
over plain :class:`~daemon.improve.proposer.archive.ArchiveEntry` values), the typed edit
protocol for small models (``edit_protocol``) and its evidence-carrying moves and their
choice (``moves``: worked examples of solved dev tasks, instructions scored on dev), and
the generic harness components the component move offers with their dev evidence
(``components``).

The information rule, enforced by the import graph: the lineage-wide bound on false
promotions holds only if the proposer learns nothing of held-out outcomes beyond "promoted"
or "not promoted".

May import: only ``patches``, ``providers.base``, the report types (``evaluation.report``,
``evaluation.coverage``), ``tasks`` and ``errors`` (and what those import), and never a
module that can reach held-out data: the store, the evaluations table, the lineage, the
alpha ledger, the held-out stage, the runtime and its splits, the acceptance core.
Everything it knows arrives as arguments built by :mod:`daemon.improve.briefing` (the
information rule's one implementation) and the loop. ``tests/test_layout.py`` checks the
whole import closure.
"""
