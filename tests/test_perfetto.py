"""Timeline export (g10fast/perfetto.py): the Perfetto file decoded with Perfetto's own
protobuf definitions and checked against the HDF5 trace (timestamps, track names, kernel names
and stalls, counter values against a plain-Python twin, link slices), the JSON export, `trace
diff`, `trace inspect --json`, `trace plot`, and bad input (exit 2, nothing published)."""

from __future__ import annotations

import json
import os

import h5py
import numpy as np
import pytest

from synth_trace import engine_like_batch

from g10fast.cli import main
from g10fast.errors import InputError
from g10fast.perfetto import (
    LINKS,
    PAGE_BYTES,
    TIERS,
    U_FAULTS,
    U_GPU,
    U_INFLIGHT,
    U_LINK,
    U_RATE,
    U_TIER,
    _Bins,
    encode_track_events,
    export_trace,
)
from g10fast.trace import EventKind, EventTraceWriter, Location, open_trace

pb = pytest.importorskip(
    "perfetto.protos.perfetto.trace.perfetto_trace_pb2", reason="pip install perfetto (the test extra)"
)

F_HZ = 1.2e9
N_EVENTS = 12_345  # 13 kernel executions of the synthetic stream
SYSTEM = {"gpu_frequency_ghz": 1.2, "ssd_bandwidth_gbps": 3.2, "host_link_gbps": 15.754}


def write_trace(path, buf, exec_cycles=None, names=None):
    names = names or [f"kern_{i}" for i in range(1000)]
    with EventTraceWriter(
        path,
        config={"system": SYSTEM, "policy": {"name": "x"}},
        meta={"model": "Synth", "batch_size": 8, "policy": "lru", "kernel_names": names},
        chunk_rows=4096,
    ) as w:
        if exec_cycles is not None:
            w.set_kernel_times(exec_cycles)
        w.append(buf)
    return path


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    d = tmp_path_factory.mktemp("pf")
    buf = engine_like_batch(N_EVENTS, seed=3)
    exec_cycles = np.arange(1000) * 100 + 500_000
    path = write_trace(d / "run.h5", buf, exec_cycles)
    return d, path, buf, exec_cycles


def decode(path):
    with open(path, "rb") as fh:
        return pb.Trace.FromString(fh.read())


def tracks_and_events(trace):
    names, ev_names, arg_names, events = {}, {}, {}, []
    for p in trace.packet:
        if p.HasField("track_descriptor"):
            names[p.track_descriptor.uuid] = p.track_descriptor.name
        if p.HasField("interned_data"):
            for e in p.interned_data.event_names:
                ev_names[e.iid] = e.name
            for e in p.interned_data.debug_annotation_names:
                arg_names[e.iid] = e.name
        if p.HasField("track_event"):
            events.append(p)
    return names, ev_names, arg_names, events


def ns(c):
    return np.rint(np.asarray(c, np.float64) * (1e9 / F_HZ)).astype(np.int64)


# -- the encoder -----------------------------------------------------------------------------


def test_numpy_encoder_decodes_with_perfettos_definitions():
    ts = np.array([0, 1, 127, 128, 2**40, 2**62], np.int64)
    args = np.array([-1, 0, 1, 300, -(2**63), 2**63 - 1], np.int64)
    data = encode_track_events(
        ts, 4, 77, counter=args, args=[(5, args)], args_mask=np.array([1, 0, 1, 0, 1, 1], bool)
    )
    t = pb.Trace.FromString(data)
    assert [p.timestamp for p in t.packet] == ts.tolist()
    assert [p.track_event.counter_value for p in t.packet] == args.tolist()
    assert all(p.track_event.track_uuid == 77 and p.track_event.type == 4 for p in t.packet)
    assert [len(p.track_event.debug_annotations) for p in t.packet] == [1, 0, 1, 0, 1, 1]
    assert [
        p.track_event.debug_annotations[0].int_value for p in t.packet if p.track_event.debug_annotations
    ] == [-1, 127 - 127 + 1, -(2**63), 2**63 - 1]
    # byte-identical to protobuf's own serialisation of the same messages
    ref = pb.Trace()
    for i in range(ts.size):
        p = ref.packet.add()
        p.timestamp = int(ts[i])
        p.trusted_packet_sequence_id = t.packet[i].trusted_packet_sequence_id
        p.sequence_flags = 2
        p.track_event.type = 4
        p.track_event.track_uuid = 77
        p.track_event.counter_value = int(args[i])
        if t.packet[i].track_event.debug_annotations:
            a = p.track_event.debug_annotations.add()
            a.name_iid = 5
            a.int_value = int(args[i])
    assert pb.Trace.FromString(ref.SerializeToString()) == t


