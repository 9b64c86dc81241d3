"""The recipe's switches (entry.yaml ``switches``) and a study's placements, without Docker:
what the runner passes for them, how a run of a variant is recorded, and that nothing that
counts (the leaderboard, the claims, a Slurm resubmission, a verified plan) takes a variant
for the entry's own recipe. The studies themselves run in tests/test_studies.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from runner.errors import UserError
from runner.manifest import load_entry
from runner.options import ReproduceOptions
from runner.plan import RunData, RunPlan, SeedRun, make_plan

REPO = Path(__file__).resolve().parent.parent
ENTRY = REPO / "entries" / "mnist-cnn-cpu"



def _one_run(plan: RunPlan, seed: int, result_dir: Path, scratch: Path) -> SeedRun:
    """One run of ``plan``, resolved as the shared stages would (no GPU, an image, data)."""
    return plan.resolved(gpus=0, backends=(), image="img", data=RunData(scratch, scratch, "sha256:0")).for_run(
        seed, result_dir, scratch)

def test_the_default_entry_declares_its_optimizations_in_order():
    entry = load_entry(ENTRY)
    assert [(s.name, s.kind) for s in entry.switches] == [
        ("bf16", "hardware"), ("one-cycle", "software"), ("label-smoothing", "statistical"),
        ("channels-last", "software"), ("large-batch", "statistical")]
    bf16 = entry.switches[0]
    assert bf16.env == "RUNNER_SWITCH_BF16" and bf16.host_cpu_flags == ("amx_bf16", "avx512_bf16")
    assert entry.switches[-1].batch_size == 64 and entry.switches[-1].env is None
    # Its training code reads every variable its manifest names, and nothing else of the namespace.
    code = (ENTRY / "train.py").read_text()
    for s in entry.switches:
        if s.env:
            assert f'switch("{s.env.removeprefix("RUNNER_SWITCH_")}")' in code


def test_a_switch_left_on_passes_nothing_and_one_turned_off_passes_its_variable(tmp_path):
    plain = _one_run(make_plan(ENTRY, ReproduceOptions(seed=1)), 1, tmp_path, tmp_path)
    assert not [k for k in plain.train_env() if k.startswith(("RUNNER_SWITCH_", "RUNNER_HP_"))]
    assert plain.variant is None and plain.hyperparameters == {}
    off = make_plan(ENTRY, ReproduceOptions(seed=1, switches_off=("large-batch", "label-smoothing")))
    env = _one_run(off, 1, tmp_path, tmp_path).train_env()
    assert env["RUNNER_SWITCH_LABEL_SMOOTHING"] == "0" and "RUNNER_SWITCH_BF16" not in env
    # The batch switch is a declared hyperparameter: batch 64, the learning rate scaled linearly.
    assert env["RUNNER_HP_GLOBAL_BATCH_SIZE"] == "64" and float(env["RUNNER_HP_LR"]) == pytest.approx(0.05)
    assert off.hyperparameters == {"global_batch_size": "64", "lr": "0.05"}
    assert off.variant == {"switches_off": ["label-smoothing", "large-batch"]}  # the manifest's order
    # The runner's own variables are not the switches' to set.
    assert env["RUNNER_SEED"] == "1" and env["RUNNER_SMOKE"] == "0"


def test_an_unknown_switch_or_a_clash_with_the_chosen_batch_is_refused():
    with pytest.raises(UserError, match="declares no switch 'fp8'") as err:
        make_plan(ENTRY, ReproduceOptions(switches_off=("fp8",)))
    assert "bf16, one-cycle" in err.value.fix
    with pytest.raises(UserError, match="both choose the batch size"):
        make_plan(ENTRY, ReproduceOptions(switches_off=("large-batch",),
                                          hyperparameters={"global_batch_size": "128", "lr": "0.1"}))


def test_a_placement_and_switches_survive_the_plan_a_slurm_task_or_node_agent_reads(tmp_path):
    plan = make_plan(ENTRY, ReproduceOptions(seed=5, smoke=True, switches_off=("bf16",), nodes=2,
                                             processes_per_node=1))
    assert (plan.entry.nodes, plan.entry.processes_per_node, plan.entry.world_size) == (2, 1, 2)
    plan = _one_run(plan, 5, tmp_path / "run", tmp_path)
    (tmp_path / "run").mkdir()
    plan.write(tmp_path / "run")
    back = RunPlan.read(tmp_path / "run")
    assert back.to_dict() == plan.to_dict() and back.train_env() == plan.train_env()
    assert back.entry.world_size == 2 and back.variant == plan.variant == {
        "switches_off": ["bf16"], "nodes": 2, "processes_per_node": 1}
    # The manifest's own placement is no variant.
    assert make_plan(ENTRY, ReproduceOptions(nodes=1, processes_per_node=1)).variant is None


def test_the_lesion_and_factor_variants_follow_the_declared_order():
    from runner.study.lesion import reference, variants

    switches = list(load_entry(ENTRY).switches[:3])
    lesion = variants("lesion", switches)
    assert [(v.label, v.off) for v in lesion] == [
        ("full recipe", ()), ("without bf16", ("bf16",)), ("without one-cycle", ("one-cycle",)),
        ("without label-smoothing", ("label-smoothing",))]
    factors = variants("factors", switches)
    assert [(v.label, v.off) for v in factors] == [
        ("every switch off", ("bf16", "one-cycle", "label-smoothing")),
        ("+ bf16", ("one-cycle", "label-smoothing")), ("+ one-cycle", ("label-smoothing",)),
        ("+ label-smoothing (full recipe)", ())]
    assert reference("lesion", lesion).off == reference("factors", factors).off == ()


def test_a_hardware_switch_has_no_effect_on_a_host_without_its_units():
    bf16 = load_entry(ENTRY).switches[0]
    assert bf16.no_effect_on(["avx2", "fma", "avx512_bf16"]) is None
    assert bf16.no_effect_on(["avx2", "amx_bf16"]) is None
    assert "no effect on this host" in bf16.no_effect_on(["avx2", "avx512f"])
    assert load_entry(ENTRY).switches[1].no_effect_on([]) is None  # no host condition: always an effect


def test_accuracy_at_a_time_is_the_last_evaluation_made_by_then(tmp_path):
    from runner.study.lesion import accuracy_at

    (tmp_path / "curve.tsv").write_text("epoch\thours\ttop1Accuracy\n1\t0.001\t97.50\n2\t0.002\t99.10\n")
    assert accuracy_at(tmp_path, 3.0) is None  # no evaluation in the first 3.6 s
    assert accuracy_at(tmp_path, 3.6) == accuracy_at(tmp_path, 7.1) == 97.5
    assert accuracy_at(tmp_path, 7.2) == 99.1


@pytest.mark.parametrize("text, flag", [("1,x", "--processes"), ("0,2", "--nodes"), (",", "--processes")])
def test_scaling_counts_are_checked_and_always_hold_one_process(text, flag):
    from runner.study.scaling import parse_counts, placements

    with pytest.raises(UserError, match=flag):
        parse_counts(text, flag)
    assert parse_counts("4,2", "--processes") == [1, 2, 4]
    assert placements([1, 2], [1, 2]) == [(1, 1), (1, 2), (2, 1)]  # one 1 x 1 point serves both series


# -- a variant never counts as the entry's recipe ----------------------------------------------

def test_a_variant_is_named_for_the_leaderboard_and_the_claims():
    from runner.claims import variant_problem

    assert variant_problem(None) is None
    assert variant_problem({"switches_off": ["bf16", "one-cycle"]}) == \
        "a study variant (switches off: bf16, one-cycle), not the entry's recipe"
    assert "2 node(s) x 1 process(es)" in variant_problem({"nodes": 2, "processes_per_node": 1})
    assert variant_problem(["bf16"]) == "its study-variant record is malformed"


def test_a_signed_variant_run_is_no_reproduction_and_is_not_held_against_the_claim(tmp_path, monkeypatch):
    from securesystemslib.signer import CryptoSigner
    from synthetic_result import make_result_folder, stage_mnist_stand_in

    from runner.bundle import make_bundle
    from runner.claims import result_claim
    from runner.fingerprint import capture_host
    from runner.leaderboard.reproductions import read_reproduction
    from runner.verify.verdict import judge

    monkeypatch.setenv("RUNNER_HOME", str(tmp_path / "home"))
    staged, host = stage_mnist_stand_in(tmp_path / "home"), capture_host()
    signer = CryptoSigner.generate_ed25519()
    seen = {}
    for seed, name, variant in ((0, "20261122T010203Z-s0-aaaaaa", None),
                                (1, "20261122T010204Z-s1-bbbbbb", {"switches_off": ["bf16"]})):
        folder = make_result_folder(tmp_path / "results" / "mnist-cnn-cpu" / name, staged, host, seed=seed)
        data = json.loads((folder / "result.json").read_text())
        data.update(conforming=True, nonconforming_reasons=[])
        data["entry"]["claimed"] = {"tta_seconds": 5.3}
        if variant:
            data["variant"] = variant
        (folder / "result.json").write_text(json.dumps(data))
        make_bundle(folder, signer)
        seen[name] = (read_reproduction(folder, judge(folder, [signer.public_key])), result_claim(folder))
    (plain, plain_claim), (lesioned, lesioned_claim) = seen.values()
    assert plain.counts and plain_claim.variant is None
    assert lesioned.verdict.verified and not lesioned.counts
    assert lesioned.reason.startswith("a study variant (switches off: bf16)")
    assert not lesioned_claim.comparable and "not compared: a study variant" in lesioned_claim.why_not
    assert lesioned_claim.profile == plain_claim.profile  # the same claim, only not compared


def test_a_plan_that_turned_switches_off_must_be_the_results_variant():
    from runner.verify.plan import _variant_problems

    plan = {"options": {"switches_off": ["bf16"], "nodes": 2, "processes_per_node": 1}}
    assert _variant_problems(plan, {"variant": {"switches_off": ["bf16"], "nodes": 2, "processes_per_node": 1}}) == []
    assert _variant_problems(plan, {})[0].startswith("switches off ['bf16']")  # a variant passed off as the recipe
    assert _variant_problems({"options": {}}, {"variant": {"switches_off": ["bf16"]}})
    assert _variant_problems({"options": {"switches_off": ["bf16"]}},
                             {"variant": {"switches_off": ["bf16"], "nodes": 2}})
    assert _variant_problems({"options": {}}, {}) == []  # a result from before switches


def test_verify_says_a_variant_is_never_a_claim():
    """The verdict's reason (runner verify exits 3 for a verified variant: it never counts)."""
    from runner.verify.verdict import standing_problems

    result = {"smoke": False, "conforming": True, "status": "complete", "variant": {"switches_off": ["one-cycle"]}}
    assert standing_problems(result) == ["a study variant (switches off: one-cycle), not the entry's recipe"]


