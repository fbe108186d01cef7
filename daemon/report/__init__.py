"""report: the lineage report, one self-contained HTML file with its plots as inline SVG.

Owns: gathering what the report shows from the tables' owners (``data``), the figures
derived from evaluation reports (``figures``) and the sequential test's path (``sequential``),
the matplotlib plots (``plots``, ``svg``), the page with everything a harness wrote escaped
(``page``) and ``build_report`` (``build``), used by ``harnessd report`` and the ``report``
control verb.

Read-only: it never writes a table.

May import: store, errors, config (the policy's defaults, the ``report`` extra), the tables'
owners (evaluation results and reports, gateway ledger, lineage, events), the acceptance
core and improve's procedure (the sequential test's path), verdict. Never control or live.
"""

from daemon.report.summary import ReportSummary, candidate_arg, summary_line

# build_report / write_report live in daemon.report.build: importing them loads matplotlib.
__all__ = ["ReportSummary", "candidate_arg", "summary_line"]
