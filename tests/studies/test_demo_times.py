import json

import pytest

from evaluator.cli import main
from evaluator.studies import demo_times


def a_run(scale):
    return {"stages": [{"title": "seal", "wall_s": 10.0 * scale, "cpu_s": 8.0 * scale},
                       {"title": "train", "wall_s": 4.0 * scale, "cpu_s": 4.0}],
            "wall_s": 14.0 * scale, "cpu_s": 12.0 * scale, "load": [0.5, 1.25]}


def test_the_medians_keep_the_demos_stage_order_and_its_load():
    found = demo_times.medians([a_run(1), a_run(3), a_run(2)])
    assert [s["title"] for s in found["stages"]] == ["seal", "train"]
    assert found["stages"][0] == {"title": "seal", "wall_s": 20.0, "cpu_s": 16.0}
    assert found["total"] == {"wall_s": 28.0, "cpu_s": 24.0}
    assert found["load"] == [[0.5, 1.25]] * 3


def test_the_figures_go_where_the_reference_guide_reads_them(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(demo_times, "one_run", lambda: a_run(1))
    out = tmp_path / "times.json"
    assert main(["dev", "demo", "--repeats", "2", "--out", str(out)]) == 0
    written = json.loads(out.read_text())
    assert written["repeats"] == 2 and written["cores"] >= 1 and written["total"]["wall_s"] == 14
    assert "median over 2 run(s)" in capsys.readouterr().out


@pytest.mark.parametrize("repeats", ["0", "-1"])
def test_no_run_is_refused(repeats, capsys):
    assert main(["dev", "demo", "--repeats", repeats]) == 2


def test_one_run_times_each_stage_it_is_told_of(monkeypatch):
    """Each stage's CPU is what was spent between its start and its end, in the demo's order."""
    import time

    def demo(root, progress, done):
        assert not root.exists()  # a fresh workspace
        for number, (title, busy) in enumerate((("seal", 0.05), ("train", 0.15)), 1):
            progress(number, 2, title)
            started = time.perf_counter()
            end = time.process_time() + busy
            while time.process_time() < end:
                pass
            done(title, time.perf_counter() - started)

    monkeypatch.setattr("evaluator.commands.demo.run_demo", demo)
    found = demo_times.one_run()
    assert [s["title"] for s in found["stages"]] == ["seal", "train"]
    seal, train = found["stages"]
    assert 0.04 <= seal["cpu_s"] < train["cpu_s"] and train["cpu_s"] >= 0.14
    assert found["cpu_s"] >= seal["cpu_s"] + train["cpu_s"] and len(found["load"]) == 2
