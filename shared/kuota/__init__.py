"""kuota: quota admission, borrowing, preemption and fair sharing for DRA GPU jobs.

Packages (docs/architecture.md is the map; the import rules are import-linter
contracts in pyproject.toml):
  kuota.api, kuota.quantity      typed views of the objects kuota reads; their parsers
  kuota.kinds                    the registry of the Kubernetes kinds kuota reads
  kuota.core                     the pure fold: no I/O, no clock, no randomness
  kuota.events                   versioned event and decision schemas, the public contract
  kuota.actuation, kuota.status  pure Job patch planning; the ClusterQueue read model
  kuota.sim, kuota.audit         the simulator and the audit, on the same fold
  kuota.bus / kuota.kube / kuota.store   adapters (Kafka, Kubernetes, Redis)
  kuota.cli                      the ``kuota`` command
  kuota.service                  the runner the four services share
"""

__version__ = "0.1.0"
