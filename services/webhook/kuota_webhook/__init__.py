"""kuota webhook service: the mutating webhook, apart from ingest (a thin shell over kuota.kube)."""
