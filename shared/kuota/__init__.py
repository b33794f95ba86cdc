"""kuota: quota admission, borrowing, preemption and fair sharing for DRA GPU jobs.

Layers (enforced by import-linter, see pyproject.toml):
  kuota.core    the pure fold and everything it needs: no I/O, no clock, no randomness
  kuota.events  versioned event and decision schemas (pydantic), the public contract
  kuota.bus / kuota.kube / kuota.store   adapters (Kafka, Kubernetes, Redis)
"""

__version__ = "0.1.0"
