"""`tinyrouter train`: one routing head for the chosen benchmarks, by separable CMA-ES."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from evaluator.errors import UsageError
from evaluator.rules import OFFICIAL, TRAIN_STARTS, Competition

TRAINING_OPTIONS = ("generations", "popsize", "sigma0", "minibatch", "scales_step", "shrink",
                    "select")


def add_train(p: argparse.ArgumentParser) -> None:
    p.add_argument("--benchmarks", required=True, help="comma-separated, e.g. "
                   "math500,mmlu,livecodebench")
    p.add_argument("--run-name", required=True, help="the run's folder under --experiments")
    p.add_argument("--data", type=Path, default=Path("data"),
                   help="training data from `tinyrouter collect`")
    p.add_argument("--encoder", help=f"hub id or local directory (default: {OFFICIAL.encoder_id}, or the "
                        "--competition file's)")
    p.add_argument("--experiments", type=Path, default=Path("experiments"),
                   help="where runs live")
    p.add_argument("--generations", type=int,
                   help=f"generations to reach (default: {OFFICIAL.train_generations})")
    p.add_argument("--popsize", type=int, help=f"population (default 4 + ⌊3 ln n⌋ for n numbers in θ: "
                   f"{OFFICIAL.train_popsize} for the official head)")
    p.add_argument("--sigma0", type=float, help=f"initial step size (default: {OFFICIAL.train_sigma0})")
    p.add_argument("--minibatch", type=int, help="items per generation, shared by the "
                   f"population and split evenly across benchmarks (default: {OFFICIAL.train_minibatch})")
    p.add_argument("--scales-step", type=float, help="the SVF scales' initial step as a "
                   f"multiple of σ0 (default: {OFFICIAL.train_scales_step})")
    p.add_argument("--shrink", type=float, help="weight, 0 to 1, of the model's rate on the "
                   "question's category in each answer's correctness; 0 scores each cached answer "
                   f"alone (default: {OFFICIAL.train_shrink})")
    p.add_argument("--role-rows", type=int, metavar="N",
                   help="training rows the role fit reads after the search: the head learns to "
                        "answer as the Worker on turn 1 and judge as the Verifier on turn 2, from "
                        "the collected answers, no call made; each row's turn-2 transcript is "
                        f"encoded once (default: {OFFICIAL.train_role_rows}; 0 leaves the role "
                        "rows as the search left them)")
    p.add_argument("--holdout", type=float, help="share of each benchmark's rows kept out of "
                   f"training, for `tinyrouter score` (default: {OFFICIAL.train_holdout}; 0 keeps none)")
    p.add_argument("--select", type=float, help="share of each benchmark's training rows the "
                   "search never reads: the start and every generation's head are scored on "
                   "them, and a head replaces the kept one only when it leads there beyond "
                   "chance, so a search that only fits noise gives back its start (default: "
                   f"{OFFICIAL.train_select}; 0 keeps the last generation)")
    p.add_argument("--start", choices=TRAIN_STARTS, default=TRAIN_STARTS[0],
                   help="without --init, where the search starts: fit (the model rows fitted "
                        "to each row's category's best model, the category lookup, in a "
                        "second's convex fit), rows (fitted to each row's own best model "
                        "under --shrink) or zero (W = 0, uniform routing)")
    p.add_argument("--init", metavar="HEAD", help="start from this head instead: a run "
                   "folder, a submission folder, a weights file, or `king` (the king on main)")
    p.add_argument("--repo", type=Path, default=Path("."),
                   help="with --init king: the checkout of the competition's main branch")
    p.add_argument("--holdout-king", action="store_true",
                   help="also hold out the rows the king's receipt says it never trained on "
                        "(with --repo), so that `score --king` compares the two heads on rows "
                        "neither has seen")
    p.add_argument("--seed", type=int,
                   help="the run's seed (default: drawn at random, printed and recorded, so two "
                        "miners' default runs differ; --resume reads the run's own)")
    p.add_argument("--live", action="store_true",
                   help="add multi-turn fitness through the pool (ledgered, costs money)")
    p.add_argument("--live-items", type=int, default=2,
                   help="with --live: questions per benchmark and generation")
    p.add_argument("--pool-url", help="with --live: the pool's base URL (default OpenRouter, "
                   "or $OPENROUTER_BASE_URL)")
    p.add_argument("--resume", action="store_true", help="continue the run from its checkpoint")
    p.add_argument("--threads", type=int, help="CPU threads for torch (default: torch's "
                   "choice; 1 is often fastest for a tiny encoder on a busy CPU)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--progress-every", type=int, metavar="N",
                   help="instead of a bar, print a line every N generations (for logs)")
    p.set_defaults(func=run)


PARSERS = {"train": add_train}


def kings_held_out(repo: Path, rules: Competition) -> dict[str, list[str]]:
    """The ids the king's receipt declares held out; a UsageError when it declares none."""
    from evaluator.heads import held_out_of, resolve_head

    king = resolve_head("king", repo, rules)
    ids = held_out_of(king, rules)
    if not ids:
        raise UsageError(f"the king ({king.label}) declares no held-out rows in its receipt "
                         "(it was packed before receipts carried them, or trained with "
                         "--holdout 0): train without --holdout-king, and read `score --king` "
                         "with the bias it prints")
    return ids


