"""The `ablate` command. Only this module and `ablate.commands` know about the terminal; heavy
libraries are imported inside the commands so that `ablate --help` stays fast."""

from __future__ import annotations

import errno
import importlib
import signal
import sys
import warnings

import typer

from ablate.base import lifetime
from ablate.base.durable import disk_hint, is_disk_error, too_long
from ablate.base.errors import AblateError, AblateWarning
from ablate.commands import COMMAND_MODULES
from ablate.commands.help_text import tidy_help


def _flags_without_a_type() -> None:
    """typer 0.29's rich help prints `<bool>` beside flags (`--help`, `--check`), which take
    no value; show no type for them, as its plain help does."""
    from typer.core import TyperOption

    original = TyperOption.display_type_rich

    def display_type_rich(self, ctx):
        return None if self.is_flag or self.count else original(self, ctx)

    TyperOption.display_type_rich = display_type_rich


_flags_without_a_type()

app = typer.Typer(
    name="ablate",
    help="Compare and ablate GRPO-family RL algorithms, with statistics.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

for _name in COMMAND_MODULES:
    importlib.import_module(f"ablate.commands.{_name}").register(app)
tidy_help(app)  # docstrings' line breaks would otherwise split sentences in the help


#: The ablate warnings this command has printed (each is printed once: the same algorithm is
#: checked again when a trial starts, after imports that reset Python's own once-only record).
_shown: set[str] = set()


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """ablate's own warnings (study confounds, inert factors) as one line, without a source
    location, once each; anything else as Python shows it."""
    if issubclass(category, AblateWarning):
        if str(message) not in _shown:
            _shown.add(str(message))
            typer.secho(f"warning: {message}", fg=typer.colors.YELLOW, err=True)
    else:
        _python_show_warning(message, category, filename, lineno, file, line)


_python_show_warning = warnings.showwarning


def _interrupted(signum: int) -> int:
    """One line for a stop by SIGINT or SIGTERM; the exit status a shell gives that signal."""
    name = signal.Signals(signum).name
    typer.secho(f"interrupted by {name}: a rerun resumes where it stopped", err=True)
    return 128 + signum


def main(argv: list[str] | None = None) -> int:
    """Entry point: user errors print as one line, never a traceback."""
    warnings.showwarning = _show_warning
    _shown.clear()  # once per command
    # SIGTERM (and a SIGINT a script's `&` would have ignored) stop as Ctrl-C does: the trial's
    # run is marked KILLED, and one line says so
    lifetime.received.clear()
    lifetime.interrupt_on(signal.SIGINT, signal.SIGTERM)
    try:
        code = app(args=argv, standalone_mode=False)
    except AblateError as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        return 2
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:  # a --results or store path past the system's limit
            typer.secho(f"error: {too_long(exc)}", fg=typer.colors.RED, err=True)
            return 2
        if not (is_disk_error(exc) or exc.errno in (errno.ENOTDIR, errno.EISDIR)):
            raise
        # a disk that fills or turns read-only after the checks (the report's files, a cache)
        where = f" {exc.filename}" if exc.filename else ""
        hint = f" ({disk_hint(exc)})" if disk_hint(exc) else ""
        typer.secho(
            f"error: cannot write{where}: {exc.strerror}{hint}", fg=typer.colors.RED, err=True
        )
        return 2
    except KeyboardInterrupt as exc:
        return _interrupted(getattr(exc, "signum", signal.SIGINT))
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
    if lifetime.received:  # typer hands back a KeyboardInterrupt as exit status 130
        return _interrupted(lifetime.received[0])
    # without standalone mode, click hands back a command's `typer.Exit(code)` as its result
    return code if isinstance(code, int) else 0


if __name__ == "__main__":
    sys.exit(main())


def run() -> None:
    """Console-script wrapper around `main`."""
    sys.exit(main())
