"""kuota ingest service (a thin shell over kuota.core and the adapters)."""
