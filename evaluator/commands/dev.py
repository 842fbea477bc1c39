"""`tinyrouter dev STUDY`: the studies (evaluator/studies), apart from the product's commands."""

from __future__ import annotations

import argparse
import importlib

# name → (module in evaluator.studies, one line)
STUDIES = {
    "coordinator": ("coordinator", "time full forwards per θ against the frozen-prefix cache"),
    "serving": ("serving", "time the routing overhead of served requests (encoder and head, no "
                           "pool) at a few batch sizes"),
    "startup": ("startup", "time the light commands' start-up against importing numpy, httpx "
                           "and safetensors"),
    "sandbox": ("sandbox", "time the code sandbox per program and per test"),
    "scale": ("scale", "time gates, apply, validate and the site build on synthetic boards of "
                       "N records"),
    "training": ("training", "train on the demo corpus and score its held-out split"),
    "agreement": ("agreement", "how alike independent heads route, next to copies: the "
                               "behavioural duplicate threshold"),
    "grading": ("grading", "the graders' agreement with an independent grader's cases, and "
                           "grading time in process, in the bounded worker and per process"),
    "words": ("words", "how close the start comes to the category lookup on the encoder's "
                       "features and on an exact bag of the words"),
    "demo": ("demo_times", "time `tinyrouter demo` stage by stage (wall and CPU) and write the "
                           "figures the Reference guide renders"),
    "costs": ("costs", "time the encoder's work per item and per training candidate (Qwen3-0.6B's "
                       "shape) for the costs the guides derive"),
}


def add_dev(p: argparse.ArgumentParser) -> None:
    p.description = ("Studies of the product (benchmarks and evidence, not tests): each times "
                     "or measures something and prints it, medians over repeats and ratios "
                     "from the same run.")
    studies = p.add_subparsers(dest="study", metavar="STUDY", required=True)
    for name, (module, summary) in STUDIES.items():
        child = studies.add_parser(name, help=summary)
        importlib.import_module(f"evaluator.studies.{module}").PARSERS[name](child)


PARSERS = {"dev": add_dev}
