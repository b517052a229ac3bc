"""``ankka``: one command, a subcommand per job.

Each subcommand lives with the deployable it runs and is imported only when chosen, so
``ankka standin`` never loads the operator's Kubernetes client and ``--help`` stays fast.

A user's mistake is answered with one line on stderr, ``ankka COMMAND: what was wrong and
what to pass instead``, and exit status 2, never a traceback: argparse's own errors (an
unknown option, a port that is no port), a :class:`~ankka._kernel.errors.ConfigurationError`
or :class:`~ankka._kernel.errors.RequestError` a command raises, and the ``SystemExit``
messages of set-up code. A bug still shows its traceback.

Every command takes ``--log-format text|json`` (or ``ANKKA_LOG_FORMAT``): logging is
configured here, once, before the command runs (:mod:`ankka._kernel.logs`), and those one-line
refusals follow the format too.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import NoReturn

from ankka._kernel import logs
from ankka._kernel.errors import ConfigurationError, RequestError

__all__ = ["COMMANDS", "main"]

# name → (module, one-line help). The module has configure(parser) and run(args) -> int, and
# may set DESCRIPTION and EPILOG for its --help (its docstring is the description otherwise).
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("ankka.runtime.serve.cli", "serve a service's agents over HTTP"),
    "standin": ("ankka.local.cli_standin", "run the scripted stand-in model server"),
    "gateway": ("ankka.gateway.cli", "run the checked model gateway (OpenAI-compatible, mTLS)"),
    "operator": ("ankka.operator.cli", "run the Kubernetes operator (extra 'operator')"),
    "approve": ("ankka.operator.approve", "decide a Task's pending tool approval (kubeconfig)"),
    "local-model": ("ankka.local.cli_local_model", "serve a small real model (llama.cpp) locally"),
    "up": ("ankka.local.up.cli_up", "the whole platform on this machine (model, gateway, runtime)"),
    "down": ("ankka.local.up.cli_down", "stop what `ankka up` started"),
    "status": ("ankka.local.up.cli_status", "show what `ankka up` runs"),
}

USAGE_ERROR = 2  # the status of every refusal of what the user passed, as argparse's own


class _Parser(argparse.ArgumentParser):
    """argparse, with an error said in one line (and where to read more), not the usage."""

    def error(self, message: str) -> NoReturn:
        line = f"{self.prog}: {message} (see `{self.prog} --help`)"
        logs.say(line, stream=sys.stderr, level="ERROR")  # in the format main() chose
        self.exit(USAGE_ERROR)


def _chosen(argv: list[str]) -> str | None:
    """The command ``argv`` names (its first word not an option), if it is one of ours."""
    for word in argv:
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def _version() -> str:
    from importlib import metadata  # only for --version: it reads the installed package's files

    try:
        return metadata.version("ankka")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


class _Version(argparse.Action):
    """``--version``: the installed package's version, looked up only when it is asked for."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(
            option_strings,
            dest=argparse.SUPPRESS,
            default=argparse.SUPPRESS,
            nargs=0,
            help="show program's version number and exit",
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        print(f"ankka {_version()}")  # on stdout, as argparse's own version action
        parser.exit()


def _parser(
    words: list[str],
) -> tuple[argparse.ArgumentParser, dict[str, tuple[object, argparse.ArgumentParser]]]:
    parser = _Parser(
        prog="ankka",
        description="ankka: agents on Kubernetes. Run `ankka COMMAND --help` for a command.",
    )
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    # Only the chosen command's module is imported (and configured): the others cost a
    # process that runs one command nothing, and `ankka --help` needs their one-line help only.
    chosen = _chosen(words)
    modules: dict[str, tuple[object, argparse.ArgumentParser]] = {}
    for name, (module_name, help_text) in COMMANDS.items():
        if name != chosen:
            sub.add_parser(name, help=help_text)
            continue
        module = importlib.import_module(module_name)
        command = sub.add_parser(
            name,
            help=help_text,
            description=getattr(module, "DESCRIPTION", module.__doc__),
            epilog=getattr(module, "EPILOG", None),
            # docstrings keep their paragraphs; DESCRIPTION strings are wrapped
            formatter_class=(
                argparse.HelpFormatter
                if hasattr(module, "DESCRIPTION")
                else argparse.RawDescriptionHelpFormatter
            ),
        )
        module.configure(command)
        logs.add_option(command)
        modules[name] = (module, command)
    return parser, modules


def _refuse_plain(message: str) -> int:
    logs.say(f"ankka: {message}", stream=sys.stderr, level="ERROR")
    return USAGE_ERROR


def _refuse(command: str, message: str) -> int:
    prefix = f"ankka {command}:"
    line = message if message.startswith(prefix) else f"{prefix} {message}"
    logs.say(line, stream=sys.stderr, level="ERROR")
    return USAGE_ERROR


def _log_format(words: list[str]) -> str | None:
    """The ``--log-format`` value among ``words``, read before parsing so that argparse's own
    errors are written in it too; ``None`` when absent (``ANKKA_LOG_FORMAT`` then decides)."""
    for at, word in enumerate(words):
        if word == "--log-format" and at + 1 < len(words):
            return words[at + 1] if words[at + 1] in logs.FORMATS else None
        if word.startswith("--log-format="):
            value = word.partition("=")[2]
            return value if value in logs.FORMATS else None
    return None


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    try:
        logs.configure(_log_format(words))
    except SystemExit as exc:  # ANKKA_LOG_FORMAT holds no format: said in the default one
        logs.configure("text")
        chosen = _chosen(words)
        return _refuse(chosen, str(exc.code)) if chosen else _refuse_plain(str(exc.code))
    parser, modules = _parser(words)
    args, extra = parser.parse_known_args(words)
    module, command = modules[args.command]
    if extra:  # said by the command's parser, so its --help is the one named
        command.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        result: int = module.run(args)  # type: ignore[attr-defined]
    except (ConfigurationError, RequestError) as exc:
        return _refuse(args.command, str(exc))
    except SystemExit as exc:
        if isinstance(exc.code, str):  # set-up code's refusal: a message, not a status
            return _refuse(args.command, exc.code)
        raise
    except KeyboardInterrupt:
        return 130
    return result


if __name__ == "__main__":
    sys.exit(main())