def test_a_slurm_resubmission_skips_only_complete_runs_of_the_same_variant(tmp_path):
    from runner.slurm.gather import complete_runs

    for name, seed, variant in (("a", 1, None), ("b", 2, {"switches_off": ["bf16"]})):
        (tmp_path / name).mkdir()
        (tmp_path / name / "result.json").write_text(json.dumps(
            {"seed": seed, "status": "complete", "smoke": False, **({"variant": variant} if variant else {})}))
    assert set(complete_runs(tmp_path, [1, 2], False)) == {1}
    assert set(complete_runs(tmp_path, [1, 2], False, {"switches_off": ["bf16"]})) == {2}


# -- hostile switches: each refused by name before any work (more in tests/hostile) --------------

@pytest.fixture
def entry_copy(tmp_path):
    dst = tmp_path / "mnist-cnn-cpu"
    shutil.copytree(ENTRY, dst)
    return dst


def _switches(folder: Path, switches: list) -> None:
    data = yaml.safe_load((folder / "entry.yaml").read_text())
    data["switches"] = switches
    (folder / "entry.yaml").write_text(yaml.safe_dump(data))


@pytest.mark.parametrize("switches, needle", [
    ([{"name": "x", "kind": "magic", "disable": {"env": "RUNNER_SWITCH_X"}}], "switches.0.kind"),
    ([{"name": "x", "kind": "software", "disable": {"env": "RUNNER_SEED"}}], "outside the run contract's namespace"),
    ([{"name": "x", "kind": "software", "disable": {"env": "LD_PRELOAD"}}], "outside the run contract's namespace"),
    ([{"name": "x", "kind": "software", "disable": {"env": "RUNNER_SWITCH_x"}}],
     "outside the run contract's namespace"),
    ([{"name": "x", "kind": "software", "disable": {"env": "RUNNER_SWITCH_X"}},
      {"name": "x", "kind": "software", "disable": {"env": "RUNNER_SWITCH_Y"}}], "names switch 'x' twice"),
    ([{"name": "x", "kind": "software", "disable": {"env": "RUNNER_SWITCH_X"}},
      {"name": "y", "kind": "software", "disable": {"env": "RUNNER_SWITCH_X"}}], "turns off two switches"),
    ([{"name": "x", "kind": "software", "disable": {"global_batch_size": 256}}], "the recipe's own batch size"),
    ([{"name": "x", "kind": "software", "disable": {}}], "switches.0.disable"),
    ([{"name": "x", "kind": "software", "disable": {"env": "RUNNER_SWITCH_X", "global_batch_size": 8}}],
     "switches.0.disable"),
    ([{"name": "X Y", "kind": "software", "disable": {"env": "RUNNER_SWITCH_X"}}], "switches.0.name"),
])
def test_a_hostile_switch_is_refused_naming_the_field(entry_copy, switches, needle):
    _switches(entry_copy, switches)
    with pytest.raises(UserError) as err:
        load_entry(entry_copy)
    assert needle in err.value.problem and "\n" not in str(err.value.problem)


def test_a_batch_switch_needs_declared_hyperparameters(entry_copy):
    data = yaml.safe_load((entry_copy / "entry.yaml").read_text())
    del data["hyperparameters"]
    (entry_copy / "entry.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(UserError, match="declares no hyperparameters"):
        load_entry(entry_copy)
