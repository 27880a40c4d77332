"""verifiers v1 tasksets (Prime Intellect's ``verifiers`` 0.4: ``vf.Taskset``, ``vf.Toolset``,
``@vf.reward``) over rulegym's environments. Needs ``pip install verifiers``.

* ``rulegym-search-v1`` (module :mod:`rulegym_search_v1`, or :mod:`rulegym.verifiers.search`):
  one task per question of a dataset (``rulegym generate``), or an endless stream of fresh
  universes (``infinite=true``); tools ``search``, ``get_article`` and ``answer`` from one shared
  tool server that loads each index once; the reward is rulegym's exact set F1 of the answer.

Load it with verifiers' own loader::

    import verifiers.v1 as vf
    env = vf.load_environment(vf.resolve_env_config({
        "taskset": {"id": "rulegym-search-v1", "dataset": "data/"},
        "agent": {"runtime": {"type": "subprocess"}, "harness": {"id": "null"}}}))

or from the command line: ``vf-eval rulegym-search-v1 --env.taskset.dataset data/ ...``.
"""
