"""``kuota simulate``: scenario files folded through the real core on a virtual clock.

``kuota.sim.scenario`` reads manifests and their timing annotations,
``kuota.sim.engine`` runs them through a fold (``kuota.sim.planning`` plays the
preemption service for ``--preemption plans``), ``kuota.sim.output`` renders
decisions as stable JSON lines and ``kuota.sim.report`` the summary for
people. Pure: no clock, no randomness (docs/design/simulate.md).
"""
