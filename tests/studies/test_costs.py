import json

from evaluator.cli import main
from evaluator.studies import costs


def figures(device):
    return {"device": device, "dtype": "torch.float32", "threads": 2, "cores": 2, "load": 1.0,
            "tokens": 256, "questions": 8, "candidates": 4, "repeats": 3, "forward_s": 0.5,
            "prefix_s": 0.4, "tail_s": 0.05, "measured_at": "2026-12-07T12:00:00Z"}


def test_each_device_measured_is_kept_beside_the_others(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(costs, "measure", lambda device, *a: figures(device))
    out = tmp_path / "costs.json"
    for device in ("cpu", "cuda"):
        assert main(["dev", "costs", "--device", device, "--out", str(out)]) == 0
    assert set(json.loads(out.read_text())["devices"]) == {"cpu", "cuda"}
    assert "a training tail 0.0500 s per item" in capsys.readouterr().out
