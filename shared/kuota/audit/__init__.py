"""Audit: re-fold the journal and check, explain and export what kuota decided.

Theory of operation (``docs/design/audit.md``): decisions are a pure function
of the journal (``kuota.core.fold.fold.Fold``), so anyone holding the journal can
recompute them. This package does that with the same ``Fold`` the admission
service runs:

- :mod:`kuota.audit.replay` — the auditor: fold journal records, compare the
  decisions it computes with the recorded ones, in order, and stop at the
  first divergence (pure; fed by any source);
- :mod:`kuota.audit.explain` — one workload's history: its decisions, the
  quota state of its ClusterQueue at each, and, while it waits, why and where
  (pure);
- :mod:`kuota.audit.files` — the JSON-lines export format (``kuota journal
  export``) and its readers, for offline audits without Kafka;
- :mod:`kuota.audit.kafka` — reading the journal and decision topics, the
  admission group's committed offset and its Redis snapshot;
- :mod:`kuota.audit.render` — rich text for people (``--json`` is for scripts);
- :mod:`kuota.audit.status` — ``kuota status`` from the actuator's Redis read model.
"""
