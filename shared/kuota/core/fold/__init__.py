"""The fold: its state, where pending workloads wait, scheduling cycles, and
the Fold itself (:mod:`kuota.core.fold.fold`)."""
