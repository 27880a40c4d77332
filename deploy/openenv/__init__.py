"""Client of rulegym's OpenEnv search environment (`rulegym openenv`)."""

from .client import RulegymSearchEnv

__all__ = ["RulegymSearchEnv"]
