"""Run the operator: reconcile Agent, Task and InstallationModel resources (kopf).

Settings come from the environment (see docs/operator.md); these flags choose what to watch and
how to log: ankka's --log-format (text or json, like every command), or kopf's own format with
--kopf-log-format. The same runs as `python -m ankka.operator`. kopf is started on the handlers
module (ankka.operator.handlers), never a file path, so the package's folder is not put on
sys.path.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import os

from ankka._kernel import logs

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
        "--kopf-log-format",
        choices=("plain", "full", "json"),
        default=os.environ.get("ANKKA_KOPF_LOG_FORMAT") or None,
        help="log in kopf's own format instead of ankka's --log-format: plain (the message), "
        "full (kopf's default) or json (kopf's JSON, with each line's object); "
        "env ANKKA_KOPF_LOG_FORMAT",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        metavar="PORT",
        help="serve Prometheus metrics at /metrics over plain HTTP on PORT (0 picks a free one; "
        "the line 'ankka operator: metrics on URL' says where); env ANKKA_OPERATOR_METRICS_PORT",
    )
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
    logs.add_option(parser)
    args = parser.parse_args(argv)
    logs.configure(args.log_format)
    return run(args)


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
    if args.metrics_port is not None:  # the startup handler reads the settings from the env
        os.environ["ANKKA_OPERATOR_METRICS_PORT"] = str(args.metrics_port)
    level = logging.DEBUG if args.verbose else logging.INFO
    if args.kopf_log_format:
        if args.kopf_log_format not in ("plain", "full", "json"):
            raise SystemExit(
                f"ankka operator: ANKKA_KOPF_LOG_FORMAT={args.kopf_log_format[:20]!r}: "
                "choose plain, full or json"
            )
        # kopf's own handler and formatter on the root logger.
        kopf.configure(
            verbose=args.verbose, log_format=kopf.LogFormat[args.kopf_log_format.upper()]
        )
    else:
        # kopf's levels and its quieting of asyncio, then ankka's one format in its handler's
        # place (logs.configure replaces the root's handlers).
        kopf.configure(verbose=args.verbose)
        logs.configure(getattr(args, "log_format", None), level=level)
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
