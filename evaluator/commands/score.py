"""`tinyrouter score`: what a head would score, and whether it would take the crown."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluator import isolation
from evaluator.commands.output import write_json_out
from evaluator.errors import UsageError
from evaluator.rules import OFFICIAL
from evaluator.train.pack import SCORE_FILE


def add_score(p: argparse.ArgumentParser) -> None:
    p.description = ("Score a head the way the evaluator would, on public rows you collected: a "
                     "training run's held-out rows (with the rows it fitted for the fit gap), or "
                     "any --data rows for a submission folder or weights file. With --king, the "
                     "king on main is scored on the same rows, paired, and the crown rule is "
                     "applied. Live accuracy is measured only with --live N (real, metered calls).")
    p.add_argument("head", metavar="RUN_DIR_OR_SUBMISSION",
                   help="experiments/<run>, submissions/<login>/<n>, a weights file, or king")
    p.add_argument("--data", type=Path, help="collected rows (default: the run's --data)")
    p.add_argument("--king", action="store_true",
                   help="also score the king (its folder on main) on the same rows, paired")
    p.add_argument("--repo", type=Path, default=Path("."),
                   help="checkout of the competition's main branch (for --king)")
    p.add_argument("--encoder", help="hub id or local folder (default: the run's, else "
                   f"{OFFICIAL.encoder_id} or the --competition file's)")
    p.add_argument("--live", type=int, default=0, metavar="N",
                   help="also play N held-out questions per benchmark through the pool "
                        "(ledgered in the run folder; costs money against OpenRouter)")
    p.add_argument("--pool-url", help="with --live: the pool's base URL")
    p.add_argument("--json", dest="json_out", metavar="OUT",
                   help="also write the report as JSON (- for standard output)")
    isolation.add_flag(p)
    p.set_defaults(func=run)


PARSERS = {"score": add_score}


def rows_for(args: argparse.Namespace, head: Any, rules: Any) -> tuple[dict, dict | None, str]:
    """(held-out rows, fitted rows or None, the data folder) per benchmark."""
    from evaluator.preview import by_benchmark
    from evaluator.train.data import data_path, read_training_rows, rows_with_ids
    from evaluator.train.run import read_holdout, read_run

    if head.run_dir is not None:
        summary, _ = read_run(head.run_dir)
        data = args.data or Path(summary.get("data") or "data")
        held_ids = read_holdout(head.run_dir)
        held = rows_with_ids(data, held_ids, rules)
        taken = {i for ids in held_ids.values() for i in ids}
        fitted = [row for bench in held_ids
                  for row in read_training_rows(data_path(data, bench), rules)
                  if row.item.id not in taken]
        return by_benchmark(held, rules), by_benchmark(fitted, rules), str(data)
    if args.data is None:
        raise UsageError("a submission folder or weights file keeps no held-out rows: name the "
                         "rows to score it on with --data (rows it never trained on, if you can)")
    rows = [row for bench in rules.benchmarks if data_path(args.data, bench).is_file()
            for row in read_training_rows(data_path(args.data, bench), rules)]
    if not rows:
        raise UsageError(f"{args.data} holds no <benchmark>.jsonl rows; run `tinyrouter collect`")
    return by_benchmark(rows, rules), None, str(args.data)


def neither_trained_on(held: dict, theirs: Any, rules: Any) -> tuple[dict | None, dict | None]:
    """(the held-out rows that the other head's receipt also declares held out, on every
    benchmark, or None; its declared ids or None)."""
    from evaluator.heads import held_out_of

    declared = held_out_of(theirs, rules)
    if declared is None:
        return None, None
    named = {b: set(declared.get(b) or ()) for b in held}
    unseen = {b: [row for row in rows if row.item.id in named[b]] for b, rows in held.items()}
    return (unseen if all(unseen.values()) else None), declared


# which rows two heads are compared on: a code, and the sentence that renders it
NEITHER, HELD_OUT, DATA = "neither", "held_out", "data"
ROWS_SAID = {
    NEITHER: "rows neither head trained on ({rows}): this run's held-out rows that {theirs}'s "
             "receipt also declares held out",
    HELD_OUT: "this run's held-out rows ({rows}), which {theirs} may have trained on",
    DATA: "the rows of {data} ({rows}), which either head may have trained on",
}


@dataclass(frozen=True)
class Compared:
    """The rows a head is scored on, and the rows it is compared with another head on."""

    held: dict  # per benchmark: the rows the head is scored on
    fitted: dict | None  # the rows a run fitted (for the fit gap), else None
    data: str
    paired: dict  # per benchmark: the rows both heads are compared on
    which: str  # NEITHER, HELD_OUT or DATA
    declared: dict | None = None  # the other head's declared held-out ids, if any

    def said(self, theirs: str) -> str:
        rows = ", ".join(f"{b} {len(r)}" for b, r in self.paired.items())
        return ROWS_SAID[self.which].format(rows=rows, theirs=theirs, data=self.data)


def compared_rows(args: argparse.Namespace, yours: Any, theirs: Any | None,
                  rules: Any) -> Compared:
    """One choice of rows for `score --king` and `diff`: a run's held-out rows, narrowed to
    those the other head's receipt also declares held out where it declares them on every
    benchmark; a folder or weights file's --data rows."""
    held, fitted, data = rows_for(args, yours, rules)
    unseen, declared = neither_trained_on(held, theirs, rules) if theirs else (None, None)
    if yours.run_dir is None:
        return Compared(held, fitted, data, held, DATA, declared)
    if unseen is not None:
        return Compared(held, fitted, data, unseen, NEITHER, declared)
    return Compared(held, fitted, data, held, HELD_OUT, declared)


