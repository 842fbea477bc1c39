"""What the command line does around every command: a missing extra named with its install
command, Ctrl-C reported as an interruption."""

import sys

from evaluator.cli import main
from evaluator.studies import demo_times


def test_a_command_missing_an_extra_at_run_time_says_how_to_install_it(monkeypatch, capsys,
                                                                        tmp_path):
    monkeypatch.setitem(sys.modules, "cma", None)  # as if the model extra were not installed
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--benchmarks", "mmlu", "--run-name", "r"]) == 1
    err = capsys.readouterr().err
    assert "`tinyrouter train` needs cma, from the model extra: pip install 'tinyrouter[model]'" \
        in err
    assert "Traceback" not in err and not (tmp_path / "experiments").exists()


def test_ctrl_c_is_an_interruption_not_a_traceback(monkeypatch, capsys):
    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(demo_times, "one_run", interrupted)
    assert main(["dev", "demo", "--repeats", "1", "--out", "-"]) == 130
    assert capsys.readouterr().err.strip().endswith("interrupted")


def test_no_command_prints_the_commands_and_is_a_usage_error(capsys):
    assert main([]) == 2
    out = capsys.readouterr().out
    assert "demo" in out and "`tinyrouter COMMAND --help` shows a command's options." in out
