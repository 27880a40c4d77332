"""The simulation settings the adapters pass on to :class:`rulegym.ToolEnv`."""

from typing import Any, Dict, Optional


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
