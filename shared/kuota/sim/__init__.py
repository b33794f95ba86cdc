"""``kuota simulate``: scenario files folded through the real core on a virtual clock.

``kuota.sim.scenario`` reads manifests and their timing annotations,
``kuota.sim.engine`` runs them through a fold, ``kuota.sim.output`` renders
decisions as stable JSON lines. Pure: no clock, no randomness.
"""