def run(args: argparse.Namespace) -> int:
    from evaluator.coordinator.router import load_router
    from evaluator.heads import resolve_head
    from evaluator.preview import score_report
    from evaluator.train.run import read_run

    rules = args.rules
    if args.live < 0:
        raise UsageError("--live must be 0 or more")
    head = resolve_head(args.head, args.repo, rules)
    king = resolve_head("king", args.repo, rules) if args.king else None
    rows = compared_rows(args, head, king, rules)
    held, fitted, data = rows.held, rows.fitted, rows.data
    encoder = args.encoder or (read_run(head.run_dir)[0].get("encoder") if head.run_dir
                               else None) or rules.encoder_id
    run_live = None
    if args.live:
        from evaluator.pool.ledger import Ledger
        from evaluator.pool.runner import pool_runner
        from evaluator.train.data import LEDGER_FILE

        ledger_dir = head.run_dir or Path(data)
        run_live = pool_runner(args.pool_url, rules, ledger=Ledger(ledger_dir / LEDGER_FILE))
    router = load_router(encoder, rules)
    report = score_report(head, held, fitted, router, rules, king, run_live, args.live,
                          rows.paired if rows.which == NEITHER else None)
    report["king_declares_held_out"] = rows.declared is not None
    if king is not None:
        report["king"]["rows"] = {"which": rows.which, "said": rows.said(king.label)}
    report["data"] = data
    report["run_dir"] = None if head.run_dir is None else str(head.run_dir)
    print("\n".join(lines(report, rules)))
    if king is not None:
        print("\n".join(behaviour_against_king(args, head, data, router, report)))
    if head.run_dir is not None:
        write_json_out(head.run_dir / SCORE_FILE, report)
    write_json_out(args.json_out, report)
    return 0


def behaviour_against_king(args: argparse.Namespace, head: Any, data: str, router: Any,
                           report: dict[str, Any]) -> list[str]:
    """The evaluation's behavioural check against the king, as preflight runs it (earlier
    attempts wait for preflight: they are compared only with another miner's head)."""
    from evaluator.commands.gates import behaviour_lines
    from evaluator.contenders import Contender
    from evaluator.preflight import preview_behaviour

    preview = preview_behaviour(args.repo, Contender("", 0, head.theta), args.rules, Path(data),
                                router=router)
    report["behaviour"] = {"passed": preview.passed, "reason": preview.reason,
                           "not_run": preview.not_run}
    return [*behaviour_lines(preview, args.rules),
            "  earlier attempts of other miners: `tinyrouter preflight` compares them once the "
            "head is packed under your login"]


def _ci(pair: list[float]) -> str:
    return f"[{pair[0]:.3f}, {pair[1]:.3f}]"


