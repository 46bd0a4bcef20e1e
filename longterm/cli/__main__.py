"""``python -m longterm.cli``: the ``longterm`` command, as the console script runs it."""

from . import main

main()
