"""The leaderboard site: pages generated from `leaderboard/` at MkDocs build time."""

from evaluator.site.build import build_site
from evaluator.site.state import LeaderboardState, load_state

__all__ = ["LeaderboardState", "build_site", "load_state"]
