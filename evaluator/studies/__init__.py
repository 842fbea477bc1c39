"""Studies of the product, not the product: timing benchmarks and the evidence behind rules.

`tinyrouter dev STUDY` runs them: `coordinator` (full forwards against the frozen-prefix
cache), `serving` (the routing overhead of served requests), `startup` (the light commands'
start-up), `sandbox` (the code sandbox per program), `scale` (gates, apply, validate and the
site build against a season's size), `training` (train on the demo corpus, score the held-out
split), `agreement` (how alike independent heads
route: the duplicate thresholds), `words` (how close the start comes to the category lookup
on the encoder's features and on an exact bag of the words), `demo` (the demo's stage
times, which the Reference guide renders) and `costs` (the encoder's time per item and per
training candidate, which the Submitting and Maintaining guides' costs are derived from). Nothing outside
this package and the `dev` command imports it (tests/test_structure.py), so what they time stays what ships.
"""
