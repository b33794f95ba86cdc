"""``python -m kuota_ingest``: the same as the ``kuota-ingest`` command."""

from kuota_ingest.main import main

main()
