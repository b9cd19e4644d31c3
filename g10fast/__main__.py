"""`python -m g10fast`: the `g10fast` console script."""

from g10fast.cli import console_main

console_main()
