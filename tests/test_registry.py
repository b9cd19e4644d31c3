"""The policy registry, the run specification and one results schema (issue 17).

The central test registers a policy of its own (a hint planner that prefetches every kernel's
inputs two kernels ahead, on the page engine) inside the test, and runs it through `run`, a
sweep, the results store and a figure without touching any other file."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from g10fast import policies
from g10fast.engine.page import PageMode
from g10fast.errors import InputError
from g10fast.policies import PolicyRecord

ROOT = Path(__file__).resolve().parents[1]
ARTIFACT = ROOT.parent / "shared" / "g10-artifact"


# ---------------------------------------------------------------------------------------------
# a policy of our own: one planner function, one options class, one record


@dataclasses.dataclass(frozen=True)
class AheadOptions:
    ahead: int = 2  # kernels of look-ahead


def ahead_planner(ctx):
    from g10fast.planner.plan import MigrationPlan

    w = ctx.workload
    K = w.num_kernels
    rows = []
    for k in range(K):
        target = (k + ctx.options.ahead) % K
        for t in w.inputs(target).tolist():
            rows.append((k, t, 4, 3))  # NOT_KNOWN -> IN_GPU
    h = np.asarray(rows, dtype=np.int64).reshape(-1, 4)
    return MigrationPlan(
        policy="ahead2", num_kernels=K, hints=h, emitted=h, info={"ahead": ctx.options.ahead}
    )


def ahead_mode(options, engine):
    return PageMode(is_uvm=True, use_prefetch=True, num_iteration=engine.num_iteration)


AHEAD = PolicyRecord(
    name="ahead2",
    display="Ahead-2",
    engine="page",
    plan_depends_on_host=False,
    planner=ahead_planner,
    engine_mode=ahead_mode,
    options=AheadOptions,
    paper="a test policy",
    order=70,
    colour="#000000",
)


@pytest.fixture
def ahead():
    policies.register(AHEAD)
    yield AHEAD
    policies.unregister(AHEAD.name)


def _small(policy, **kw):
    import g10fast.api as api

    return api.simulate("vit", 8, "g10-artifact", policy, overrides={"gpu.memory_gb": 0.1}, **kw)


def test_registry_lookups():
    assert policies.get("G10").name == "prefetch_lru"
    assert policies.get("base uvm").name == "lru"
    assert policies.get("G10-Host").name == "G10GDSFULL"
    assert policies.get("deepum+").name == "deepUM"
    assert policies.display("G10GDSSSD") == "G10-GDS"
    assert set(policies.DEFAULT_POLICIES) == {
        "ideal",
        "lru",
        "FlashNeuron",
        "deepUM",
        "G10GDSSSD",
        "G10GDSFULL",
        "prefetch_lru",
    }
    with pytest.raises(InputError) as e:
        policies.get("nosuch")
    assert "ideal" in str(e.value) and "prefetch_lru" in str(e.value)
    # every record says whether its plan depends on host memory (no default)
    with pytest.raises(TypeError):
        PolicyRecord(name="x", display="X", engine="page")  # noqa
    assert policies.get("prefetch_lru").plan_depends_on_host is True
    assert policies.get("deepUM").plan_depends_on_host is False


def test_options_are_checked():
    rec = policies.get("deepUM")
    assert rec.make_options({"prefetch_degree": 3}).prefetch_degree == 3
    with pytest.raises(InputError, match="prefetch_dgree.*did you mean 'prefetch_degree'"):
        rec.make_options({"prefetch_dgree": 3})
    with pytest.raises(InputError, match="must be >= 0"):
        rec.make_options({"prefetch_degree": -1})
    with pytest.raises(InputError, match="must be true or false"):
        policies.get("G10").make_options({"o3_early_exit": 1})


def test_new_policy_runs_like_any_other(ahead):
    res = _small("ahead2")
    assert res["status"] == "ok" and res["policy"] == "ahead2" and res["engine"] == "page"
    assert res["policy_options"] == {"ahead": 2}
    it = res["iterations"][res["reported"]]
    lru = _small("lru")["iterations"][0]
    ideal = it["ideal_exe_time_cycles"]
    assert ideal <= it["exe_time_cycles"]
    assert it["exe_time_cycles"] != lru["exe_time_cycles"]
    # seconds beside cycles, at the preset's clock
    assert it["exe_time_s"] == pytest.approx(it["exe_time_cycles"] / 1.2e9, rel=1e-12)
    assert it["ideal_time_s"] == pytest.approx(ideal / 1.2e9, rel=1e-12)
    # the plan is the planner's: one hint per input of the kernel two ahead
    import g10fast.api as api
    from g10fast.spec import builtin_spec
    from g10fast.run import workload_of

    w = workload_of(builtin_spec("vit", 8, "g10-artifact", "lru", overrides={"gpu.memory_gb": 0.1}))
    assert res["plan"]["hints"] == int(np.diff(w.in_ptr).sum())
    # options reach the planner
    res3 = _small("ahead2", options={"ahead": 3})
    assert res3["plan"]["ahead"] == 3
    assert api.DEFAULT_POLICIES == policies.DEFAULT_POLICIES


@pytest.mark.skipif(not (ARTIFACT / "frontend" / "Nets").is_dir(), reason="no G10 artifact")
def test_new_policy_through_sweep_store_and_figure(ahead, tmp_path):
    from g10fast.figures.data import Reference, Results
    from g10fast.figures.plots import make_display
    from g10fast.run import run
    from g10fast.sweep.matrix import expand_matrix_dict, resolve_points
    from g10fast.sweep.runner import run_sweep

    matrix = {"group": [{"name": "mine", "models": ["BERT"], "batch": [256], "policies": ["Ahead-2"]}]}
    pts = resolve_points(expand_matrix_dict(matrix), ARTIFACT)
    assert [p.point.policy for p in pts] == ["ahead2"] and pts[0].config is None
    assert pts[0].label == "BERT/256-ahead2"
    store = tmp_path / "s.h5"
    summary = run_sweep(pts, str(store), workers=0)
    assert summary.text()
    results = Results(str(store))
    st = results.get("BERT", 256, "ahead2")
    direct = run(pts[0].spec)
    assert st["exe"] == direct["iterations"][direct["reported"]]["exe_time_cycles"]
    assert 0 < st["ideal"] < st["exe"]
    fig = make_display(11, results, Reference(None))
    assert "ahead2" in fig.data["series"]
    g = [k for k in fig.data["values"] if k[1] == "ahead2" and fig.data["values"][k] is not None]
    assert len(g) == 1 and fig.data["values"][g[0]] == pytest.approx(st["ideal"] / st["exe"])
    fig.plot()
    labels = [t.get_text() for t in fig.figure.axes[0].get_legend().get_texts()]
    assert "Ahead-2" in labels
    # a rerun finds the stored point and does nothing
    again = run_sweep(pts, str(store), workers=0)
    assert "1 already" in again.text() or again.done == 0 or "skipped" in again.text()


def test_runspec_round_trip_and_hash():
    from g10fast.spec import RunSpec, builtin_spec

    s = builtin_spec("bert-base", 8, "h100-80-pcie5", "deepUM", options={"prefetch_degree": 4})
    d = json.loads(json.dumps(s.to_dict()))
    t = RunSpec.from_dict(d)
    assert t == s and t.hash() == s.hash()
    assert s.policy.options.prefetch_degree == 4
    assert s.system.name == "h100-80-pcie5" and s.system.host_link_gbps == 50.0
    u = builtin_spec("bert-base", 8, "h100-80-pcie5", "deepUM")
    assert u.hash() != s.hash()
    # G10-GDS runs with no host memory, as genconfigs.py writes it
    assert builtin_spec("bert-base", 8, "h100-80-pcie5", "G10-GDS").system.host_memory_gb == 0.0


def test_a100_preset_runs_on_the_page_engine():
    """The artifact's start-up check SSD <= CPU is the artifact's, not the engine's: the
    bundled a100-80-pcie4 preset (SSD 26 GB/s beside a 25 GB/s host link) runs."""
    import g10fast.api as api

    res = api.simulate("vit", 8, "a100-80-pcie4", "lru", overrides={"gpu.memory_gb": 0.1})
    assert res["status"] == "ok"
    assert res["system"]["ssd_cap"] > res["system"]["cpu_cap"]


@pytest.mark.skipif(not (ARTIFACT / "frontend" / "Nets").is_dir(), reason="no G10 artifact")
def test_g10_config_and_spec_give_the_same_result():
    from g10fast.config import genconfig
    from g10fast.run import run
    from g10fast.spec import from_g10_config, to_g10_config

    cfg = genconfig(ARTIFACT, "BERT", 128, "deepUM")
    spec = from_g10_config(cfg)
    assert spec.policy.name == "deepUM" and spec.policy.options.prefetch_degree == 8
    back = to_g10_config(spec)
    for k in (
        "prefetch_degree",
        "migration_policy",
        "eviction_policy",
        "use_prefetch",
        "GPU_PCIe_bandwidth_GBps",
        "CPU_memory_line_GB",
        "num_iteration",
        "nn_model_input_file",
        "orig_kernel_time_file",
    ):
        assert getattr(back, k) == getattr(cfg, k), k
    a, b = run(cfg), run(spec)
    assert a["iterations"] == b["iterations"]


def _cli(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "g10fast.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        timeout=600,
    )


def test_cli_policies_presets_json():
    p = _cli("policies", "--json")
    assert p.returncode == 0, p.stderr
    rows = {r["name"]: r for r in json.loads(p.stdout)}
    assert rows["prefetch_lru"]["display"] == "G10" and rows["prefetch_lru"]["engine"] == "page"
    assert rows["deepUM"]["options"] == {"prefetch_degree": 8}
    assert rows["G10GDSSSD"]["engine"] == "tensor"
    p = _cli("presets", "--json")
    assert p.returncode == 0, p.stderr
    assert {r["name"] for r in json.loads(p.stdout)} >= {
        "g10-artifact",
        "a100-80-pcie4",
        "h100-80-pcie5",
        "gh200-c2c",
    }


def test_cli_builtin_run_without_toml():
    p = _cli(
        "run",
        "--model",
        "vit",
        "--batch",
        "8",
        "--system",
        "g10-artifact",
        "--policy",
        "deepUM",
        "--option",
        "prefetch_degree=2",
        "--json",
    )
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert r["policy"] == "deepUM" and r["policy_options"] == {"prefetch_degree": 2}
    assert r["model"] and r["batch_size"] == 8 and r["system_preset"] == "g10-artifact"


def test_cli_bad_policy_lists_ideal():
    p = _cli("run", "--model", "vit", "--policy", "nosuch")
    assert p.returncode == 2
    assert "ideal" in p.stderr and "Traceback" not in p.stderr


@pytest.mark.skipif(not (ARTIFACT / "frontend" / "Nets").is_dir(), reason="no G10 artifact")
def test_cli_config_file_refuses_model_and_batch_and_says_policy_override(tmp_path):
    cfgf = ARTIFACT / "src" / "configs" / "BERT" / "128-sim_lru.config"
    p = _cli("run", str(cfgf), "--batch", "256")
    assert p.returncode == 2 and "--batch" in p.stderr and "Traceback" not in p.stderr
    p = _cli("run", str(cfgf), "--model", "VIT")
    assert p.returncode == 2 and "--model" in p.stderr
    p = _cli("run", str(cfgf), "--policy", "ideal")
    assert p.returncode == 0, p.stderr
    assert "policy ideal (--policy) instead of the config file's lru" in p.stdout
    assert "policy ideal" in p.stdout


def test_toml_typo_names_the_key(tmp_path):
    f = tmp_path / "run.toml"
    f.write_text('[workload]\nmodle = "bert-base"\nbatch = 8\n')
    p = _cli("run", str(f))
    assert p.returncode == 2
    assert "unknown key 'modle' in [workload]" in p.stderr and "did you mean 'model'" in p.stderr
    assert str(f) in p.stderr


def test_run_file_negative_value_names_the_file(tmp_path):
    f = tmp_path / "run.toml"
    f.write_text(
        '[workload]\nmodel = "vit"\nbatch = 8\n[system]\npreset = "g10-artifact"\n'
        '[system.overrides]\n"host.link_gbps" = -3.0\n'
    )
    p = _cli("run", str(f))
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "host.link_gbps" in p.stderr


def test_import_order_follows_the_data_flow():
    """No module imports from a later stage of the flow, imports inside functions included
    (ast.walk sees every import): every module of g10fast/ has a stage here, so a new one must
    say where it stands. A dotted key gives a module or package inside another its own stage
    (the longest key that prefixes a module's name wins): the results schema sits below the
    engines; the engines' runners (engine/*/run.py) and the swap engine, which run the
    offset-level allocators, sit above alloc; the engine registry and every record.py at the
    engines' stage."""
    import ast

    stage = {
        "errors": 0,
        "atomic": 0,
        "progress": 0,
        "system": 0,
        "locations": 0,
        "jit": 0,
        "aot": 0,
        "datadir": 0,
        "config": 1,
        "hardware": 2,
        "workload": 2,
        "analysis": 3,
        "planner": 4,
        "results": 4.5,
        "alloc.free_runs": 4.8,
        "engine": 5,
        "trace_kernels": 5,
        "alloc": 5.5,
        "engine.page.run": 5.7,
        "engine.tensor.run": 5.7,
        "engine.driver.run": 5.7,
        "engine.ranks.run": 5.7,
        "engine.swap": 5.7,
        "engine.swap.record": 5,
        "resources": 6,
        "policies": 6,
        "spec": 7,
        "trace": 7,
        "trace_ranges": 7.2,
        "perfetto": 7.5,
        "run": 8,
        "memory_source": 8.5,
        "capture": 8.5,
        "sweep": 9,
        "figures": 10,
        "api": 11,
        "validate": 11.5,
        "warm": 11.5,
        "cli": 12,
        "__main__": 12,
    }

    def stage_of(name):
        parts = name.split(".")
        for n in range(len(parts), 0, -1):
            if ".".join(parts[:n]) in stage:
                return stage[".".join(parts[:n])]
        return None

    assert stage_of("engine.page.run") == 5.7 and stage_of("engine.page.kernels") == 5
    assert stage_of("engine.swap.record") == 5 and stage_of("engine.swap.hints") == 5.7
    bad = []
    for f in (ROOT / "g10fast").rglob("*.py"):
        rel = f.relative_to(ROOT / "g10fast")
        if rel.parts == ("__init__.py",):
            continue
        here = ".".join(rel.parts).removesuffix(".py").removesuffix(".__init__")
        assert stage_of(here) is not None, f"g10fast/{rel}: give its stage in this test"
        for node in ast.walk(ast.parse(f.read_text())):
            mods = []
            if isinstance(node, ast.ImportFrom):
                if node.level:  # relative: resolve against the package
                    base = list(rel.parts[:-1])[: len(rel.parts) - node.level]
                    m = ".".join(["g10fast", *base] + ([node.module] if node.module else []))
                else:
                    m = node.module or ""
                # `from a.b import c`: c may be a module with a stage of its own
                mods = [f"{m}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            for m in mods:
                parts = m.split(".")
                if parts[0] != "g10fast" or len(parts) < 2:
                    continue
                other = stage_of(".".join(parts[1:]))
                if other is not None and other > stage_of(here):
                    bad.append(f"{rel} imports {m}")
    assert bad == []


def test_default_comparison_is_what_the_records_say(capsys):
    """The default comparison is the records that say so (the artifact's six and Ideal); a
    policy one registers does not join it unless its record says so; `policies --json`
    carries the flag."""
    import json

    from g10fast.cli import main

    assert policies.DEFAULT_POLICIES == (
        "ideal",
        "lru",
        "FlashNeuron",
        "deepUM",
        "G10GDSSSD",
        "G10GDSFULL",
        "prefetch_lru",
    )
    base = policies.get("lru")
    import dataclasses

    mine = dataclasses.replace(base, name="my_lru", display="My LRU", aliases=(), artifact=None)
    assert mine.in_default_comparison is True  # copied from lru: stays as given
    fresh = policies.PolicyRecord(
        name="my_page",
        display="Mine",
        engine="page",
        plan_depends_on_host=False,
        engine_mode=base.engine_mode,
    )
    assert fresh.in_default_comparison is False
    assert main(["policies", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert {n for n, r in rows.items() if r["in_default_comparison"]} == set(policies.DEFAULT_POLICIES)
