"""Tamper-proofing of the guest process, installed before any harness code is imported.

What the gates read from the guest (which harness statements ran, the answer) is recorded
in this process, beside harness code that may try to forge it. CPython offers no boundary
inside one process, so the guest removes every route we know from harness code to the
recorder's state, and reports an attempt to use one as ``tamper`` (the task then fails):

* **No frames.** The coverage tracer and the guest's own state are reachable only through
  frame objects (``f_trace``, ``f_locals``, ``f_back``). Every way to obtain a frame is
  refused: ``sys._getframe``, ``sys._current_frames``, ``traceback.tb_frame``, the
  ``gi_frame``/``cr_frame``/``ag_frame`` of generators and coroutines, and the tracing and
  profiling hooks whose callbacks receive frames. ``sys.gettrace``/``getprofile`` answer
  None. (Signal handlers receive the main thread's frame; the main thread holds nothing.)
* **No object-graph walks.** ``gc.get_objects``, ``get_referrers``, ``get_referents``.
* **No native code or crafted bytecode.** Imports of ``ctypes`` and the CPython test and
  sub-interpreter modules; ``code.__new__``/``code.replace``; assigning ``__code__``;
  ``marshal.loads`` of anything but a genuine standard-library ``.pyc``; ``compile`` of
  source that claims a harness file name but is not that file's text (which would make
  lines look run); re-creating builtin modules with ``_imp`` (which would restore
  ``sys.gettrace``). The writable mounts are ``noexec``, so no shared object can be
  loaded from them.
* **No reading of this process.** Opening anything under ``/proc`` or ``/sys`` (e.g.
  ``/proc/self/mem``, ``/proc/self/mountinfo``) or devices other than ``/dev/null``, the
  random sources and ``/dev/shm`` (a noexec tmpfs). The guest also marks itself
  non-dumpable, so a program the harness starts cannot read its memory either.

A refused operation raises in the harness (``ValueError`` for frames, ``PermissionError``
otherwise) and is recorded. It counts as tamper, except where a few standard-library helpers
(``collections.namedtuple``, ``enum``, ``typing``, ``logging``) peek at their caller's frame
for a module name and cope with the refusal: those are refused but not held against the
harness. Every callable here binds what it uses as default arguments at install time, so
patching builtins or modules later changes nothing in it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import harnessd_paths

DENIED_IMPORTS = frozenset(
    {
        "ctypes",
        "_ctypes",
        "_ctypes_test",
        "_testcapi",
        "_testinternalcapi",
        "_testbuffer",
        "_testclinic",
        "_testimportmultiple",
        "_testmultiphase",
        "_xxsubinterpreters",
        "_xxtestfuzz",
        "xxlimited",
        "xxlimited_35",
        "xxsubtype",
        "coverage",
    }
)
FRAME_ATTRIBUTES = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
ALLOWED_DEVICES = frozenset({"/dev/null", "/dev/zero", "/dev/random", "/dev/urandom"})
STDLIB_ROOT = "/usr/lib/python3.11/"
# Standard-library code that looks at its caller's frame for a module name and copes when
# refused: a refusal there is not held against the harness. Anything else asking for a
# frame (inspect.stack, traceback.walk_stack, a harness's own sys._getframe) is tamper.
BENIGN_FRAME_PEEKS = frozenset(
    {
        ("collections/__init__.py", "namedtuple"),
        ("enum.py", "_create_"),
        ("typing.py", "_caller"),
        ("logging/__init__.py", "<lambda>"),
    }
)
PYC_CACHE = 64
TAMPER_EVENT = "harnessd.tamper"
EVENT_LIMIT = 200


class Refused(PermissionError):
    """An operation the harnessd sandbox does not allow harness code."""


def install(
    *, harness_root: str, sources: dict[str, bytes]
) -> tuple[list[tuple[str, str]], Callable[[int], None]]:
    """Lock this process down. ``sources`` maps every harness file's absolute path to its
    bytes. Returns the list that collects refusals (``(kind, detail)``, ``kind`` being
    ``tamper`` or ``refused``) and ``allow_trace(n)``, which lets the next ``n`` tracing
    hooks through (the guest's own, set before harness code exists)."""
    import _imp
    import _io
    import _stat
    import _thread
    import posix
    import sys

    # Every builtin module, imported now, so nothing needs _imp.create_builtin later.
    for name in sys.builtin_module_names:
        if name not in DENIED_IMPORTS:
            __import__(name)
    events: list[tuple[str, str]] = []
    allowance = [0]
    as_path = harnessd_paths.make_path_reader(
        getcwd=posix.getcwd,
        lstat=posix.lstat,
        readlink=posix.readlink,
        _s_islnk=_stat.S_ISLNK,
    )
    hook = _make_hook(
        as_path=as_path,
        events=events,
        allowance=allowance,
        harness_root=harnessd_paths._normpath(harness_root),
        sources=dict(sources),
        getframe=sys._getframe,
        open_code=_io.open_code,
        get_ident=_thread.get_ident,
        stat=posix.stat,
        _s_isdir=_stat.S_ISDIR,
    )

    # Holds nothing but sys.audit: it is reachable from harness code through _imp.
    def refuse_imp(
        *args: Any, _audit: Any = sys.audit, _event: str = TAMPER_EVENT, **kwargs: Any
    ) -> Any:
        _audit(_event, "re-creating a builtin module (_imp)")
        raise Refused("harnessd: re-creating builtin modules is not allowed in the sandbox")

    # Holds nothing but sys.audit: reachable from harness code through gc.
    def refuse_gc_debug(
        *args: Any, _audit: Any = sys.audit, _event: str = TAMPER_EVENT, **kwargs: Any
    ) -> Any:
        _audit(_event, "gc.set_debug (DEBUG_SAVEALL keeps collected frames in gc.garbage)")
        raise Refused("harnessd: gc.set_debug is not allowed in the sandbox")

    sys.addaudithook(hook)
    _imp.create_builtin = refuse_imp
    _imp.exec_builtin = refuse_imp
    import gc

    gc.set_debug = refuse_gc_debug
    sys.gettrace = _nothing  # type: ignore[assignment]
    sys.getprofile = _nothing  # type: ignore[assignment]

    def allow_trace(n: int) -> None:
        allowance[0] = n

    return events, allow_trace


def _nothing() -> None:
    return None


def _make_hook(
    *,
    as_path: Callable[[Any], str | None],
    events: list[tuple[str, str]],
    allowance: list[int],
    harness_root: str,
    sources: dict[str, bytes],
    getframe: Any,
    open_code: Any,
    get_ident: Any,
    stat: Any,
    _str: Any = str,
    _bytes: Any = bytes,
    _int: Any = int,
    _type: Any = type,
    _len: Any = len,
    _memoryview: Any = memoryview,
    _bytearray: Any = bytearray,
    _tuple: Any = tuple,
    _s_isdir: Any = None,
    _open_dirs: tuple[str, ...] = ("/work/", "/tmp/", "/dev/shm/", "/harness/"),
    _not_a_path: str = harnessd_paths.NOT_A_PATH,
    _value_error: Any = ValueError,
    _attribute_error: Any = AttributeError,
    _refused: Any = Refused,
    _base_exception: Any = BaseException,
    _denied_imports: frozenset[str] = DENIED_IMPORTS,
    _frame_attributes: frozenset[str] = FRAME_ATTRIBUTES,
    _devices: frozenset[str] = ALLOWED_DEVICES,
    _stdlib_root: str = STDLIB_ROOT,
    _benign: frozenset[tuple[str, str]] = BENIGN_FRAME_PEEKS,
    _pyc_cache: int = PYC_CACHE,
    _limit: int = EVENT_LIMIT,
) -> Callable[[str, tuple[Any, ...]], None]:
    busy: dict[int, bool] = {}
    genuine_pyc: dict[str, bytes] = {}
    texts = {path: data.decode("utf-8", "replace") for path, data in sources.items()}
    root_prefix = harness_root.rstrip("/") + "/"

    def record(kind: str, detail: str) -> None:
        # Tamper is always kept: a harness must not be able to fill the list with harmless
        # refusals and then tamper unrecorded.
        if kind == "tamper" or _len(events) < _limit:
            events.append((kind, detail))

    def benign_caller() -> bool:
        # Frames: this function, refuse, the event's handler, the hook, then whoever
        # triggered the event.
        try:
            code = getframe(4).f_code
            name, function = code.co_filename, code.co_name
        except _base_exception:
            return False
        if _type(name) is not _str or not name.startswith(_stdlib_root):
            return False
        return (name[_len(_stdlib_root) :], function) in _benign

    def refuse(what: str, error: Any, always_tamper: bool) -> None:
        kind = "tamper" if always_tamper or not benign_caller() else "refused"
        record(kind, what)
        raise error(f"harnessd: {what} is not allowed in the sandbox")

    def on_open(args: tuple[Any, ...]) -> None:
        path = as_path(args[0] if args else None)
        if path is None:
            return
        if path is _not_a_path:
            refuse("opening a path given as an object of its own class", _refused, True)
        if path.startswith(("/proc/", "/sys/")) or path in ("/proc", "/sys"):
            refuse(f"opening {path}", _refused, True)
        if path.startswith("/dev/") and path not in _devices and not path.startswith("/dev/shm/"):
            refuse(f"opening {path}", _refused, True)
        if not (path + "/").startswith(_open_dirs) and is_directory(path):
            # A descriptor of a directory elsewhere ("/" or "/proc") would let a relative
            # path with dir_fd reach what the path check refuses (the event has no dir_fd).
            refuse(f"opening the directory {path}", _refused, True)
        if path.endswith(".pyc") and path.startswith("/usr/lib/python3"):
            with open_code(path) as handle:
                data = handle.read()
            if _len(genuine_pyc) >= _pyc_cache:
                genuine_pyc.clear()
            genuine_pyc[_bytes(data[16:])] = path  # type: ignore[index]

    def is_directory(path: str) -> bool:
        try:
            return _s_isdir(stat(path).st_mode)
        except _base_exception:
            return False

    def on_marshal(args: tuple[Any, ...]) -> None:
        data = args[0] if args else None
        if _type(data) in (_bytes, _memoryview, _bytearray) and _bytes(data) in genuine_pyc:
            return
        refuse("marshal.loads of bytes that are not a standard-library .pyc", _refused, True)

    def real_text(path: str) -> Any:
        try:
            with open_code(path) as handle:
                return handle.read()
        except _base_exception:
            return None

    def on_compile(args: tuple[Any, ...]) -> None:
        source = args[0] if args else None
        path = as_path(args[1] if _len(args) > 1 else None)
        if path is None:
            return  # an AST's compile is audited without a name: see the tracer's check
        if path is _not_a_path:
            refuse("compiling under a file name of its own class", _refused, True)
        if _type(source) not in (_str, _bytes):
            source = None
        if path == harness_root or path.startswith(root_prefix):
            expected = sources.get(path)
            if expected is not None and source in (expected, texts.get(path)):
                return
            refuse(f"compiling code under the harness file name {path}", _refused, True)
        if path.startswith(_stdlib_root):
            # Code posing as the standard library would pass for a benign frame peek.
            real = real_text(path)
            if real is not None and source in (real, real.decode("utf-8", "replace")):
                return
            refuse(f"compiling code under the standard-library name {path}", _refused, True)

    def on_import(args: tuple[Any, ...]) -> None:
        name = args[0] if args else None
        origin = args[1] if _len(args) > 1 else None
        parts = name.split(".") if _type(name) is _str else []
        if _type(origin) is _str:
            # An extension module's init function is named after the file, whatever the
            # module is called: _ctypes.cpython-311-....so is _ctypes under any name.
            parts.append(origin.rsplit("/", 1)[-1].split(".", 1)[0])
        if _type(name) is not _str and name is not None:
            refuse("importing under a name of its own class", _refused, True)
        for part in parts:
            if part in _denied_imports or part.startswith(("_test", "_xx", "xxlimited")):
                refuse(f"importing {name}", _refused, True)

    def on_getattr(args: tuple[Any, ...]) -> None:
        name = args[1] if _len(args) > 1 else None
        if _type(name) is _str and name in _frame_attributes:
            refuse(f"reading {name}", _attribute_error, False)

    def on_setattr(args: tuple[Any, ...]) -> None:
        if _len(args) > 1 and _type(args[1]) is _str and args[1] == "__code__":
            refuse("assigning __code__", _refused, True)

    def on_trace(args: tuple[Any, ...]) -> None:
        if allowance[0] > 0:
            allowance[0] -= 1
            return
        refuse("setting a trace or profile function", _refused, True)

    def on_getframe(args: tuple[Any, ...]) -> None:
        refuse("inspecting the call stack (sys._getframe)", _value_error, False)

    def always(what: str) -> Callable[[tuple[Any, ...]], None]:
        def handler(args: tuple[Any, ...]) -> None:
            refuse(what, _refused, True)

        return handler

    def on_tamper(args: tuple[Any, ...]) -> None:
        record("tamper", args[0] if args and _type(args[0]) is _str else "tamper")

    handlers: dict[str, Callable[[tuple[Any, ...]], None]] = {
        TAMPER_EVENT: on_tamper,
        # A link could lead a later open() to /proc; harness code has no use for them.
        "os.symlink": always("creating a symbolic link"),
        "open": on_open,
        "marshal.loads": on_marshal,
        "marshal.load": always("marshal.load"),
        "compile": on_compile,
        "import": on_import,
        "object.__getattr__": on_getattr,
        "object.__setattr__": on_setattr,
        "sys.settrace": on_trace,
        "sys.setprofile": on_trace,
        "sys._getframe": on_getframe,
        "sys._current_frames": always("sys._current_frames"),
        "sys.addaudithook": always("adding an audit hook"),
        "code.__new__": always("building code objects (code.__new__, code.replace)"),
        "gc.get_objects": always("gc.get_objects"),
        "gc.get_referrers": always("gc.get_referrers"),
        "gc.get_referents": always("gc.get_referents"),
    }

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if _type(event) is not _str or _type(args) is not _tuple:
            return  # sys.audit with a name of the harness's own class: not a real event
        handler = handlers.get(event)
        if handler is None:
            return
        me = get_ident()
        if busy.get(me):
            return  # this hook's own frame lookups and file reads
        busy[me] = True
        try:
            handler(args)
        finally:
            busy[me] = False

    return hook
