"""Run the operator: reconcile Agent, Task and InstallationModel resources (kopf).

Settings come from the environment (see docs/operator.md); these flags choose what to watch and
how to log. The same runs as `python -m ankka.operator`. kopf is started on the handlers module
(ankka.operator.handlers), never a file path, so the package's folder is not put on sys.path.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging

__all__ = ["configure", "main", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument(
        "-n",
        "--namespace",
        action="append",
        default=[],
        help="watch only this namespace (repeatable); default: all namespaces",
    )
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="the default")
    parser.add_argument("--verbose", action="store_true", help="debug logging")
    parser.add_argument(
        "--liveness",
        default=None,
        metavar="URL",
        help="serve kopf's liveness probe, e.g. http://0.0.0.0:8080/healthz",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="ankka operator",
        description="Reconcile Agent, Task and InstallationModel resources (kopf).",
    )
    configure(parser)
    return run(parser.parse_args(argv))


def run(args: argparse.Namespace) -> int:
    try:
        import kopf
    except ImportError:
        raise SystemExit(
            "ankka operator needs the 'operator' extra: pip install 'ankka[operator]'"
        ) from None
    from ankka._kernel.urls import http_url
    from ankka.operator.kube import Kube

    if args.liveness is not None:
        http_url(args.liveness, setting="--liveness", example="http://0.0.0.0:8080/healthz")
    # The credentials are checked before kopf starts: kopf would retry a startup that cannot
    # log in forever, a traceback a minute; a ConfigurationError is one line and status 2.
    Kube.from_environment(field_manager="ankka-operator").close()
    kopf.configure(verbose=args.verbose)  # kopf installs the log handler
    logging.getLogger("httpcore").setLevel(logging.INFO)  # its DEBUG is per-socket noise
    logging.getLogger("ankka.operator").setLevel(logging.DEBUG if args.verbose else logging.INFO)
    # Importing the module registers its handlers with kopf's default registry.
    importlib.import_module("ankka.operator.handlers")
    asyncio.run(
        kopf.operator(
            clusterwide=not args.namespace,
            namespaces=list(args.namespace),
            liveness_endpoint=args.liveness,
            standalone=True,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
