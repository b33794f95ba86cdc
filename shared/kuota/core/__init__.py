"""The pure decision core: one fold from journal events to Kueue's decisions.

It reads no clock, draws no random numbers and does no I/O (an import-linter
contract); time arrives in events. Subpackages, one part of the domain each:

- ``quota``: the cohort tree (quotas, usage, lending and borrowing limits) and
  Dominant Resource Share;
- ``assign``: flavor assignment, its fast path, node matching;
- ``queueing``: per-ClusterQueue queues, workload records, verdicts;
- ``dra``: the DRA inventory, CEL selectors, what one pod charges;
- ``preemption``: classical and fair-sharing victim search, plans, WaitForPodsReady;
- ``fold``: the Fold (``kuota.core.fold.fold.Fold``) that puts them to work.

``pickling`` makes the fold's classes copy and pickle alike, compiled or not.
"""