def run(args: argparse.Namespace) -> int:
    # the trainer and torch load only when training runs, so --help works on the core install;
    # both are imported before any data is read, so a core install hears which extra it lacks first
    import cma  # noqa: F401
    import torch
    from tqdm import tqdm

    from evaluator.errors import TrainingError
    from evaluator.heads import resolve_head
    from evaluator.train.data import (
        LEDGER_FILE,
        check_kings_held_out,
        load_training_set,
        split_holdout,
    )
    from evaluator.train.fitness import encoder_featurizer
    from evaluator.train.live import pool_live_fitness
    from evaluator.train.roles import fit_rows, turn2_transcripts
    from evaluator.train.run import RoleData, TrainConfig, run_training

    rules = args.rules
    start = resolve_head(args.init, args.repo, rules) if args.init else None
    seed = run_seed(args)
    config = TrainConfig.resolve(
        rules, tuple(b for b in args.benchmarks.split(",") if b), seed=seed,
        encoder=local_or_id(args.encoder or rules.encoder_id), data=str(args.data.resolve()),
        live=args.live,
        live_items=args.live_items if args.live else 0,
        holdout=rules.train_holdout if args.holdout is None else args.holdout,
        init=start.weights_sha256 if start else "", start=args.start,
        role_rows=rules.train_role_rows if args.role_rows is None else args.role_rows,
        **{name: getattr(args, name) for name in TRAINING_OPTIONS})
    if args.threads:
        torch.set_num_threads(args.threads)
    data = load_training_set(args.data, config.benchmarks, rules)
    kings = kings_held_out(args.repo, rules) if args.holdout_king else None
    if kings is not None and config.holdout == 0:
        raise UsageError("--holdout-king adds to the held-out share; --holdout 0 keeps none")
    if kings is not None:
        check_kings_held_out(data, kings)
    heldout = None
    if config.holdout > 0:
        data, heldout = split_holdout(data, config.holdout, config.seed, rules, kings)
    run_dir = args.experiments / args.run_name
    from evaluator.coordinator.router import load_router

    # one encoder for the turn-1 and turn-2 featurizers and the live loop
    router, live, roles = load_router(config.encoder, rules), None, None
    if config.live:
        live = pool_live_fitness(data, router, args.pool_url, run_dir / LEDGER_FILE, rules,
                                 config.seed, config.live_items)
    featurizer = encoder_featurizer(router.encoder, data, rules)
    if config.role_rows:
        rows = fit_rows(data, config.role_rows, config.seed)
        turn2 = turn2_transcripts(data, rows, config.seed, rules)
        roles = RoleData(rows, encoder_featurizer(router.encoder, data, rules, turn2))
    if args.progress_every is not None and args.progress_every < 1:
        raise TrainingError("--progress-every must be at least 1")
    bar = tqdm(total=config.generations, desc=args.run_name, unit="gen",
               disable=args.no_progress or args.progress_every is not None)

    def progress(entry: dict) -> None:
        done = entry["generation"] + 1
        bar.n = done
        bar.set_postfix(best=f"{entry['best']:.4f}", mean=f"{entry['mean']:.4f}")
        if args.progress_every and (done % args.progress_every == 0
                                    or done == config.generations):
            print(f"  {args.run_name}: generation {done}/{config.generations}, best fitness "
                  f"{entry['best']:.4f}, mean {entry['mean']:.4f} ({entry['seconds']:.0f} s)",
                  flush=True)

    try:
        summary = run_training(run_dir, config, data, featurizer, rules, resume=args.resume,
                               ledger_source=args.data / LEDGER_FILE, on_generation=progress,
                               live=live, heldout=heldout,
                               start=None if start is None else start.theta, roles=roles)
    finally:
        bar.close()
    print(f"{run_dir}: {summary['optimizer']['generations']} generations, "
          f"best fitness {summary['best_fitness']:.4f}")
    if start is not None:
        print(f"  started from {start.label} (weights {start.weights_sha256[:12]}…)")
    print(f"  {kept_line(summary['selection'], summary['optimizer']['generations'])}")
    if summary["selection"]["rows"] and summary["selection"]["kept_after"] == 0 and start is None:
        print("  the start imitates the category lookup, which any miner's default run on the "
              "public train split converges on: the duplicate checks let such heads through "
              "(their routing per category is no one's own), but one that only matches the "
              "lookup will not take the crown from one that does; improve on it to compete, "
              "and preflight it before you spend a slot")
    for name, t in summary["train"].items():
        held = len(heldout[name]) if heldout else 0
        print(f"  {name:<14} train argmax accuracy {t['argmax_acc']:.4f} "
              f"(expected {t['expected_acc']:.4f}, {t['items']} items; {held} held out)")
        if "roles" in t:
            print(f"  {'':<14} roles fitted on {t['roles']['rows']} rows: Worker on turn 1 for "
                  f"{t['roles']['turn1_worker']:.0%}, Verifier on turn 2 for "
                  f"{t['roles']['turn2_verifier']:.0%}")
    if start is not None:
        warn_if_close(run_dir, start, featurizer, data, rules)
    from evaluator.cli import invocation

    quote = shlex.quote
    repo = "" if args.repo == Path(".") else f" --repo {quote(str(args.repo))}"
    print(f"next: {invocation(args)} score {quote(str(run_dir))} --data {quote(str(args.data))}"
          + (f" --king{repo}" if start is not None or args.holdout_king else ""))
    print(f"      {invocation(args)} pack --run-dir {quote(str(run_dir))} "
          f"--miner-name <your GitHub login>{repo}")
    return 0


