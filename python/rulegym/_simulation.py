"""What the tool-use adapters share: the simulation settings they pass on to
:class:`rulegym.ToolEnv`, and one rubric engine per process."""

from typing import Any, Dict, Optional

from rulegym import _rulegym

_SCORER = None


def shared_scorer() -> "_rulegym.RubricScorer":
    """One rubric engine per process (start-up ~0.2-0.5 s), shared by every adapter's ToolEnv."""
    global _SCORER
    if _SCORER is None:
        _SCORER = _rulegym.RubricScorer()
    return _SCORER


def simulation_dict(simulation: Any) -> Optional[Dict[str, Any]]:
    """A :class:`rulegym.Simulation` config as a plain dict (verl and SkyRL hand their configs
    over as omegaconf containers, which ``json.dumps`` cannot encode); ``None`` stays ``None``."""
    if simulation is None:
        return None
    if hasattr(simulation, "items"):
        return {str(k): v for k, v in simulation.items()}
    raise TypeError(
        f"simulation must be a mapping of rulegym.Simulation settings, got {type(simulation).__name__}"
    )
