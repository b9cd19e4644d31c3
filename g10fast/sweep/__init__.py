"""Experiment sweeps: TOML matrices (`matrix`), the HDF5 results store (`store`), the
runner with long-lived workers (`runner`, `worker`). Format docs: docs/matrix-format.md,
docs/store-format.md."""
