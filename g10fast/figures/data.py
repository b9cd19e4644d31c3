"""The numbers the figures plot: g10fast's from a results store, the artifact's from its
example_results/ (g10-workloads spec §5.2, §6). No simulation happens here."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from ..config import GEN_DEFAULTS
from ..errors import InputError
from ..sweep.store import ResultStore

__all__ = [
    "Results",
    "Reference",
    "FIG11_WORKLOADS",
    "MODELS",
    "DISPLAY",
    "MODEL_LABEL",
    "MODEL_FILE",
    "MODEL_STEM",
    "FREQ_HZ",
    "INF",
]

INF = math.inf
FREQ_HZ = 1.2e9
MODELS = ("BERT", "VIT", "Inceptionv3", "ResNet152", "SENet154")
FIG11_WORKLOADS = (
    ("BERT", 256),
    ("VIT", 1280),
    ("Inceptionv3", 1536),
    ("ResNet152", 1280),
    ("SENet154", 1024),
)
FIG18_WORKLOADS = (("BERT", 512),) + FIG11_WORKLOADS[1:]


class RegistryField(dict):
    """Policy -> one field of its policy registry record (`display`, `colour`), looked up
    each time unless set here."""

    def __init__(self, field: str):
        super().__init__()
        self.field = field

    def __missing__(self, policy):
        from g10fast import policies

        return getattr(policies, self.field)(policy)

    def get(self, policy, default=None):
        return self[policy]


DISPLAY = RegistryField("display")
MODEL_LABEL = {
    "BERT": "BERT",
    "VIT": "ViT",
    "Inceptionv3": "Inceptionv3",
    "ResNet152": "ResNet152",
    "SENet154": "SENet154",
}
MODEL_FILE = {
    "BERT": "bert",
    "VIT": "vit",
    "Inceptionv3": "inception",
    "ResNet152": "resnet",
    "SENet154": "senet",
}
MODEL_STEM = {
    "BERT": "BERT_Base",
    "VIT": "VIT",
    "Inceptionv3": "Inceptionv3",
    "ResNet152": "ResNet152",
    "SENet154": "SENet154",
}


def _r(x) -> float:
    return round(float(x), 6)


def point_stats(result: dict, policy: str) -> dict:
    """The statistics gatherKernelInfo.py takes from a run (spec §5.2): those of the reported
    iteration (the faster one); for lru stall := stall - overlap and overlap := 0."""
    its = result.get("iterations") or []
    it = its[int(result.get("reported", 0) or 0)] if its else {}
    pages = it.get("pages", {}) or {}
    st = {
        "exe": _num(it.get("exe_time_cycles")),
        "ideal": _num(it.get("ideal_exe_time_cycles", (result.get("workload") or {}).get("ideal_cycles"))),
        "stall": _num(it.get("stall_cycles")),
        "overlap": _num(it.get("overlap_cycles")),
        "compute": _num(it.get("compute_cycles")),
        "ssd2gpu": _num(pages.get("ssd_to_gpu", 0)),
        "gpu2ssd": _num(pages.get("gpu_to_ssd", 0)),
        "cpu2gpu": _num(pages.get("cpu_to_gpu", 0)),
        "gpu2cpu": _num(pages.get("gpu_to_cpu", 0)),
    }
    if policy == "lru" and st["stall"] is not None and st["overlap"] is not None:
        st["stall"] = st["stall"] - st["overlap"]
        st["overlap"] = 0.0
    return st


def _num(v):
    if v is None:
        return None
    if isinstance(v, str):
        return INF if v == "inf" else None
    return float(v)


_FAILED = {k: INF for k in ("exe", "stall", "overlap", "compute", "ssd2gpu", "gpu2ssd", "cpu2gpu", "gpu2cpu")}


class Results:
    """g10fast's points of a store, looked up by (model, batch, policy, system parameters).

    `get` returns the statistics dict of an ok point, a dict of inf for a failed run (the
    artifact's "inf"), or None when the point is not in the store (or errored)."""

    def __init__(self, store: ResultStore | str | os.PathLike):
        self.store = (
            store
            if hasattr(store, "points") and hasattr(store, "arrays")
            else ResultStore(store, create=False)
        )
        self.points = self.store.points()
        self._by_key = {}
        for p in self.points:
            a = p.attrs
            try:
                key = (
                    a["model"],
                    int(a["batch_size"]),
                    a["policy"],
                    _r(a["host_mem_gb"]),
                    _r(a["ssd_gbps"]),
                    _r(a["pcie_gbps"]),
                    _r(a["kernel_time_std_dev"]),
                )
            except KeyError:
                continue
            self._by_key[key] = p
        self._workloads: dict = {}

    def point(self, model, batch, policy, host=None, ssd=None, pcie=None, var=0.0):
        key = (
            model,
            int(batch),
            policy,
            _r(GEN_DEFAULTS["host_mem_gb"] if host is None else host),
            _r(GEN_DEFAULTS["ssd_gbps"] if ssd is None else ssd),
            _r(GEN_DEFAULTS["pcie_gbps"] if pcie is None else pcie),
            _r(var),
        )
        return self._by_key.get(key)

    def get(self, model, batch, policy, **kw) -> dict | None:
        p = self.point(model, batch, policy, **kw)
        if p is None or p.status == "error":
            return None
        if p.status == "failed" or not p.result:
            return dict(_FAILED, ideal=None)
        return point_stats(p.result, policy)

    def exe(self, *a, **kw):
        s = self.get(*a, **kw)
        return None if s is None else s["exe"]

    def ideal(self, model, batch, ssd=None, pcie=None, var=0.0):
        """Ideal = the lru run's ideal_exe_time (spec §6); else the ideal run's execution
        time; else the ideal time any run of that workload reports."""
        s = self.get(model, batch, "lru", ssd=ssd, pcie=pcie, var=var)
        if s is not None and s["ideal"] not in (None, INF):
            return s["ideal"]
        s = self.get(model, batch, "ideal", ssd=ssd, pcie=pcie, var=var)
        if s is not None and s["exe"] not in (None, INF):
            return s["exe"]
        for key, p in self._by_key.items():
            if key[0] == model and key[1] == int(batch) and key[6] == _r(var) and p.status == "ok":
                st = point_stats(p.result, key[2])
                if st["ideal"] is not None:
                    return st["ideal"]
        return None

    def kernel_slowdown(self, model, batch, policy, iteration=1):
        """Per-kernel slowdown of one iteration: (end - start) / ideal, or normalised stall + 1
        for a tensor-engine run that stores `kernel_stall`; None if absent."""
        p = self.point(model, batch, policy)
        if p is None or p.status != "ok":
            return None
        arr = self.store.arrays(p.hash)
        if "kernel_cycles" in arr and "kernel_ideal_cycles" in arr:
            kc = arr["kernel_cycles"]
            it = min(iteration, kc.shape[0] - 1)
            ideal = arr["kernel_ideal_cycles"].astype(np.float64)
            ok = (kc[it] >= 0) & (ideal > 0)
            return kc[it][ok] / ideal[ok]
        if "kernel_stall" in arr:
            return np.asarray(arr["kernel_stall"], dtype=np.float64) + 1.0
        return None

    def workload(self, model, batch):
        key = f"{model}-{int(batch)}"
        if key not in self._workloads:
            self._workloads[key] = self.store.workload(key)
        return self._workloads[key]


# --------------------------------------------------------------------------------------------
# the artifact's example_results/
# --------------------------------------------------------------------------------------------


def parse_table(path) -> tuple[list[str], list[tuple[str, list[list[float]]]]]:
    """A data-prep table: header `a | b | …`, blank line, blocks of a label line and lines of
    numbers separated by blank lines ('inf' = missing run)."""
    text = Path(path).read_text()
    lines = text.split("\n")
    header = [h.strip() for h in lines[0].split("|")]
    blocks, cur = [], None
    for ln in lines[1:]:
        s = ln.strip()
        if not s:
            cur = None
            continue
        if cur is None:
            cur = (s, [])
            blocks.append(cur)
        else:
            try:
                cur[1].append([float(x) for x in s.split()])
            except ValueError:
                raise InputError("malformed number line", path=os.fspath(path)) from None
    return header, blocks


class Reference:
    """The artifact's example results, or an empty reference when the folder is absent."""

    def __init__(self, artifact_dir=None):
        self.root = None
        if artifact_dir is not None:
            d = Path(artifact_dir) / "example_results"
            if d.is_dir():
                self.root = d

    def __bool__(self):
        return self.root is not None

    def _table(self, rel):
        if self.root is None or not (self.root / rel).is_file():
            return None
        return parse_table(self.root / rel)

    def fig11(self) -> dict:
        """(model, batch, policy|'ideal') -> exe cycles."""
        t = self._table("overall_performance/all.base.txt")
        out = {}
        if t:
            header, blocks = t
            for (m, b), (_, rows) in zip(FIG11_WORKLOADS, blocks):
                for pol, v in zip(header, rows[0]):
                    out[(m, b, pol)] = v
        return out

    def fig12(self) -> dict:
        """(model, batch, policy, part) -> cycles (FlashNeuron's ms converted)."""
        out = {}
        for part in ("overlap", "compute", "stall"):
            t = self._table(f"overall_breakdown/{part}.txt")
            if not t:
                continue
            header, blocks = t
            for (m, b), (_, rows) in zip(FIG11_WORKLOADS, blocks):
                for pol, v in zip(header, rows[0]):
                    out[(m, b, pol, part)] = v * FREQ_HZ / 1e3 if pol == "FlashNeuron" else v
        return out

    def fig13(self) -> dict:
        """(model, policy) -> per-kernel slowdown of iteration 1 (FlashNeuron: stall + 1)."""
        out = {}
        if self.root is None:
            return out
        for m, _b in FIG11_WORKLOADS:
            for pol in ("lru", "FlashNeuron", "deepUM", "prefetch_lru"):
                f = self.root / "overall_slowdown_cdf" / f"{MODEL_STEM[m]}-{pol}.txt"
                if f.is_file():
                    out[(m, pol)] = _slowdowns(f, pol == "FlashNeuron")
        return out

    def fig14(self) -> dict:
        """(model, batch, policy, direction) -> pages."""
        out = {}
        for m, b, header, rows in self._fig11_blocks("overall_traffic/traffic.txt"):
            for d, row in zip(("ssd2gpu", "gpu2ssd", "cpu2gpu", "gpu2cpu"), rows):
                for pol, v in zip(header, row):
                    out[(m, b, pol, d)] = v
        return out

    def _fig11_blocks(self, rel):
        """(model, batch, header, rows) of the table's block of each Figure-11 workload."""
        t = self._table(rel)
        if t:
            header, blocks = t
            for (m, b), (_, rows) in zip(FIG11_WORKLOADS, blocks):
                yield m, b, header, rows

    def _by_label(self, rel, value_cols=True):
        t = self._table(rel)
        out = {}
        if t:
            header, blocks = t
            for label, rows in blocks:
                for col, v in zip(header, rows[0]):
                    out[(float(label), col)] = v
        return out

    def fig15(self) -> dict:
        """(model, batch, policy|'ideal') -> exe cycles."""
        out = {}
        for m in MODELS:
            for (b, pol), v in self._by_label(f"overall_batchsize/{MODEL_FILE[m]}.txt").items():
                out[(m, int(b), pol)] = v
        return out

    def fig16(self, policy="prefetch_lru") -> dict:
        """(model, batch, host GiB) -> exe cycles."""
        out = {}
        for m in MODELS:
            rel = (
                f"sensitivity_cpumem/{MODEL_FILE[m]}.txt"
                if policy is None
                else f"sensitivity_cpumem_combined/{policy}/{MODEL_FILE[m]}.txt"
            )
            for (host, b), v in self._by_label(rel).items():
                out[(m, int(float(b)), host)] = v
        return out

    def fig18(self) -> dict:
        """(model, batch, ssd GB/s, policy|'ideal') -> exe cycles."""
        out = {}
        for m, b in FIG18_WORKLOADS:
            for (ssd, pol), v in self._by_label(f"sensitivity_ssdbw/{MODEL_FILE[m]}.txt").items():
                out[(m, b, ssd, pol)] = v
        return out

    def fig19(self) -> dict:
        """(model, batch, variation fraction) -> ideal / exe."""
        out = {}
        for m, b, header, rows in self._fig11_blocks("sensitivity_variation/all.txt"):
            for col, v in zip(header, rows[0]):
                out[(m, b, float(col.rstrip("%")) / 100)] = v
        return out


def _slowdowns(path, is_stall: bool) -> np.ndarray:
    vals = []
    with open(path) as fh:
        for ln in fh:
            s = ln.strip()
            if not s or s == "-1":
                continue
            if is_stall:
                vals.append(float(s) + 1.0)
                continue
            head, _, rest = s.partition(":")
            it = int(head.split("+")[0])
            if it != 1:
                continue
            span = rest[rest.index("[") + 1 : rest.index("]")].split(",")
            ideal = rest[rest.index("(") + 1 : rest.index(")")].split(",")[0]
            vals.append((int(span[1]) - int(span[0])) / max(int(ideal), 1))
    return np.asarray(vals, dtype=np.float64)