def kept_line(chosen: dict, generations: int) -> str:
    """Which head the run kept, and why."""
    if not chosen["rows"]:
        return f"kept the head after the last generation ({generations}): no rows set aside"
    rows = f"{chosen['rows']} rows set aside"
    if chosen["kept_after"] == 0:
        return (f"kept the start, fitted again on every training row: no generation led it "
                f"beyond chance on the {rows} (argmax accuracy {chosen['accuracy']:.4f})")
    start = ("" if chosen["start_accuracy"] is None
             else f"; the start {chosen['start_accuracy']:.4f}")
    return (f"kept the head after generation {chosen['kept_after']} of {generations}: it led "
            f"the head kept before it beyond chance on the {rows} (argmax accuracy "
            f"{chosen['accuracy']:.4f}{start})")


def run_seed(args: argparse.Namespace) -> int:
    """--seed, or the resumed run's own, or one drawn at random: two miners who follow the
    guide with the default options train from different holdouts and minibatches."""
    import secrets

    from evaluator.train.run import recorded_seed

    if args.seed is not None:
        return args.seed
    if args.resume:
        return recorded_seed(args.experiments / args.run_name)
    seed = secrets.randbelow(2 ** 31)
    print(f"seed {seed} (drawn for this run; --seed {seed} trains it again)")
    return seed


def local_or_id(encoder: str) -> str:
    """A local encoder folder as an absolute path (the run is read from other folders later),
    else the hub id as given."""
    path = Path(encoder)
    return str(path.resolve()) if path.is_dir() else encoder


def warn_if_close(run_dir: Path, start, featurizer, data, rules) -> None:
    """Say so when the trained head is still a duplicate of its start under the gates' rules
    (gate 3's cosine, and the behavioural check's own choices, here on the training rows)."""
    import numpy as np

    from evaluator.contenders import alike, behaviour_line
    from evaluator.coordinator import head as routing
    from evaluator.gates import fingerprint
    from evaluator.heads import resolve_head

    def models(head, scales):
        feats = featurizer.features(np.arange(len(data.rows)), scales)
        return [rules.pool_names[i]
                for i in routing.choices(routing.logits(feats, head, rules), rules)[0]]

    trained = resolve_head(str(run_dir), run_dir, rules)
    cosine = float(fingerprint(trained.head, rules.n_models) @ fingerprint(start.head,
                                                                          rules.n_models))
    found = alike("its start", [row.item for row in data.rows],
                  models(trained.head, trained.scales), models(start.head, start.scales))
    print(f"  against its start: model-row cosine {cosine:.4f} (gate 3 rejects at "
          f"{rules.duplicate_cosine}); on the training rows, {behaviour_line(found, rules)} "
          f"(the behavioural check rejects at {rules.duplicate_agreement:.0%} of the items "
          f"and {rules.duplicate_own_share:.0%} of at least {rules.duplicate_own_items} own "
          "choices)")
    if cosine >= rules.duplicate_cosine or found.copied(rules):
        print("  warning: this head is still a duplicate of the head it started from and "
              "would be rejected at gate 3; train longer, with a larger --sigma0, or from W = 0")
