"""control: the control socket between ``harnessctl`` and a running daemon.

Owns: the control protocol (``protocol``: its own version, frames, closed error codes, and
the one table of verbs harnessctl's commands and help are built from), the wire code of
every deliberate error (``error_codes``), the socket server (0600, peer uid checked), the
verbs (each given only the parts of the daemon it uses), the blocking client,
``harnessctl`` (``ctl``) and its human views.

May import: every component below it (config, evaluation, improve, lineage, live, events);
nothing imports control except the service and the CLI.
"""
