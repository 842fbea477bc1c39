"""`tinyrouter dev startup`: every light command runs, and ratios come against the floor."""

import json

from evaluator.cli import main


def test_every_light_command_starts_and_is_timed_against_the_floor(tmp_path, capsys):
    out = tmp_path / "startup.json"
    assert main(["dev", "startup", "--repeats", "1", "--json", str(out)]) == 0
    report = json.loads(out.read_text())["commands"]
    assert report["python -c 'import numpy, httpx, safetensors'"]["ratio"] == 1.0
    assert {"tinyrouter --help", "tinyrouter preflight", "tinyrouter gates",
            "tinyrouter leaderboard validate", "tinyrouter grade (math)"} <= set(report)
    assert all(row["median_s"] > 0 for row in report.values())
    assert "× floor" in capsys.readouterr().out


def test_repeats_must_be_positive(capsys):
    assert main(["dev", "startup", "--repeats", "0"]) == 2
