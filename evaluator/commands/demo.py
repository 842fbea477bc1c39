"""`tinyrouter demo`: run the whole competition offline and print what happened."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from evaluator.demo import DEMO_PASSWORD, MINERS, Workspace, run_demo
from evaluator.leaderboard import State


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run the whole competition offline on this machine",
                       description="Build a tiny Qwen3, serve a simulated pool on 127.0.0.1, seal "
                                   "a demo hidden benchmark, train and pack two miners, run the "
                                   "gates, evaluate both, update the leaderboard and build the site.")
    p.add_argument("--workdir", type=Path, default=Path("demo"),
                   help="fresh workspace (default ./demo; an earlier demo there is replaced)")
    p.add_argument("--fast", action="store_true",
                   help="fewer training generations (CI)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    started = time.perf_counter()

    def progress(number: int, total: int, title: str) -> None:
        print(f"\n[{number}/{total}] {title} ({time.perf_counter() - started:.0f} s)", flush=True)

    print(f"TinyRouter demo in {args.workdir}/ — offline; the benchmark password is the demo's "
          f"own ({DEMO_PASSWORD!r}), never use it for a real competition.")
    ws = run_demo(args.workdir, fast=args.fast, progress=progress)
    print(summary(ws, time.perf_counter() - started))
    return 0


def _fmt(value: object) -> str:
    return f"{value:.4f}" if isinstance(value, float) else ("—" if value is None else str(value))


def summary(ws: Workspace, seconds: float) -> str:
    manifest = json.loads((ws.repo / "leaderboard" / "manifest.json").read_text(encoding="utf-8"))
    king = State(ws.repo).king()
    lines = ["", "=" * 78, "Results (public records, as the leaderboard shows them)", ""]
    lines.append(f"{'miner':<8} {'outcome':<9} {'composite':>9} {'king before':>11} {'delta':>8}")
    for miner in MINERS:
        r = ws.results[miner.login]
        lines.append(f"{miner.login:<8} {r['outcome']:<9} {_fmt(r['composite']):>9} "
                     f"{_fmt(r['king_composite']):>11} {_fmt(r['delta']):>8}")
    if king is None:
        lines += ["", "No king: no submission passed every check."]
        return "\n".join(lines + footer(ws, seconds))
    lines += ["", f"King: {king['miner']} (generation {king['generation']}), composite "
                  f"{king['composite']:.4f}. {why(ws)}", "",
              f"{'benchmark':<14} {'king cached':>11} {'live':>6} {'turns':>6} {'score':>7} "
              f"{'best single':>12} {'random':>7} {'oracle':>7}"]
    for bench, comp in king["per_benchmark"].items():
        base = manifest["benchmarks"][bench]["baselines"]
        lines.append(f"{bench:<14} {comp['cached_acc']:>11.3f} {comp['live_acc']:>6.3f} "
                     f"{comp['avg_turns']:>6.2f} {comp['score']:>7.4f} "
                     f"{base['best_single']['accuracy']:>12.3f} {base['random']:>7.3f} "
                     f"{base['oracle']:>7.3f}")
    return "\n".join(lines + footer(ws, seconds))


def footer(ws: Workspace, seconds: float) -> list[str]:
    return ["", f"Finished in {seconds:.0f} s. Workspace: {ws.root}",
            f"  leaderboard state: {ws.repo / 'leaderboard'}",
            f"  private records (keep off the public repository): {ws.private}",
            f"Site: {ws.site / 'index.html'}",
            f"  serve it: python -m http.server 8000 --bind 127.0.0.1 --directory {ws.site}",
            "  then open http://127.0.0.1:8000/"]


def why(ws: Workspace) -> str:
    first, second = (ws.results[m.login] for m in MINERS)
    if first["outcome"] != "king":
        return (f"{MINERS[0].login} was rejected: {first.get('reason')}; {MINERS[1].login} "
                f"was crowned, the first to pass every check.")
    if second["outcome"] == "king":
        return (f"{MINERS[1].login} beat the king by {second['delta']:+.4f}, at least the "
                f"margin of {ws.rules.win_margin}.")
    if second["outcome"] == "lost":
        return (f"{MINERS[0].login} was crowned first; {MINERS[1].login}'s delta of "
                f"{second['delta']:+.4f} is short of the margin of {ws.rules.win_margin}.")
    return (f"{MINERS[0].login} was crowned first; {MINERS[1].login} was rejected: "
            f"{second.get('reason')}.")
