"""The ``kviewer`` command line.

``kviewer [FILE ...]`` opens the desktop app; the subcommands work without a display and import no
Qt. A first argument that is neither a subcommand nor an existing path is a user error naming the
nearest subcommand (a mistyped command is not a missing file). Exit status: 0 on success, 2 on a
user error (bad file, bad option) with one line on stderr (and a line of advice where there is
some), 130 when interrupted.

Each subcommand is a module of this package, ``kviewer/cli/NAME.py``: a thin shell over the library
with ``register(sub)`` adding its parser (``set_defaults(func=...)``). What they share (loading
with progress and Ctrl+C, writing tables, common options) is in :mod:`kviewer.cli.common`; signal
handling in :mod:`kviewer.cli.signals`. Options travel as arguments, never through module globals
or environment variables set at run time.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import sys
from typing import Any, Sequence

from kviewer.cli.signals import EXIT_INTERRUPTED, INTERRUPTED, CtrlCCancels, CtrlCWitness, QuietWhileStarting, quiet_while_ending

_starting = QuietWhileStarting()  # Ctrl+C during the imports below: "interrupted", 130

from kviewer import __version__
from kviewer.cli.common import (
    EXIT_OK,
    EXIT_SLOWER,
    EXIT_USER_ERROR,
    TerminalProgress,
    human_table,
    load_trace,
    parse_size,
    parse_time_range,
    say,
    write_frame,
)
from kviewer.cli.completion import SHELLS, script as completion_script
from kviewer.cli.helptext import HelpFormatter, epilog
from kviewer.desktop import main as install_desktop
from kviewer.errors import UserError
from kviewer.io.memory import check_budget_setting
from kviewer.tempdir import install_signal_cleanup
from kviewer.ui.display import display_problem

__all__ = [
    "EXIT_OK",
    "EXIT_SLOWER",
    "EXIT_USER_ERROR",
    "SUBCOMMANDS",
    "CtrlCCancels",
    "TerminalProgress",
    "UserError",
    "build_parser",
    "human_table",
    "load_trace",
    "main",
    "parse_size",
    "parse_time_range",
    "run_gui",
    "write_frame",
    "write_report",
]

#: every subcommand, in the order ``kviewer --help`` lists them: each lives in a module of its own,
#: ``kviewer/cli/NAME.py``, a thin shell over the library with ``register(sub)`` adding its parser
#: (``set_defaults(func=...)``). A new subcommand is a new module named here.
SUBCOMMANDS: tuple[str, ...] = (
    "info", "summary", "stats", "kernels", "sol", "fusion", "compare", "screenshot", "report", "export", "sql", "fleet",
    "critpath", "whatif", "graphs", "memory", "calltree",
)


#: the top-level usage: both forms, the desktop app first
USAGE = """kviewer [FILE ...]            open the desktop app with these files
       kviewer COMMAND [ARGS ...]    work on traces without a display (kviewer COMMAND --help)
       kviewer [-h] [--version] [--install-desktop] [--completion {bash,zsh,fish}]"""

class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # examples and environment tables in epilogs keep their lines (cli.helptext)
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UserError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="kviewer",
        # the two forms: argparse would show only the subcommands, and the desktop app is the first
        usage=USAGE,
        description="One window for GPU profiler traces. Without a subcommand, opens the desktop app.",
        epilog=epilog(""),
    )
    p.add_argument("--version", action="version", version=f"kviewer {__version__}")
    p.add_argument("--install-desktop", action="store_true",
                   help="add kviewer to this user's desktop menu with its icon and file kinds (.ncu-rep, .nsys-rep, "
                        "*.pt.trace.json[.gz], fleet.sqlite) under $XDG_DATA_HOME, then exit")
    p.add_argument("--completion", choices=SHELLS, metavar="{" + ",".join(SHELLS) + "}",
                   help="print a completion script for this shell, made from these options, then exit "
                        "(e.g. kviewer --completion bash > ~/.local/share/bash-completion/completions/kviewer)")
    # prog given: argparse would otherwise build the subcommands' usage from the custom one above
    sub = p.add_subparsers(dest="command", metavar="COMMAND", prog="kviewer")
    for name in SUBCOMMANDS:
        importlib.import_module(f"kviewer.cli.{name}").register(sub)
    for name, sp in sub.choices.items():  # every page ends with examples and its environment
        sp.epilog = f"{sp.epilog}\n\n{epilog(name)}" if sp.epilog else epilog(name)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    code = _run(argv)
    quiet_while_ending(code)  # Ctrl+C while the interpreter shuts down: this code, no traceback
    return code


def _run(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    with CtrlCWitness() as ctrl_c:  # whether a Ctrl+C came, whatever became of it
        try:
            install_signal_cleanup()  # SIGTERM mid-load must not leave temporary files behind
            if argv == ["--install-desktop"]:
                return install_desktop()
            if argv and argv[0] in SUBCOMMANDS or any(a in ("-h", "--help", "--version", "--completion") for a in argv[:1]):
                parser = build_parser()
                args = parser.parse_args(argv)
                if getattr(args, "completion", None):
                    sys.stdout.write(completion_script(args.completion, parser))
                    return EXIT_OK

                problem = check_budget_setting()
                if problem:
                    raise UserError(problem)
                if not getattr(args, "func", None):
                    parser.print_help()
                    return EXIT_OK
                return int(args.func(args))
            not_a_command(argv)
            return run_gui(argv)
        except UserError as exc:
            if ctrl_c.seen():  # the error is what a Ctrl+C left behind
                print(INTERRUPTED, file=sys.stderr)
                return EXIT_INTERRUPTED
            print(say(f"kviewer: error: {exc}"), file=sys.stderr)
            if exc.hint:
                print(say(exc.hint), file=sys.stderr)
            return EXIT_USER_ERROR
        except BrokenPipeError:
            # output piped into head: not an error
            try:
                sys.stdout = open(os.devnull, "w")
            except OSError:
                pass
            return EXIT_OK
        except KeyboardInterrupt:
            print(INTERRUPTED, file=sys.stderr)
            return EXIT_INTERRUPTED
        except Exception:
            if not ctrl_c.seen():
                raise
            # a Ctrl+C that a library turned into an error of its own (numpy's start-up: ImportError)
            print(INTERRUPTED, file=sys.stderr)
            return EXIT_INTERRUPTED


def not_a_command(argv: Sequence[str]) -> None:
    """A user error when ``argv[0]`` is neither a subcommand nor a path that exists: a mistyped
    command (``kviewer summry FILE``) is named with the nearest commands, not taken for a missing
    file. A path that exists opens in the desktop app whatever its name."""
    if not argv or argv[0].startswith("-") or os.path.exists(argv[0]):
        return

    word = argv[0]
    near = difflib.get_close_matches(word, SUBCOMMANDS, n=1, cutoff=0.6)
    if near:
        raise UserError(f"unknown command {word!r} (did you mean {near[0]}?)")
    if os.sep not in word and "/" not in word and "." not in word:
        # a bare word: a command more likely than a file without suffix
        raise UserError(f"{word}: neither a command nor a file or folder",
                        hint=f"the commands: {', '.join(SUBCOMMANDS)} (kviewer --help)")


def run_gui(files: Sequence[str]) -> int:
    for f in files:
        if f.startswith("-"):
            raise UserError(f"unknown option {f!r}; see 'kviewer --help'")
    missing = [f for f in files if not os.path.exists(f)]
    if missing:
        raise UserError(f"{missing[0]}: no such file or directory")

    problem = display_problem()
    if problem is not None:
        # the problem, then what to do instead: a line each (escaped apart, so the break stays one)
        what, _, advice = problem.partition("\n")
        raise UserError(what, hint=advice or None)
    try:
        from kviewer.ui.app import run
    except ImportError as exc:
        raise UserError(f"the desktop app is not available: {exc}") from exc
    return int(run(list(files)))


_starting.end()  # the imports are done: Ctrl+C is main()'s again (KeyboardInterrupt, 130)
