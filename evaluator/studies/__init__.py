"""Studies of the product, not the product: timing benchmarks and the evidence behind rules.

`tinyrouter dev STUDY` runs them: `coordinator` (full forwards against the frozen-prefix
cache), `startup` (the light commands' start-up), `sandbox` (the code sandbox per program),
`scale` (gates, apply, validate and the site build against a season's size), `training` (train
on the demo corpus, score the held-out split) and `agreement` (how alike independent heads
route: the behavioural duplicate threshold). Nothing outside this package and the `dev`
command imports it (tests/test_structure.py), so what they time stays what ships.
"""
