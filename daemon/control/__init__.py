"""control: the control socket between ``harnessctl`` and a running daemon.

Owns: the control protocol (``protocol``: its own version, frames, closed error codes), the
one table of verbs (``verbs``, of ``registry``'s types: each verb declared once, from which
the verbs served, request checks, harnessctl's commands and help, and each reply's view all
come), the wire code of every deliberate error (``error_codes``), the socket server (0600,
peer uid checked), the verbs' handlers (``handlers``: each given only the parts of the
daemon it uses), the blocking client, ``harnessctl`` (``ctl``) and its human views
(``views``, with tables that fit the terminal: ``columns``).

May import: every component below it (config, evaluation, improve, lineage, live, events);
nothing imports control except the service and the CLI.
"""
