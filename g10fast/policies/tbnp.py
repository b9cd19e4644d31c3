"""UVMSmart's tree-based neighbourhood prefetcher (`tbnp`) on the driver engine
(specs/seed-policies.md §5.1): per 2 MiB large page a tree down to 64 KiB basic blocks; a
fault fetches its whole basic block, then every subtree over half valid is filled, bottom-up,
cascading. Eviction: UVMSmart's default LRU of 2 MiB large pages (whole-large-page eviction
empties every subtree, the end state of its tree pre-eviction; the 64 KiB pre-eviction order
itself is not modelled)."""

from dataclasses import dataclass

from g10fast.errors import InputError
from g10fast.policies.registry import PolicyRecord


@dataclass(frozen=True)
class Options:
    #: large-page order: "access" (UVMSmart's LRU-2M, the default) or "alloc" (the driver's)
    lru: str = "access"

    def check(self):
        if self.lru not in ("access", "alloc"):
            raise InputError(f"must be access or alloc, got {self.lru!r}", param="policy.lru")


RECORD = PolicyRecord(
    name="tbnp", display="TBNp", engine="driver", plan_depends_on_host=False,
    options=Options, aliases=("uvmsmart-tbnp", "tbn"),
    paper="UVMSmart (ISCA'19): tree-based neighbourhood prefetch",
    description="64 KiB basic blocks, > 50 % subtrees filled bottom-up, LRU 2 MiB eviction",
    order=115, colour="#bcbd22",
    extra={"driver": {"prefetcher": "tbn", "big_page_kib": 64, "evict": "access2m"},
           "driver_from_options": lambda o: {"evict": "access2m" if o.lru == "access"
                                             else "alloc2m"}})
