"""Shared pytest set-up: hypothesis runs derandomized, so that the fuzz tests explore the
same examples on every machine and a CI run is reproducible (run with
`--hypothesis-seed=N` or HYPOTHESIS_PROFILE=explore to search new ones)."""

import os

from hypothesis import settings

settings.register_profile("reproducible", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "reproducible"))
