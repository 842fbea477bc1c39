"""`tinyrouter serve`: a head behind OpenAI's chat-completions API, playing the evaluator's loop.

Every request is one session of `loop.run_sessions`, the function the evaluator's live play
runs: the head picks model and role each turn on the same transcript, against the pool.
"""

from evaluator.serve.allowance import ServeLimits
from evaluator.serve.endpoint import ChatServer
from evaluator.serve.served import ServedHead, head_at, king_of

__all__ = ["ChatServer", "ServeLimits", "ServedHead", "head_at", "king_of"]
