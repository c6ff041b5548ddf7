"""The command table in cluster/cli.py: one line of help per command, every command module listed, `--help` cheap."""

import pkgutil
import subprocess
import sys

import cluster.commands
from cluster.cli import SUBCOMMANDS, build_parser
from tests.paths import ROOT

HELPERS = {"common"}  # modules of cluster/commands that are not commands


def test_the_table_lists_exactly_the_command_modules():
    modules = {m.name for m in pkgutil.iter_modules(cluster.commands.__path__)} - HELPERS
    assert set(SUBCOMMANDS) == modules


def test_each_command_keeps_no_second_copy_of_its_help():
    parser = build_parser()
    for name in SUBCOMMANDS:
        module = sys.modules[f"cluster.commands.{name}"]
        assert callable(module.add_arguments) and callable(module.run)
        assert not hasattr(module, "HELP"), f"cluster/commands/{name}.py has its own help line; cli.py's is the one"
    choices = next(a for a in parser._actions if a.dest == "command").choices
    assert {n: choices[n].description for n in SUBCOMMANDS} == SUBCOMMANDS


def test_help_lists_every_command_without_importing_one():
    probe = ("import sys, contextlib, io\n"
             "from cluster.cli import main\n"
             "out = io.StringIO()\n"
             "with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):\n"
             "    main(['--help'])\n"
             "print(out.getvalue())\n"
             "print('IMPORTED', sorted(m for m in sys.modules if m.startswith('cluster.commands.')))\n")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.rstrip().endswith("IMPORTED []")
    listed = " ".join(out.split())  # argparse wraps long help lines
    for name, help_text in SUBCOMMANDS.items():
        assert f"{name} {help_text}" in listed


def test_a_flag_is_matched_exactly_never_by_its_prefix(capsys):
    # argparse's default takes `--shard 2` for `--shards 2`: a 2 s run became a minute
    from cluster.cli import main

    assert main(["run", "examples/kv_decode.toml", "--shard", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: rdasim: unrecognized arguments: --shard 2 (--shard: did you mean --shards?)"


def test_an_unknown_flag_far_from_every_flag_gets_no_guess(capsys):
    from cluster.cli import main

    assert main(["report", "somewhere", "--zzzqqq"]) == 2
    err = capsys.readouterr().err.strip()
    assert "unrecognized arguments: --zzzqqq" in err and "did you mean" not in err


def test_every_parser_built_refuses_prefixes():
    parser = build_parser()
    stack = [parser]
    while stack:
        p = stack.pop()
        assert p.allow_abbrev is False, p.prog
        stack += [s for a in p._actions if hasattr(a, "choices") and isinstance(a.choices, dict)
                  for s in a.choices.values()]
