"""Code checks across a trusted boundary: untrusted code answers calls, trusted code judges.

One check is two processes in two hardened containers of the same image, with different
uids, that share nothing but one Unix socket in a per-check host directory:

* the **trusted side** (``trusted.py``, uid 65533) holds the checker source (for HumanEval:
  the prompt and the hidden tests) and a one-time verdict token. It listens on the socket,
  runs the checker with a *proxy* in place of the candidate function, and alone prints
  the verdict;
* the **candidate side** (``candidate.py``, uid 65534) runs the untrusted program and
  answers the proxy's calls. It never sees the checker, the trusted driver, the token or
  the verdict channel, and its own output is never read.

Results cross only as frames of ``codec``: fresh objects of exact builtin types, so an
object that lies about equality, truth or its type never reaches the checker.

Owns: the host's request and result types (``spec``), the per-check directory
(``checkdir``), running one check (``host``), and the two sides' code: the wire format
(``codec``), the names both sides agree on (``boundary``: paths, uids, messages), the
trusted side (``trusted``, ``proxy``) and the candidate side (``candidate``).

May import: ``codec``, ``boundary``, ``proxy``, ``trusted`` and ``candidate`` the standard
library and each other only (they are copied into the check directory, each side getting
only its own modules); ``spec``, ``checkdir`` and ``host`` also the rest of ``sandbox``
(engine, container, limits, run dir). Never ``daemon``.

Why two containers and not two processes in one: another uid in the same container would
need a launcher allowed to switch uids (capabilities the sandbox never grants), and would
share the pid namespace, ``/tmp`` and ``/proc`` with the trusted side. Two containers of
the same image need nothing new: separate pid, mount, IPC and network namespaces, no
shared writable file, and the uids only tell the two apart on the socket.
"""
