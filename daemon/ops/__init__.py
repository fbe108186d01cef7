"""ops: what a supervisor and a monitoring system see of the daemon.

Owns: the Prometheus metrics (``metrics``: counts read from the daemon's own tables at
scrape time, so they survive a restart; latency histograms fed as things happen), the
probes ``/healthz``, ``/readyz`` and ``/metrics`` and the metrics port ``[metrics]`` in
harnessd.toml (``probes``), and systemd's notify protocol (``sdnotify``: READY, STOPPING,
the watchdog).

May import: store, events, config (the ``[metrics]`` settings), lineage, gateway (the
ledger, the budget windows), evaluation (results, outages), improve.alpha_ledger (held-out
tests), endpoint.server (the uvicorn server both HTTP ports use). Only the service imports
ops; the endpoint gets the probes as an object (:class:`daemon.endpoint.app.Probes`).
"""