# -- the Perfetto export against the HDF5 trace ----------------------------------------------


def test_perfetto_export_matches_the_hdf5_trace(synth):
    d, path, buf, exec_cycles = synth
    out = d / "run.pftrace"
    rep = export_trace(path, out, merge_gap=0)
    assert out.exists() and not [p for p in os.listdir(d) if p.endswith(".tmp")]
    trace = decode(out)
    names, ev_names, arg_names, events = tracks_and_events(trace)
    assert rep["packets"] == len(trace.packet)
    assert names[U_GPU] == "GPU compute" and names[U_FAULTS] == "page faults"
    assert [names[U_LINK + i] for i in range(4)] == ["SSD→GPU", "host→GPU", "GPU→SSD", "GPU→host"]
    assert [names[U_TIER + j] for j in range(3)] == [
        "GPU-resident bytes",
        "host-resident bytes",
        "SSD-resident bytes",
    ]
    assert names[U_INFLIGHT] == "SSD→GPU bytes in flight"
    root = [p.track_descriptor for p in trace.packet if p.HasField("track_descriptor")][0]
    assert root.name == "g10fast: Synth batch 8 lru"

    # kernels: one slice per KERNEL row, named by kernel, stall = end - previous end - exec
    k = buf[buf[:, 1] == EventKind.KERNEL]
    gpu = [p for p in events if p.track_event.track_uuid == U_GPU]
    begins = [p for p in gpu if p.track_event.type == pb.TrackEvent.TYPE_SLICE_BEGIN]
    ends = [p for p in gpu if p.track_event.type == pb.TrackEvent.TYPE_SLICE_END]
    assert len(begins) == len(ends) == len(k) == 13
    assert [p.timestamp for p in begins] == ns(k[:, 0]).tolist()
    assert [p.timestamp for p in ends] == ns(k[:, 9]).tolist()
    assert [ev_names[p.track_event.name_iid] for p in begins] == [f"kern_{i}" for i in k[:, 3]]
    prev_end = np.concatenate([[0], k[:-1, 9]])
    args = [{arg_names[a.name_iid]: a.int_value for a in p.track_event.debug_annotations} for p in begins]
    assert [a["stall_ns"] for a in args] == ns(k[:, 9] - prev_end - exec_cycles[k[:, 3]]).tolist()
    assert [a["faulted_pages"] for a in args] == k[:, 6].tolist()
    assert [a["kernel"] for a in args] == k[:, 3].tolist()
    # begin/end alternate in file order (slices nest after a stable sort by time)
    assert [p.track_event.type for p in gpu if p.track_event.type != 3][:4] == [1, 2, 1, 2]

    # links: the pages of the slices are the pages moved on that link
    for L, (s, dst, name) in enumerate(LINKS):
        kinds = EventKind.FETCH if dst == Location.IN_GPU else EventKind.EVICT
        m = (buf[:, 1] == kinds) & ((buf[:, 7] == s) if kinds == EventKind.FETCH else (buf[:, 8] == dst))
        sl = [p for p in events if p.track_event.track_uuid == U_LINK + L and p.track_event.type == 1]
        pages = sum(
            {arg_names[a.name_iid]: a.int_value for a in p.track_event.debug_annotations}["pages"] for p in sl
        )
        assert pages == buf[m, 6].sum() > 0, name
        ts = [p.timestamp for p in events if p.track_event.track_uuid == U_LINK + L]
        assert ts == sorted(ts)  # no overlapping slices on a link

    # counters: the twin (plain Python over every row) at each sample
    w, t0 = rep["counter_interval_cycles"], rep["window_cycles"][0]
    nb = rep["counter_samples_max"]
    level = {loc: [0] * (nb + 1) for loc, _ in TIERS}
    for row in buf.tolist():
        kind, cnt, src, dst = row[1], max(row[6], 0), row[7], row[8]
        if kind == EventKind.FETCH:
            dst = 3
        elif kind == EventKind.EVICT:
            src = 3
        elif kind == EventKind.ALLOC:
            src, dst = 0, 3
        elif kind == EventKind.DEALLOC:
            dst = 0
        else:
            continue
        b = min(nb, (row[0] - t0) // w)
        for loc, _ in TIERS:
            level[loc][b] += cnt * ((dst == loc) - (src == loc))
    for j, (loc, name) in enumerate(TIERS):
        cum = np.cumsum(level[loc][:nb])
        if loc != Location.IN_GPU:
            cum -= min(0, cum.min())
        got = [
            (p.timestamp, p.track_event.counter_value)
            for p in events
            if p.track_event.track_uuid == U_TIER + j
        ]
        assert got, name
        for ts_, v in got:
            b = int(np.flatnonzero(ns(t0 + w * np.arange(nb)) == ts_)[0])
            assert v == cum[b] * PAGE_BYTES, (name, b)
        assert len(got) == 1 + int((np.diff(cum) != 0).sum())  # one sample per change

    # hints: one instant per kernel execution that has hints, their counts as args
    inst = [p for p in events if p.track_event.track_uuid == U_GPU and p.track_event.type == 3]
    nh = sum(
        {arg_names[a.name_iid]: a.int_value for a in p.track_event.debug_annotations}["hints"] for p in inst
    )
    assert nh == int((buf[:, 1] == EventKind.HINT).sum())
    assert all(ev_names[p.track_event.name_iid] == "hints" for p in inst)


def test_link_counters_conserve_bytes():
    """In flight: the time integral is bytes x duration; throughput: it is the bytes moved."""
    b = _Bins(0, 10_000, 37, min_interval=1)
    s = np.array([100, 2_000, 2_500, 9_000])
    e = np.array([1_900, 2_600, 7_777, 9_999])
    x = np.array([4096, 8192, 40960, 4096], np.float64)
    b.add_link(1, s, e, x)
    inflight, rate = b.link_values()
    assert inflight[1].sum() * b.w == pytest.approx((x * (e - s)).sum(), rel=1e-9)
    assert rate[1].sum() * b.w == pytest.approx(x.sum(), rel=1e-9)
    assert not inflight[0].any() and not rate[2].any()
    # a bin entirely inside the third transfer holds exactly its bytes
    j = (4_000 - 0) // b.w + 1
    assert inflight[1][j] == pytest.approx(40960)


def test_pages_and_kernel_range(synth):
    d, path, buf, _ = synth
    out = d / "range.pftrace"
    rep = export_trace(path, out, pages=True, kernels="3:5")
    names, ev_names, arg_names, events = tracks_and_events(decode(out))
    k = buf[buf[:, 1] == EventKind.KERNEL]
    w0, w1 = k[3, 0], k[4, 9]
    assert rep["window_cycles"] == [w0, w1] and rep["kernel_slices"] == 2
    # every fault row in the window is an instant with its tensor and first page
    m = (buf[:, 1] == EventKind.FAULT) & (buf[:, 0] >= w0) & (buf[:, 0] <= w1)
    inst = [p for p in events if p.track_event.track_uuid == U_FAULTS and p.track_event.type == 3]
    got = sorted(
        (
            p.timestamp,
            {arg_names[a.name_iid]: a.int_value for a in p.track_event.debug_annotations}["first_page"],
        )
        for p in inst
    )
    assert got == sorted(zip(ns(buf[m, 0]).tolist(), buf[m, 5].tolist()))
    hm = (buf[:, 1] == EventKind.HINT) & (buf[:, 0] >= w0) & (buf[:, 0] <= w1)
    hints = [p for p in events if p.track_event.track_uuid == U_GPU and p.track_event.type == 3]
    assert len(hints) == hm.sum() > 0
    assert {ev_names[p.track_event.name_iid] for p in hints} <= {
        "hint → NOT_PRESENT",
        "hint → IN_SSD",
        "hint → IN_CPU",
        "hint → IN_GPU",
    }
    assert all(w0 * 1e9 / F_HZ - 1 <= p.timestamp <= w1 * 1e9 / F_HZ + 1 for p in events)


def test_json_export(synth):
    d, path, buf, _ = synth
    out = d / "run.json"
    assert main(["trace", "export", str(path), "--out", str(out), "--format", "json", "--no-progress"]) == 0
    doc = json.loads(out.read_text())
    ev = doc["traceEvents"]
    threads = {e["tid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    gpu = [e for e in ev if e["ph"] == "X" and threads[e["tid"]] == "GPU compute"]
    k = buf[buf[:, 1] == EventKind.KERNEL]
    assert [e["name"] for e in gpu] == [f"kern_{i}" for i in k[:, 3]]
    assert [e["ts"] for e in gpu] == pytest.approx((ns(k[:, 0]) / 1000).tolist(), abs=1e-3)
    assert [e["dur"] for e in gpu] == pytest.approx((ns(k[:, 9]) - ns(k[:, 0])) / 1000, abs=2e-3)
    counters = {e["name"] for e in ev if e["ph"] == "C"}
    assert {"GPU-resident bytes", "SSD→GPU bytes in flight", "GPU→host throughput (bytes/s)"} <= counters


# -- inspect --json, diff, plot ----------------------------------------------------------------


def test_inspect_json(synth, capsys):
    _, path, buf, _ = synth
    assert main(["trace", "inspect", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["events"] == N_EVENTS == sum(doc["events_by_kind"].values())
    assert doc["events_by_kind"]["KERNEL"] == 13
    assert doc["events_by_kind"]["FETCH"] == int((buf[:, 1] == EventKind.FETCH).sum())
    assert doc["time_span"]["last_cycles"] == int(max(buf[:, 0].max(), buf[buf[:, 1] == 0, 9].max()))
    assert doc["config"]["system"] == SYSTEM and doc["meta"]["kernel_names"] == 1000
    assert doc["has_kernel_times"] is True


def test_diff_names_the_first_divergence(synth, capsys):
    d, path, buf, exec_cycles = synth
    b = buf.copy()
    k = np.flatnonzero(b[:, 1] == EventKind.KERNEL)
    delay = 7777
    b[k[6], 9] += delay  # kernel execution 6 ends later ...
    after = np.arange(len(b)) >= k[7]
    b[after, 0] += delay  # ... and everything from execution 7 on shifts
    b[after & (b[:, 1] == EventKind.KERNEL), 9] += delay
    pb_ = write_trace(d / "b.h5", b, exec_cycles)
    assert main(["trace", "diff", str(path), str(pb_), "--json", "--top", "3"]) == 0
    rep = json.loads(capsys.readouterr().out)
    f = rep["first_start_difference"]
    assert (f["execution"], f["kernel"], f["difference_cycles"]) == (7, 7, delay)
    assert rep["executions_with_different_stall"] == 1
    assert rep["top"][0]["execution"] == 6 and rep["top"][0]["stall_difference_cycles"] == delay
    assert rep["top"][0]["stall_b_cycles"] - rep["top"][0]["stall_a_cycles"] == delay
    assert main(["trace", "diff", str(path), str(pb_)]) == 0
    assert "first kernel whose start differs: execution 7" in capsys.readouterr().out
    # a different workload
    other = write_trace(
        d / "other.h5",
        engine_like_batch(3000, seed=3),
        exec_cycles,
        names=[f"other_{i}" for i in range(1000)],
    )
    assert main(["trace", "diff", str(path), str(other)]) == 2


def test_plot(synth):
    d, path, _, _ = synth
    out = d / "fig.png"
    assert main(["trace", "plot", str(path), "--out", str(out), "--kernels", "2:6"]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000


# -- bad input: one clear error, exit 2, nothing under the final name --------------------------


def test_bad_input(synth, tmp_path, capsys):
    _, path, _, _ = synth
    out = tmp_path / "o.pftrace"
    truncated = tmp_path / "trunc.h5"
    truncated.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    foreign = tmp_path / "foreign.h5"
    with h5py.File(foreign, "w") as f:
        f["x"] = np.arange(10)
    cases = [
        (truncated, []),
        (foreign, []),
        (path, ["--kernels", "5:99"]),
        (path, ["--kernels", "4:4"]),
        (path, ["--kernels", "x"]),
        (tmp_path / "missing.h5", []),
    ]
    for src, extra in cases:
        assert main(["trace", "export", str(src), "--perfetto", str(out), "--no-progress", *extra]) == 2, (
            src,
            extra,
        )
        err = capsys.readouterr().err
        assert err.startswith("g10fast: error:") and err.count("\n") == 1, err
        assert not out.exists()
        assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]
    assert (
        "out of bounds"
        in (
            lambda: (
                main(
                    [
                        "trace",
                        "export",
                        str(path),
                        "--perfetto",
                        str(out),
                        "--kernels",
                        "0:14",
                        "--no-progress",
                    ]
                ),
                capsys.readouterr().err,
            )[1]
        )()
    )
    # an existing output stays as it was when the export fails
    out.write_bytes(b"old")
    assert main(["trace", "export", str(foreign), "--perfetto", str(out)]) == 2
    assert out.read_bytes() == b"old"
    for cmd in (
        ["trace", "plot", str(truncated), "--out", str(tmp_path / "f.png")],
        ["trace", "diff", str(path), str(foreign)],
        ["trace", "inspect", str(foreign), "--json"],
    ):
        assert main(cmd) == 2, cmd
        assert not (tmp_path / "f.png").exists()
    with pytest.raises(InputError):
        export_trace(path, tmp_path / "no" / "dir.pftrace")


def test_kernel_times_are_checked(synth, tmp_path):
    _, _, buf, exec_cycles = synth
    p = write_trace(tmp_path / "k.h5", buf[:2000], exec_cycles)
    with open_trace(p) as tr:
        assert tr.kernel_exec_cycles().tolist() == exec_cycles.tolist()
    with h5py.File(p, "r+") as f:
        f["kernels/exec_cycles"][3] += 1
    with open_trace(p) as tr, pytest.raises(InputError, match="exec_cycles checksum"):
        tr.kernel_exec_cycles()


# -- a real engine run ---------------------------------------------------------------------------


def test_page_engine_trace_exports_its_kernels_and_stalls(tmp_path):
    from synth import make_workload

    from g10fast.run import run
    from g10fast.spec import WorkloadSource, make_spec
    from g10fast.system import System

    w = make_workload(5, n_kernels=12, n_tensors=40, max_pages=300, max_kernel_pages=900, p_workspace=0.2)
    system = System(
        gpu_memory_gb=1500 * 4096 / 2**30,
        gpu_frequency_ghz=1.2,
        host_memory_gb=1.0,
        host_link_gbps=16.0,
        ssd_bandwidth_gbps=3.2,
    )
    spec = make_spec(WorkloadSource("builtin", "bert-base", 1), system, "lru")
    h5 = tmp_path / "lru.h5"
    res = run(spec, workload=w, trace_path=h5)
    out = tmp_path / "lru.pftrace"
    export_trace(h5, out)
    names, ev_names, arg_names, events = tracks_and_events(decode(out))
    kern = np.asarray(res["kernels"])  # iteration, kernel, start, end, ...
    begins = [p for p in events if p.track_event.track_uuid == U_GPU and p.track_event.type == 1]
    assert [p.timestamp for p in begins] == ns(kern[:, 2]).tolist()
    from g10fast.perfetto import _Run

    with open_trace(h5) as tr:
        stall = _Run(tr).stall()
    # the engine's own per-kernel stall: its iterations' stall_cycles, exactly
    for it in res["iterations"]:
        assert stall[kern[:, 0] == it["iteration"]].sum() == it["stall_cycles"]
    prev = np.concatenate([[0], kern[:-1, 3]])
    plain = kern[:, 3] - prev - w.exec_cycles[kern[:, 1]]
    assert (stall >= plain).all()  # O-37 only ever inflates it
    got = [
        {arg_names[a.name_iid]: a.int_value for a in p.track_event.debug_annotations}["stall_ns"]
        for p in begins
    ]
    assert got == ns(stall).tolist()
    assert sum(it["stall_cycles"] for it in res["iterations"]) > 0
    assert [ev_names[p.track_event.name_iid] for p in begins] == [str(w.kernel_name[i]) for i in kern[:, 1]]
    moved = sum(
        it["pages"]["ssd_to_gpu"] if isinstance(it.get("pages"), dict) else 0 for it in res["iterations"]
    )
    del moved
    sl = [p for p in events if p.track_event.track_uuid == U_RATE]
    assert sl  # the SSD→GPU throughput counter


def test_open_serves_the_file_once(synth):
    import socket
    import threading
    import urllib.request

    from g10fast.perfetto import serve_once

    d, path, _, _ = synth
    out = d / "serve.pftrace"
    export_trace(path, out)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    urls = []
    th = threading.Thread(
        target=serve_once,
        args=(out,),
        daemon=True,
        kwargs={"port": port, "on_ready": urls.append, "timeout": 30},
    )
    th.start()
    for _ in range(100):
        if urls:
            break
        threading.Event().wait(0.05)
    assert urls == [f"https://ui.perfetto.dev/#!/?url=http://127.0.0.1:{port}/serve.pftrace"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/serve.pftrace", timeout=10) as r:
        assert r.headers["Access-Control-Allow-Origin"] == "*"
        assert r.read() == out.read_bytes()
    th.join(10)
    assert not th.is_alive()  # served once, then stopped


def test_flows_from_the_last_arrival_to_the_kernel(synth):
    d, path, buf, _ = synth
    out = d / "flows.pftrace"
    rep = export_trace(path, out, flows=True)
    names, ev_names, arg_names, events = tracks_and_events(decode(out))
    k = buf[buf[:, 1] == EventKind.KERNEL]
    fetch = buf[buf[:, 1] == EventKind.FETCH]
    want = {}
    for x, (start, end, faulted) in enumerate(zip(k[:, 0], k[:, 9], k[:, 6])):
        inside = fetch[(fetch[:, 0] >= start) & (fetch[:, 0] <= end)]
        if faulted > 0 and len(inside):
            want[x + 1] = int(ns(inside[:, 0].max()))
    src = {p.track_event.flow_ids[0]: p.timestamp for p in events if p.track_event.flow_ids}
    dst = {
        p.track_event.terminating_flow_ids[0]: p.timestamp
        for p in events
        if p.track_event.terminating_flow_ids
    }
    assert src == want and rep["flows"] == len(want) > 0
    assert dst == {i: int(ns(k[i - 1, 0])) for i in want}
    assert all(ev_names[p.track_event.name_iid] == "arrived" for p in events if p.track_event.flow_ids)
    doc = d / "flows.json"
    export_trace(path, doc, fmt="json", flows=True)
    ev = json.loads(doc.read_text())["traceEvents"]
    assert sorted(e["id"] for e in ev if e["ph"] == "s") == sorted(want)
    assert sorted(e["id"] for e in ev if e["ph"] == "f") == sorted(want)


def test_tensor_engine_trace_exports_its_transfers(tmp_path):
    """The tensor engine writes FETCH with dst -1 and EVICT with src -1 (the GPU implied):
    its moves land on the right links."""
    from synth import make_workload

    from g10fast.run import run
    from g10fast.spec import WorkloadSource, make_spec
    from g10fast.system import System

    w = make_workload(5, n_kernels=12, n_tensors=40, max_pages=300, max_kernel_pages=900, p_workspace=0.2)
    system = System(
        gpu_memory_gb=1500 * 4096 / 2**30,
        gpu_frequency_ghz=1.2,
        host_memory_gb=1.0,
        host_link_gbps=16.0,
        ssd_bandwidth_gbps=3.2,
    )
    h5 = tmp_path / "gds.h5"
    run(make_spec(WorkloadSource("builtin", "bert-base", 1), system, "G10GDSFULL"), workload=w, trace_path=h5)
    with open_trace(h5) as tr:
        buf = tr.to_buffer()
    out = tmp_path / "gds.pftrace"
    export_trace(h5, out, merge_gap=0)
    names, ev_names, arg_names, events = tracks_and_events(decode(out))
    for L, (s, dst, name) in enumerate(LINKS):
        if dst == Location.IN_GPU:
            m = (buf[:, 1] == EventKind.FETCH) & (buf[:, 7] == s)
        else:
            m = (buf[:, 1] == EventKind.EVICT) & (buf[:, 8] == dst)
        sl = [p for p in events if p.track_event.track_uuid == U_LINK + L and p.track_event.type == 1]
        got = sum(
            {arg_names[a.name_iid]: a.int_value for a in p.track_event.debug_annotations}["pages"] for p in sl
        )
        assert got == buf[m, 6].sum() > 0, name


def test_encoder_batches_give_the_same_bytes(monkeypatch):
    import g10fast.perfetto as P

    r = np.random.default_rng(1)
    n = 1000
    ts = np.cumsum(r.integers(0, 10**6, n))
    args = [(3, r.integers(-(10**12), 10**12, n)), (4, 5)]
    kw = dict(
        name_iid=r.integers(0, 4, n),
        counter=r.integers(0, 2**40, n),
        args=args,
        args_mask=r.integers(0, 2, n).astype(bool),
        flow=r.integers(0, 3, n),
    )
    whole = P.encode_track_events(ts, 1, 9, **kw)
    monkeypatch.setattr(P, "ENCODE_ROWS", 77)
    assert P.encode_track_events(ts, 1, 9, **kw) == whole
    assert len(pb.Trace.FromString(whole).packet) == n


def test_cli_export_report(synth, capsys):
    d, path, _, _ = synth
    out = d / "cli.pftrace"
    assert main(["trace", "export", str(path), "--perfetto", str(out), "--no-progress", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["output"] == str(out) and rep["bytes"] == out.stat().st_size
    assert rep["kernel_slices"] == 13 and rep["events_read"] == N_EVENTS
    assert (
        main(["trace", "export", str(path), "--perfetto", str(out), "--no-progress", "--kernels", "2:4"]) == 0
    )
    line = capsys.readouterr().out
    assert line.startswith(f"{out}: ") and "2 kernel slices 2..3" in line
    assert main(["trace", "export", str(path), "--no-progress"]) == 2  # no output named


def test_chunked_reading_gives_the_same_timeline(synth, monkeypatch):
    """Slices merged across chunk boundaries, counters summed chunk by chunk: the same
    timeline whatever the chunk size."""
    import g10fast.perfetto as P

    d, path, _, _ = synth

    def per_track(out):
        names, ev_names, arg_names, events = tracks_and_events(decode(out))
        tracks = {}
        for p in events:
            te = p.track_event
            args = tuple((a.name_iid, a.int_value) for a in te.debug_annotations)
            tracks.setdefault(te.track_uuid, []).append(
                (p.timestamp, te.type, te.name_iid, te.counter_value, args)
            )
        return tracks

    whole = per_track(export_trace(path, d / "whole.pftrace", flows=True)["output"])
    monkeypatch.setattr(P, "CHUNK_ROWS", 777)
    monkeypatch.setattr(P, "ENCODE_ROWS", 100)
    parts = per_track(export_trace(path, d / "parts.pftrace", flows=True)["output"])
    assert parts.keys() == whole.keys()
    for uuid in whole:
        if U_INFLIGHT <= uuid < U_RATE + len(LINKS):  # float sums in another order
            a, b = np.array([x[3] for x in whole[uuid]]), np.array([x[3] for x in parts[uuid]])
            assert len(a) == len(b) and np.abs(a - b).max() <= 1
        else:
            assert parts[uuid] == whole[uuid], uuid


def test_plot_colours_and_widths(synth, monkeypatch):
    """Issue 37: `trace plot` drew the links in matplotlib's cycle, so a link took a tier's
    colour and a colour moved when a link had no traffic, and equal series hid each other.
    Now every series has its own fixed colour in both panels, and each a narrower width and
    its own dash in draw order."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from g10fast.perfetto import PLOT_COLOURS, plot_trace

    d, path, _, _ = synth
    figs = []
    real_close = plt.close
    monkeypatch.setattr(plt, "close", lambda f=None: figs.append(f))
    plot_trace(path, d / "colours.png")
    fig = figs[-1]
    ax1, ax2 = fig.axes[:2]
    from matplotlib.colors import to_hex

    tier = {
        ln.get_label(): (to_hex(ln.get_color()), ln.get_linewidth(), ln.get_linestyle()) for ln in ax1.lines
    }
    link = {
        ln.get_label(): (to_hex(ln.get_color()), ln.get_linewidth(), ln.get_linestyle()) for ln in ax2.lines
    }
    assert set(tier) == {"GPU", "host", "SSD"} and link
    for series in (tier, link):
        for name, (c, _, _) in series.items():
            assert c == to_hex(PLOT_COLOURS[name]), name
        widths = [w for _, w, _ in series.values()]
        assert widths == sorted(widths, reverse=True) and len(set(widths)) == len(widths)
        assert len({s for _, _, s in series.values()}) == len(series)
    assert not {c for c, _, _ in tier.values()} & {c for c, _, _ in link.values()}
    assert len({to_hex(c) for c in PLOT_COLOURS.values()}) == len(PLOT_COLOURS)
    real_close(fig)
