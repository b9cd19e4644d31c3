"""UVMSmart's tree-based neighbourhood prefetcher (`tbnp`) on the driver engine
(specs/seed-policies.md §5.1): per 2 MiB large page a tree down to 64 KiB basic blocks; a
fault fetches its whole basic block, then every subtree over half valid is filled, bottom-up,
cascading. Eviction: UVMSmart's LRU of 2 MiB large pages (default), or with `pre_evict = true`
its TBN pre-eviction (`traverse_and_remove_lp_tree`): capacity in 4 KiB pages, the least
recently used page's 64 KiB basic block is evicted, then every subtree of that large page's
tree with 0 < valid < size / 2 evicts its remaining blocks, bottom-up, cascading (driver
option `evict = "tbn64k"`)."""

from dataclasses import dataclass

from g10fast.engine.driver.mode import DriverMode
from g10fast.errors import InputError
from g10fast.policies.registry import PolicyRecord


@dataclass(frozen=True)
class Options:
    #: large-page order: "access" (UVMSmart's LRU-2M, the default) or "alloc" (the driver's)
    lru: str = "access"
    #: UVMSmart's tree pre-eviction at 64 KiB basic blocks (the spec's TBNp + pre-eviction)
    #: instead of whole 2 MiB large pages; `lru` is then unused (a 4 KiB access LRU)
    pre_evict: bool = False

    def check(self):
        if self.lru not in ("access", "alloc"):
            raise InputError(f"must be access or alloc, got {self.lru!r}", param="policy.lru")
        if not isinstance(self.pre_evict, bool):
            raise InputError(f"must be true or false, got {self.pre_evict!r}", param="policy.pre_evict")


RECORD = PolicyRecord(
    name="tbnp",
    display="TBNp",
    engine="driver",
    plan_depends_on_host=False,
    options=Options,
    aliases=("uvmsmart-tbnp", "tbn"),
    paper="UVMSmart (ISCA'19): tree-based neighbourhood prefetch",
    description="64 KiB basic blocks, > 50 % subtrees filled bottom-up, LRU 2 MiB eviction",
    order=115,
    colour="#bcbd22",
    engine_mode=lambda o, engine: DriverMode.of(
        prefetcher="tbn",
        big_page_kib=64,
        evict="tbn64k" if o.pre_evict else "access2m" if o.lru == "access" else "alloc2m",
    ),
)
