"""Audit: re-fold the journal and check, explain and export what kuota decided.

Decisions are a pure function of the journal, so anyone holding it can
recompute them with the ``kuota.core.fold.fold.Fold`` the admission service
runs (docs/design/audit.md). The modules:

- :mod:`kuota.audit.replay`: fold, compare with the recorded decisions in
  order, stop at the first divergence (pure);
- :mod:`kuota.audit.explain`: one workload's history and why it waits (pure);
- :mod:`kuota.audit.files`: the JSON-lines export format and its readers;
- :mod:`kuota.audit.kafka`: the journal and decision topics, the admission
  group's committed offset and its Redis snapshot;
- :mod:`kuota.audit.render` (text for people) and :mod:`kuota.audit.status`
  (``kuota status`` from the actuator's Redis read model).
"""
