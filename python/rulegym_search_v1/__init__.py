"""verifiers taskset id ``rulegym-search-v1`` (verifiers imports the module of that name):
:class:`rulegym.verifiers.search.RulegymSearchTaskset`."""

from rulegym.verifiers.search import RulegymSearchTaskset

__all__ = ["RulegymSearchTaskset"]
