"""Issue 37, "Figures and output": what the command line prints reads right: the progress
ETA while Numba compiles, the `policies` columns, the agreement table where the artifact
failed, the units of one table."""

from __future__ import annotations

import io
import re

from g10fast.cli import main


class _Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def test_eta_counts_from_the_first_report(monkeypatch):
    """41 s of compiling, then 1 kernel of 3,000: the ETA was 2h23m (1 kernel / 41 s); it is
    unknown until work is measured, then the rate of the work alone."""
    import g10fast.progress as pg

    clock = _Clock()
    monkeypatch.setattr(pg.time, "perf_counter", clock)
    buf = io.StringIO()
    p = pg.RunProgress("G10", stream=buf, interval=0)
    clock.t += 41.0
    p(1, 3000)
    clock.t += 1.0
    p(101, 3000)  # 100 kernels/s since the first report
    lines = buf.getvalue().splitlines()
    assert lines[0].endswith("41s elapsed, ETA ?"), lines[0]
    assert "100.0 kernels/s, 42s elapsed, ETA 29s" in lines[1], lines[1]
    # the same with a bar: tqdm's rate from the first report, its elapsed from the start
    clock.t = 5000.0
    buf = io.StringIO()
    p = pg.RunProgress("G10", stream=buf, bar=True)
    clock.t += 41.0
    p(1, 3000)
    out = buf.getvalue()
    assert "00:41<?" in out and "2:23:" not in out, out


def test_policies_columns_line_up(capsys):
    assert main(["policies"]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = lines[0]
    col = head.index("paper")
    rows = [x for x in lines[1:-1] if x and not x.startswith(" ")]
    assert len(rows) >= 10
    for r in rows:  # every paper column starts under its heading
        assert r[col - 1] == " " and r[col] != " ", r
        assert r[:col].split()[0] and len(r[:col].split()) >= 3
    eng = head.index("engine")
    assert all(
        r[eng - 1] == " " and r[eng:].split()[0] in ("page", "tensor", "swap", "driver", "ranks")
        for r in rows
    ), rows
    assert all(len(x) <= 110 for x in lines if x.lstrip().startswith(("options", "o1")))


def test_one_unit_per_quantity_in_a_table(capsys):
    """Memories are GiB (the engines take `memory_gb` as 2^30 bytes), bandwidths GB/s (1e9
    bytes a second): the `presets` table said 'GPU GB' beside the models' 'footprint (GiB)',
    and `models` divided a GiB footprint by a '40 GB' GPU."""
    assert main(["presets"]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert re.findall(r"\b(GiB|GB)\b(?!/s)", head) == ["GiB", "GiB"], head
    assert "GPU GiB" in head and "host GiB" in head and "host GB/s" in head
    assert main(["models", "--batch", "8"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "footprint (GiB)" in out[0]
    assert "x GPU: footprint / the 40 GiB GPU of preset g10-artifact" in out[-1]
    assert not re.search(r"\bGB\b(?!/s)", out[-1]), out[-1]
