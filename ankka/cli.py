"""``ankka``: one command, a subcommand per job.

Each subcommand lives with the deployable it runs and is imported only when chosen, so
``ankka standin`` never loads the operator's Kubernetes client and ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

__all__ = ["main"]

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


def _chosen(argv: list[str]) -> str | None:
    """The command ``argv`` names (its first word not an option), if it is one of ours."""
    for word in argv:
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(
        prog="ankka",
        description="ankka: agents on Kubernetes. Run `ankka COMMAND --help` for a command.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    # Only the chosen command's module is imported (and configured): the others cost a
    # process that runs one command nothing, and `ankka --help` needs their one-line help only.
    chosen = _chosen(words)
    modules = {}
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
        modules[name] = module
    args = parser.parse_args(words)
    result: int = modules[args.command].run(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
