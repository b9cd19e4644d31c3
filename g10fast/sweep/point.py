"""What a results store holds per point, shared by the store (g10fast.sweep.store) and its
reader of version-1 HDF5 stores (g10fast.sweep.store_hdf5), so that neither imports the
other's module to name them."""

from __future__ import annotations

from dataclasses import dataclass, field

#: the `format` of every results store (its meta table, or an HDF5 store's root attribute)
STORE_FORMAT = "g10fast-results-store"


@dataclass
class StoredPoint:
    """One point read back from the store."""

    hash: str
    status: str
    attrs: dict
    config: dict
    result: dict | None
    error: str = ""
    array_names: tuple = field(default_factory=tuple)

    @property
    def label(self) -> str:
        return self.attrs.get("label", self.hash[:12])
