"""The `ablate` command. Only this module and `ablate.commands` know about the terminal; heavy
libraries are imported inside the commands so that `ablate --help` stays fast."""

from __future__ import annotations

import importlib
import sys

import typer

from ablate.commands import COMMAND_MODULES
from ablate.errors import AblateError

app = typer.Typer(
    name="ablate",
    help="Compare and ablate GRPO-family RL algorithms, with statistics.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

for _name in COMMAND_MODULES:
    try:
        _module = importlib.import_module(f"ablate.commands.{_name}")
    except ModuleNotFoundError as exc:  # a command group that has not landed yet
        if exc.name != f"ablate.commands.{_name}":
            raise
        continue
    _module.register(app)


def main(argv: list[str] | None = None) -> int:
    """Entry point: user errors print as one line, never a traceback."""
    try:
        app(args=argv, standalone_mode=False)
    except AblateError as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        return 2
    except KeyboardInterrupt:
        typer.secho("interrupted", err=True)
        return 130
    except SystemExit as exc:
        return int(exc.code or 0)
    except Exception as exc:
        # usage errors from the click that typer bundles (typer._click): shown, not a traceback
        if hasattr(exc, "show") and isinstance(getattr(exc, "exit_code", None), int):
            exc.show()
            return exc.exit_code
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())


def run() -> None:
    """Console-script wrapper around `main`."""
    sys.exit(main())
