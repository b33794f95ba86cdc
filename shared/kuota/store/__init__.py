"""Redis adapter: fold snapshots (state + the journal offset it reflects)."""
