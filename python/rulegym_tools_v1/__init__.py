"""verifiers taskset id ``rulegym-tools-v1`` (verifiers imports the module of that name):
:class:`rulegym.verifiers.tooluse.RulegymToolsTaskset`."""

from rulegym.verifiers.tooluse import RulegymToolsTaskset

__all__ = ["RulegymToolsTaskset"]
