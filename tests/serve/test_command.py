"""`tinyrouter serve` from the command line: what it refuses before loading anything, and the
demo's printed way to serve its king, run as printed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kings import crown

from evaluator.cli import main


@pytest.fixture
def rules_file(tiny_path, tmp_path) -> Path:
    from evaluator.coordinator.encoder import encoder_overrides

    path = tmp_path / "competition.json"
    path.write_text(json.dumps(encoder_overrides(tiny_path)))
    return path


@pytest.mark.parametrize(("argv", "env", "code", "says"), [
    (["--host", "0.0.0.0"], {}, 2, "set TINYROUTER_SERVE_TOKEN"),
    (["--host", "0.0.0.0"], {"TINYROUTER_SERVE_TOKEN": "short"}, 2, "at least 24"),
    (["--timeout", "0"], {}, 2, "request_timeout"),
])
def test_what_cannot_be_served_is_refused_before_anything_loads(
        king_repo, rules_file, monkeypatch, capsys, argv, env, code, says):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(["--competition", str(rules_file), "serve", "--king", str(king_repo),
                 *argv]) == code
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err


def test_a_king_whose_weights_the_board_never_recorded_is_refused(king_repo, rules_file, capsys):
    weights = next((king_repo / "submissions").rglob("weights.safetensors"))
    weights.write_bytes(weights.read_bytes()[:-4] + b"\0\0\0\0")
    assert main(["--competition", str(rules_file), "serve", "--king", str(king_repo)]) == 1
    assert "not the crowned weights" in capsys.readouterr().err


@pytest.mark.slow
def test_the_demo_prints_a_serve_command_that_serves_its_king(
        tmp_path, tiny_path, tiny_rules, king_weights, make_receipt_fields):
    """The demo's workspace pieces (its rules, a crowned king, the practise script) built
    directly; the printed line run in a shell, with a free port in place of the default."""
    import openai

    from evaluator.benchmarks.corpus import load_corpus
    from evaluator.commands.demo import Workspace, footer, leave_practise
    from evaluator.coordinator.encoder import encoder_overrides

    ws = Workspace(tmp_path / "demo")
    (ws.repo / "leaderboard").mkdir(parents=True)
    ws.competition.write_text(json.dumps(encoder_overrides(tiny_path)))
    crown(ws.repo, tiny_rules, king_weights, make_receipt_fields)
    leave_practise(ws)
    line = next(text for text in footer(ws, 0.0) if "tinyrouter serve" in text)
    command = line.split(": ", 1)[1]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "TINYROUTER_PRIVATE_DIR": str(tmp_path / "private")}
    shell = subprocess.Popen(["bash", "-c", f"{command} --port 0"], env=env, cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
    try:
        url = served_url(shell)
        question = load_corpus(tiny_rules, ["mmlu"])[0].item.prompt
        reply = openai.OpenAI(base_url=url, api_key="-", max_retries=0).chat.completions.create(
            model="tinyrouter/alice-1", messages=[{"role": "user", "content": question}])
        assert reply.choices[0].message.content and reply.usage.model_extra["cost"] > 0
    finally:
        os.killpg(shell.pid, signal.SIGTERM)  # the shell, the server and the simulator
        shell.wait(10)
    assert (tmp_path / "private" / "serve-ledger.jsonl").stat().st_size > 0


def served_url(shell: subprocess.Popen, seconds: float = 120.0) -> str:
    """The address the server prints once it listens (loading the encoder takes seconds)."""
    deadline, seen = time.monotonic() + seconds, []
    while time.monotonic() < deadline:
        text = shell.stdout.readline()
        if not text and shell.poll() is not None:
            break
        seen.append(text)
        if text.startswith("serving "):
            return text.split(" on ", 1)[1].split()[0]
    raise AssertionError("the server never said where it listens:\n" + "".join(seen))
