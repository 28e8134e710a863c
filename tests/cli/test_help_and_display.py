"""The first commands a new user types: every --help page, and the desktop app on a machine
without a display (one clear message instead of Qt's abort)."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kviewer.cli import SUBCOMMANDS, build_parser
from kviewer.ui.display import XCB_LIBRARIES, display_problem


def _subcommands() -> list[str]:
    parser = build_parser()
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sorted(actions[0].choices)


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kviewer", *args], capture_output=True, text=True, timeout=120, env=env)


def test_every_subcommand_is_listed() -> None:
    assert set(_subcommands()) == set(SUBCOMMANDS)


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_top_level_help(flag: str) -> None:
    proc = _run(flag)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: kviewer")
    for name in SUBCOMMANDS:
        assert name in proc.stdout
    assert not proc.stderr


@pytest.mark.parametrize("command", _subcommands())
def test_subcommand_help(command: str) -> None:
    proc = _run(command, "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"usage: kviewer {command}")
    assert "Traceback" not in proc.stderr and not proc.stderr


def _headless_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env["KVIEWER_NO_CACHE"] = "1"
    return env


def test_app_without_a_display_exits_2_with_advice(sample_traces: Path) -> None:
    proc = _run(str(sample_traces / "h200_llm_block_eager.pt.trace.json.gz"), env=_headless_env())
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert 1 <= len(lines) <= 2, proc.stderr
    assert "no display found" in lines[0]
    assert "xvfb-run -a kviewer FILE" in proc.stderr
    assert "kviewer summary|sol|report|screenshot FILE" in proc.stderr
    assert not proc.stdout


def test_app_with_an_unreachable_display_exits_2(sample_traces: Path, tmp_path: Path) -> None:
    env = _headless_env()
    env["DISPLAY"] = "127.0.0.1:59"  # no X server listens on port 6059 here
    proc = _run(str(sample_traces / "h200_llm_block_eager.pt.trace.json.gz"), env=env)
    assert proc.returncode == 2
    assert "no display reachable at DISPLAY=127.0.0.1:59" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) <= 2


def test_missing_xcb_libraries_are_named_with_the_apt_line() -> None:
    missing = {"libxcb-cursor.so.0", "libxcb-icccm.so.4"}
    why = display_problem(
        {"DISPLAY": ":0"}, "linux", can_load=lambda lib: lib not in missing, reachable=lambda _d: True
    )
    assert why is not None
    assert "libxcb-cursor.so.0" in why and "libxcb-icccm.so.4" in why
    assert "apt-get install -y libxcb-cursor0 libxcb-icccm4" in why
    assert len(why.splitlines()) <= 2


@pytest.mark.parametrize(
    "env,platform",
    [
        ({"DISPLAY": ":0"}, "linux"),
        ({"WAYLAND_DISPLAY": "wayland-0"}, "linux"),
        ({"QT_QPA_PLATFORM": "offscreen"}, "linux"),
        ({}, "darwin"),
        ({}, "win32"),
    ],
)
def test_no_problem_where_a_window_can_open(env: dict[str, str], platform: str) -> None:
    assert display_problem(env, platform, can_load=lambda _lib: True, reachable=lambda _d: True) is None


def test_every_xcb_library_has_a_package() -> None:
    assert all(lib.startswith("lib") and ".so." in lib and pkg for lib, pkg in XCB_LIBRARIES.items())


def test_top_level_usage_shows_the_desktop_form() -> None:
    usage = _run("--help").stdout.split("\n\n")[0]
    assert "kviewer [FILE ...]" in usage and "kviewer COMMAND" in usage
    # the subcommands' usage lines are still built from "kviewer", not from the custom usage
    assert _run("summary", "--help").stdout.startswith("usage: kviewer summary [-h]")


def test_no_display_advice_is_a_real_second_line(sample_traces: Path) -> None:
    proc = _run(str(sample_traces / "h200_llm_block_eager.pt.trace.json.gz"), env=_headless_env())
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 2, proc.stderr
    assert "\\x0a" not in proc.stderr
    assert lines[0].startswith("kviewer: error: no display found") and "xvfb-run" in lines[1]


def test_a_mistyped_command_is_named_not_taken_for_a_file(tmp_path: Path, sample_traces: Path) -> None:
    trace = str(sample_traces / "h200_llm_block_eager.pt.trace.json.gz")
    proc = _run("summry", trace)
    assert proc.returncode == 2 and not proc.stdout
    assert proc.stderr.strip() == "kviewer: error: unknown command 'summry' (did you mean summary?)"
    word = _run("frobnicate")
    assert word.returncode == 2 and "neither a command nor a file" in word.stderr and "summary" in word.stderr
    missing = _run(str(tmp_path / "gone.json"))
    assert missing.returncode == 2 and "no such file or directory" in missing.stderr


def test_a_file_named_like_a_word_still_opens_in_the_app(tmp_path: Path, sample_traces: Path) -> None:
    (tmp_path / "summry").write_bytes((sample_traces / "h200_llm_block_eager.pt.trace.json.gz").read_bytes())
    proc = subprocess.run([sys.executable, "-m", "kviewer", "summry"], capture_output=True, text=True, timeout=120,
                          env={**_headless_env(), "PYTHONPATH": os.pathsep.join(sys.path)}, cwd=tmp_path)
    # the desktop app's way (here: no display), not the unknown-command error
    assert proc.returncode == 2 and "no display found" in proc.stderr and "unknown command" not in proc.stderr


def _help(command: str) -> str:
    parser = build_parser()
    if not command:
        return parser.format_help()
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return actions[0].choices[command].format_help()


def _section(text: str, title: str) -> list[str]:
    """The lines of a help page's ``title:`` section (up to the next blank line)."""
    lines = text.splitlines()
    start = lines.index(f"{title}:") + 1
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start:end]


