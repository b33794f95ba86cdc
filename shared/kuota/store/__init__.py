"""Redis adapter: fold snapshots (state + the journal offset it reflects) and the
Redis connection settings (``settings``)."""
