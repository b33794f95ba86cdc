"""``python -m kuota.cli``: the same as the ``kuota`` console script."""

from kuota.cli import main

main()