@pytest.mark.parametrize("command", ["", *SUBCOMMANDS])
def test_every_help_page_has_examples_that_parse(command: str) -> None:
    import shlex

    examples = [line.strip() for line in _section(_help(command), "examples") if line.startswith("    kviewer")]
    assert examples, f"kviewer {command} --help has no example"
    parser = build_parser()
    for line in examples:
        argv = shlex.split(line.split(" > ")[0])[1:]  # no shell redirection, no "kviewer"
        if command:
            assert argv[0] == command, line
        if argv and argv[0] in SUBCOMMANDS:
            args = parser.parse_args(argv)  # a user error (SystemExit or UserError) fails the test
            assert args.command == argv[0]


@pytest.mark.parametrize("command", ["", *SUBCOMMANDS])
def test_every_help_page_names_the_environment_variables_that_change_it(command: str) -> None:
    from kviewer.cli.helptext import APPLIES, ENV_BY_NAME

    named = [line.split()[0] for line in _section(_help(command), "environment") if line.startswith("  KVIEWER_")]
    assert named, f"kviewer {command} --help names no environment variable"
    assert set(named) <= set(ENV_BY_NAME)
    if command:
        assert named == list(APPLIES[command])


def test_the_environment_table_is_what_the_code_reads() -> None:
    """Each variable in the table is read where it says, and every KVIEWER_* the package names is in it."""
    import re

    from kviewer.cli.helptext import APPLIES, ENVIRONMENT, EXAMPLES

    root = Path(__file__).resolve().parents[2]
    for var in ENVIRONMENT:
        assert var.name in (root / var.read_by).read_text(encoding="utf-8"), (var.name, var.read_by)
    in_code = {m for p in (root / "kviewer").rglob("*.py") for m in re.findall(r"KVIEWER_[A-Z_]+[A-Z]", p.read_text(encoding="utf-8"))}
    assert in_code <= {v.name for v in ENVIRONMENT}, sorted(in_code - {v.name for v in ENVIRONMENT})
    assert set(APPLIES) == set(SUBCOMMANDS) and set(EXAMPLES) == {"", *SUBCOMMANDS}


def _completion(shell: str) -> str:
    proc = _run("--completion", shell)
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    return proc.stdout


def _complete(script: Path, *words: str) -> list[str]:
    """What bash offers after ``words`` (the last one being completed), through the script's function."""
    quoted = " ".join("'" + w.replace("'", "'\\''") + "'" for w in words)
    cmd = f"source {script}; COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; _kviewer; printf '%s\\n' \"${{COMPREPLY[@]}}\""
    proc = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=30, cwd=script.parent)
    assert proc.returncode == 0, proc.stderr
    return [w for w in proc.stdout.splitlines() if w]


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completion_is_valid_and_knows_every_command_and_option(tmp_path: Path) -> None:
    script = tmp_path / "kviewer.bash"
    script.write_text(_completion("bash"), encoding="utf-8")
    check = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, timeout=30)
    assert check.returncode == 0, check.stderr
    text = script.read_text(encoding="utf-8")
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name in SUBCOMMANDS:
        assert f"        {name})" in text  # a case of its own
        for action in sub.choices[name]._actions:
            for flag in action.option_strings:
                assert flag in text, (name, flag)
    (tmp_path / "run.pt.trace.json.gz").write_bytes(b"")
    assert _complete(script, "kviewer", "sum") == ["summary"]
    assert "--format" in _complete(script, "kviewer", "summary", "--fo")
    assert _complete(script, "kviewer", "summary", "--format", "") == ["table", "csv", "json"]
    assert _complete(script, "kviewer", "sol", "run.pt.trace.json.gz", "--device", "") == []  # a name: nothing to offer
    assert _complete(script, "kviewer", "report", "run.pt.trace.json.gz", "-o", "ru") == ["run.pt.trace.json.gz"]
    assert _complete(script, "kviewer", "summary", "ru") == ["run.pt.trace.json.gz"]  # FILE: files
    assert set(_complete(script, "kviewer", "")) >= set(SUBCOMMANDS) | {"run.pt.trace.json.gz"}  # kviewer [FILE ...] too


def test_zsh_and_fish_completion_name_every_command() -> None:
    zsh, fish = _completion("zsh"), _completion("fish")
    assert "bashcompinit" in zsh and "complete -o filenames" in zsh
    for name in SUBCOMMANDS:
        assert f"-a {name} " in fish and f"__fish_seen_subcommand_from {name}'" in fish
    for shell, text in (("zsh", zsh), ("fish", fish)):
        exe = shutil.which(shell)
        if exe:  # checked where the shell is installed
            assert subprocess.run([exe, "-n"], input=text, text=True, capture_output=True, timeout=30).returncode == 0
    bad = _run("--completion", "tcsh")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
