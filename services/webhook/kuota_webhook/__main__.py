"""``python -m kuota_webhook``: the same as the ``kuota-webhook`` command."""

from kuota_webhook.main import main

main()
