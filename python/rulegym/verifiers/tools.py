"""The search environment's tool server for verifiers (``python -m rulegym.verifiers.tools``, one
process per evaluation, started by verifiers): ``search``, ``get_article`` and ``answer`` over the
rollout's index (each index loaded once), with the environment's turn cap. The rollout's question
and the answer given live in its :class:`SearchState`, which verifiers syncs with the host."""

from typing import Dict, Optional

import verifiers.v1 as vf

from rulegym import _rulegym

#: What a tool says once the episode is over (an answer was given, or the turn cap reached).
EPISODE_OVER = "The episode is over (an answer was given, or the turn limit is reached)."


class SearchState(vf.State):
    """One rollout's episode: set by the task before the agent runs, updated by the tools."""

    index_path: str = ""
    top_k: int = 3
    max_turns: int = 10
    turns: int = 0
    answer: Optional[str] = None


class SearchToolset(vf.Toolset[vf.SharedToolsetConfig, SearchState]):
    """rulegym's search tools, shared by every rollout of an evaluation."""

    TOOL_PREFIX = None

    async def setup(self) -> None:
        self._indexes: Dict[str, "_rulegym.Index"] = {}

    def _index(self) -> "_rulegym.Index":
        path = self.state.index_path
        if not path:
            raise ValueError("the rollout has no index (the task sets it before the agent runs)")
        if path not in self._indexes:
            self._indexes[path] = _rulegym.Index(path)
        return self._indexes[path]

    def _turn(self) -> bool:
        """Counts one call against the turn cap; False once the episode is over."""
        s = self.state
        if s.answer is not None or s.turns >= s.max_turns:
            return False
        s.turns += 1
        return True

    @vf.tool
    async def search(self, query: str) -> str:
        """Searches the encyclopedia for passages about a query (such as a person's name and a
        relation); returns the best-matching passages, each with its article title."""
        if not self._turn():
            return EPISODE_OVER
        # The search environment's own step: the same passages and rendering as every protocol.
        env = _rulegym.SearchEnv(self._index(), "", ["-"], None,
                                 {"top_k": self.state.top_k, "max_turns": 2})
        env.reset()
        out = env.step(f"<search>{query}</search>")
        text = "".join(m["content"] for m in out["observations"]).strip()
        return text.removeprefix("<information>").removesuffix("</information>").strip()

    @vf.tool
    async def get_article(self, title: str) -> str:
        """Reads the whole article with this title (a person's full name)."""
        if not self._turn():
            return EPISODE_OVER
        doc = self._index().article(title)
        return doc["contents"] if doc is not None else f"No article is titled {title!r}."

    @vf.tool
    async def answer(self, answer: str) -> str:
        """Gives the final answer (several answers separated by commas) and ends the episode."""
        if not self._turn():
            return EPISODE_OVER
        self.state.answer = answer
        return "Answer recorded."


if __name__ == "__main__":
    SearchToolset.run()
