"""Training a routing head: data from `collect`, the fitness, the CMA-ES run, live fitness.

Modules by job: `data` (training rows and the training set), `fitness` (expected cached
accuracy through the router's head), `run` (the optimiser, checkpoints, summary), `live`
(multi-turn fitness through the pool), `start` (the fitted start) and `roles` (the role rows).
The training benchmark is a study (`evaluator/studies`, `tinyrouter dev training`).
"""
