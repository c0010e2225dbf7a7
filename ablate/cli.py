"""The `ablate` command. Only this module and `ablate.commands` know about the terminal; heavy
libraries are imported inside the commands so that `ablate --help` stays fast."""

from __future__ import annotations

import importlib
import sys
import warnings

import typer

from ablate.commands import COMMAND_MODULES
from ablate.errors import AblateError, AblateWarning

app = typer.Typer(
    name="ablate",
    help="Compare and ablate GRPO-family RL algorithms, with statistics.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

for _name in COMMAND_MODULES:
    importlib.import_module(f"ablate.commands.{_name}").register(app)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """ablate's own warnings (study confounds, inert factors) as one line, without a source
    location; anything else as Python shows it."""
    if issubclass(category, AblateWarning):
        typer.secho(f"warning: {message}", fg=typer.colors.YELLOW, err=True)
    else:
        _python_show_warning(message, category, filename, lineno, file, line)


_python_show_warning = warnings.showwarning


def main(argv: list[str] | None = None) -> int:
    """Entry point: user errors print as one line, never a traceback."""
    warnings.showwarning = _show_warning
    try:
        code = app(args=argv, standalone_mode=False)
    except AblateError as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        return 2
    except KeyboardInterrupt:
        typer.secho("interrupted", err=True)
        return 130
    except typer.Exit as exc:
        return exc.exit_code
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    except Exception as exc:
        # usage errors from the click that typer bundles (typer._click): shown, not a traceback
        if hasattr(exc, "show") and isinstance(getattr(exc, "exit_code", None), int):
            exc.show()
            return exc.exit_code
        raise
    # without standalone mode, click hands back a command's `typer.Exit(code)` as its result
    return code if isinstance(code, int) else 0


if __name__ == "__main__":
    sys.exit(main())


def run() -> None:
    """Console-script wrapper around `main`."""
    sys.exit(main())