def lines(report: dict[str, Any], rules: Any) -> list[str]:
    out = [f"{report['head']} on the rows of {report['data']} (weights "
           f"{report['weights_sha256'][:12]}…)"]
    for bench, r in report["per_benchmark"].items():
        text = (f"  {bench:<14} cached {r['cached_acc']:.3f} {_ci(r['cached_ci95'])} on "
                f"{r['rows']} rows, novelty {r['novelty']:.2f}")
        if "fit" in r:
            fit = r["fit"]
            line = ("over the reject line" if fit["over_reject_line"] else
                    "over the penalty line" if fit["over_penalty_line"] else "within the lines")
            text += (f"; fitted rows {fit['cached_acc']:.3f}, fit gap {fit['gap']:+.3f} "
                     f"({line} of {rules.overfit_penalty_gap}/{rules.overfit_reject_gap})")
        if "live" in r:
            live = r["live"]
            text += (f"; live {live['live_acc']:.2f} in {live['avg_turns']:.2f} turns on "
                     f"{live['questions']}, score {r['score']:.4f}")
        out.append(text)
        if "simplest" in r:
            out.append(simplest_line(r["cached_acc"], r["simplest"]))
    if report["composite"] is not None:
        out.append(f"composite {report['composite']:.4f}")
    else:
        worth = rules.weight_cached + rules.weight_novelty
        out.append(f"cached part of the composite {report['cached_part']:.4f} (cached accuracy "
                   f"and novelty, worth {worth:.2f} of it); live accuracy and efficiency: not "
                   "measured (--live N)")
    for advisory in report["advisories"]:
        out.append(f"advisory [{advisory['id']}]: {advisory['message']}; {advisory['fix']}")
    king = report.get("king")
    if king:
        part = "" if king["live_included"] else " (cached part only)"
        low, high = king["ci95"]
        verdict = "WOULD take the crown" if king["would_crown"] else "would not take the crown"
        out += [f"yours − {king['head']}{part}: {king['delta']:+.4f} in composite points "
                f"(positive: yours is better), 95% interval {low:+.4f} to {high:+.4f}, "
                f"z {king['z']:.2f}; {verdict} (margin {rules.win_margin}, z above "
                f"{rules.crown_z_final} as after the last live stage)",
                f"  compared on {king['rows']['said']}"
                + (", so the delta leans neither way" if king["unseen_rows"] else ""),
                f"  picks the king's model on {king['agreement']:.1%} of these rows"]
        out += [] if king["unseen_rows"] else bias_lines(king, rules) + kings_rows_hint(report)
    return out


def _share(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def simplest_line(cached: float, found: dict[str, Any]) -> str:
    """The head beside the simplest routers learnt on the run's fitted rows (preview.simplest)."""
    best, captured = found["best_single"], found["captured"]
    return (f"  {'':<14} beside: best single {best['model']} {best['accuracy']:.3f}, category "
            f"lookup {found['lookup']:.3f} (each category's best model on the fitted rows), "
            f"oracle {found['oracle']:.3f}; of the best-single → oracle gap the head closes "
            f"{_share(captured['head'])}, the lookup {_share(captured['lookup'])}"
            + ("" if cached >= found["lookup"] else
               " — the head routes worse than the lookup"))


def kings_rows_hint(report: dict[str, Any]) -> list[str]:
    if not report.get("king_declares_held_out") or not report.get("run_dir"):
        return []
    return ["  the king's receipt names the rows it never trained on: train again with "
            "--holdout-king (and --repo) to hold them out too, and this comparison is made on "
            "rows neither head has seen"]


def bias_lines(king: dict[str, Any], rules: Any) -> list[str]:
    """Why the preview leans toward the king, and by about how much (score.king_bias)."""
    fitted = (f"the king most likely trained on about {1 - rules.train_holdout:.0%} of these rows "
              f"(the public train split less the default --holdout {rules.train_holdout}), "
              "and a head scores higher on rows it fitted")
    if king["king_bias"] is None:
        return [f"  bias: this head may have seen these rows, and {fitted}: neither side is "
                "measured on unseen rows, so read the delta as a rough guide"]
    corrected = king["delta"] + king["king_bias"]
    verdict = "WOULD" if king["would_crown_unbiased"] else "would not"
    return [f"  bias: these rows are unseen by this head, but {fitted}: with this run's fit "
            f"gap standing in for the king's, the delta leans toward the king by about "
            f"{king['king_bias']:.4f}; corrected, {corrected:+.4f}, which {verdict} take the "
            "crown (the evaluator scores both on hidden rows neither has seen)"]
