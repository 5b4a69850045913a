"""Recording a model's truncated-normal calls (`harness.model_calls`): who made each call, what the
parameter finally holds, the outermost call wins, nothing is imported that the model does not use;
and how a recorded call reaches its judge (`Case.sampler` -> `HarnessSession.candidates_for`,
`Case.drawn_in` -> `harness.runner.drawn_then_cast`). Deterministic: no statistics here."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from harness.cases import CaseSpecError, parse_case_spec
from harness.session.options import OptionError
from harness.session.planner import plan_run
from harness.model_calls import RecordingError, cases_from
from harness.runner.drawn_then_cast import DrawnCandidate, as_drawn

ROOT = Path(__file__).resolve().parents[3]

MODELS = '''
import torch
from torch import nn


def helper(tensor, mean, std, a, b):
    return nn.init.trunc_normal_(tensor, mean, std, a, b)


def casts():
    model = nn.ModuleDict({"lin": nn.Linear(8, 16).to(torch.bfloat16), "emb": nn.Embedding(32, 8),
                           "out": nn.Linear(4, 4).to(torch.bfloat16)})
    w = model["lin"].weight.data.float()  # a float32 copy, cast back with copy_
    nn.init.trunc_normal_(w, std=0.02)
    model["lin"].weight.data.copy_(w)
    nn.init.trunc_normal_(model["emb"].weight, std=0.02)  # initialized, then the module cast
    model["emb"].to(torch.bfloat16)
    w2 = torch.empty(4, 4)  # a fresh float32 tensor, assigned as .data
    nn.init.trunc_normal_(w2, std=0.5, a=-1.0, b=1.0)
    model["out"].weight.data = w2.to(torch.bfloat16)
    return model


def helped():
    lin = nn.Linear(8, 16)
    helper(lin.weight, 0.0, 1.0, -2.0, 2.0)
    nn.init.trunc_normal_(lin.bias, std=1.0)
    return lin


def overwritten():
    lin = nn.Linear(8, 16)
    nn.init.trunc_normal_(lin.weight, std=1.0)
    nn.init.trunc_normal_(lin.weight, std=2.0)  # the values the model keeps
    return lin


KEPT = {"trunc_normal_": nn.init.trunc_normal_}  # a reference taken at import, as transformers keeps


def kept():
    lin = nn.Linear(4, 8).to(torch.bfloat16)
    KEPT["trunc_normal_"](lin.weight, std=0.02)
    return lin


def no_module():
    nn.init.trunc_normal_(torch.empty(3, 5, dtype=torch.float16), std=0.02)
'''


@pytest.fixture
def models(tmp_path) -> str:
    path = tmp_path / "models.py"
    path.write_text(MODELS)
    return str(path)


def test_a_cast_call_is_judged_in_the_dtype_the_parameter_holds(models):
    cases = {c.origin.parameters: c for c in cases_from(f"{models}:casts")}
    for name, std in (("lin.weight", 0.02), ("emb.weight", 0.02), ("out.weight", 0.5)):
        case = cases[(name,)]
        assert case.dtypes == ("bfloat16",) and case.drawn_in == "float32" and case.std == std
        assert case.sampler == "torch" and "drawn=float32" in case.spec
    assert parse_case_spec(cases[("lin.weight",)].spec).drawn_in == "float32"


def test_the_outermost_recorded_function_made_the_call(models):
    plain = cases_from(f"{models}:helped")
    assert [c.sampler for c in plain] == ["torch", "torch"]
    helper = f"{models}:helper"
    recorded = cases_from(f"{models}:helped", record=(helper,))
    assert [(c.sampler, c.origin.parameters) for c in recorded] == [(helper, ("weight",)),
                                                                     ("torch", ("bias",))]
    assert recorded[0].origin.function == f"{helper}(mean=0, std=1, a=-2, b=2)"


def test_a_reference_taken_at_import_is_still_recorded(models):
    (case,) = cases_from(f"{models}:kept")
    assert (case.sampler, case.dtypes, case.origin.parameters) == ("torch", ("bfloat16",), ("weight",))


def test_a_call_whose_values_no_parameter_keeps_is_judged_as_drawn(models):
    first, second = cases_from(f"{models}:overwritten")
    assert (first.std, first.origin.parameters) == (1.0, ())
    assert (second.std, second.origin.parameters) == (2.0, ("weight",))
    (lone,) = cases_from(f"{models}:no_module")
    assert lone.dtypes == ("float16",) and lone.drawn_in == "" and lone.origin.parameters == ()


def test_record_needs_a_python_function_with_the_five_parameters(parse, models, tmp_path):
    (tmp_path / "bad.py").write_text("def two(tensor, std):\n    pass\nVALUE = 3\n")
    for spec, says in ((f"{tmp_path / 'bad.py'}:two", "takes 2 parameter(s)"),
                       (f"{tmp_path / 'bad.py'}:VALUE", "not a Python function"),
                       (f"{tmp_path / 'bad.py'}:absent", "absent")):
        with pytest.raises(RecordingError) as info:
            cases_from(f"{models}:helped", record=(spec,))
        assert says in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(OptionError, match="--record: no --cases-from"):
        parse(record=[f"{models}:helper"])


def test_a_drawn_spec_takes_a_float_dtype_only():
    assert parse_case_spec("std=1,a=-2,b=2,drawn=float32").drawn_in == "float32"
    with pytest.raises(CaseSpecError, match="drawn='int8'"):
        parse_case_spec("std=1,a=-2,b=2,drawn=int8")


def test_a_drawn_candidate_draws_in_its_dtype_then_casts():
    from candidates import resolve

    exact = resolve("exact")
    drawn = as_drawn(exact, "float32")
    assert isinstance(drawn, DrawnCandidate) and drawn.name == "exact" and as_drawn(exact, "") is exact
    target = torch.empty(64, 32, dtype=torch.bfloat16)
    assert drawn(target, 0.0, 0.02, -2.0, 2.0, torch.Generator().manual_seed(5)) is target
    by_hand = exact(torch.empty(64, 32), 0.0, 0.02, -2.0, 2.0, torch.Generator().manual_seed(5))
    assert torch.equal(target, by_hand.to(torch.bfloat16))


def test_each_recorded_call_is_judged_by_its_sampler_unless_a_candidate_is_given(parse, models):
    helper = f"{models}:helper"
    opt = parse(cases_from=[f"{models}:helped"], record=[helper], cases="normal-2sigma",
                shapes="none", paths="eager", report_dir="")
    session = plan_run(opt)
    by_case = {c.id: [k.name for k in session.candidates_for(c)] for c in session.cases}
    assert by_case["normal-2sigma"] == ["torch"]
    assert by_case["models-helped-1"] == ["torch"]
    assert [k.spec for c in session.cases if c.sampler == helper
            for k in session.candidates_for(c)] == [helper]
    assert {(p.candidate.spec, p.case.id) for p in session.groups()} == {
        ("torch", "normal-2sigma"), ("torch", "models-helped-1"), (helper, "models-helped-0")}
    opt = parse(cases_from=[f"{models}:helped"], record=[helper], candidate=["exact"],
                report_dir="")
    given = plan_run(opt)
    assert {p.candidate.name for p in given.groups()} == {"exact"}


@pytest.mark.skipif(importlib.util.find_spec("timm") is None, reason="timm is not installed")
def test_timm_calls_are_recorded_with_timms_candidates():
    cases = cases_from(str(ROOT / "examples/models/timm_vit.py") + ":build")
    samplers = {c.origin.parameters[0]: c.sampler for c in cases}
    assert samplers["pos_embed"] == "torch" and samplers["patch_embed.weight"] == "timm-tf"
    assert samplers["blocks.0.qkv.weight"] == "timm"
    tf = next(c for c in cases if c.sampler == "timm-tf")
    assert (tf.std, tf.a, tf.b) == (0.02, -0.04, 0.04)  # +-2 sigma units made absolute


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed")
def test_jax_calls_are_recorded(tmp_path):
    (tmp_path / "jax_model.py").write_text(textwrap.dedent("""
        import jax

        def build():
            jax.nn.initializers.truncated_normal(0.02)(jax.random.key(0), (6, 7), jax.numpy.float32)
            jax.random.truncated_normal(jax.random.key(1), -3.0, 3.0, (2, 3))
    """))
    init, plain = cases_from(f"{tmp_path / 'jax_model.py'}:build")
    assert (init.sampler, init.shape, init.std, init.a, init.b) == ("jax-init", (6, 7), 0.02,
                                                                    -0.04, 0.04)
    assert (plain.sampler, plain.shape, plain.std, plain.a, plain.b) == ("jax", (2, 3), 1.0, -3.0,
                                                                         3.0)


ONE_LIBRARY = {
    "torch": """
import torch
from torch import nn

def build():
    model = nn.Sequential(nn.Linear(8, 16), nn.Linear(16, 4)).to(torch.bfloat16)
    for layer in model:
        nn.init.trunc_normal_(layer.weight, std=0.02)
    return model
""",
    "timm-tf": """
import torch
from torch import nn
from examples.models.timm_vit import timm_weight_init

def build():
    model = nn.Linear(8, 16).to(torch.bfloat16)
    timm_weight_init().trunc_normal_tf_(model.weight, std=0.02)
    return model
""",
    "jax": """
import jax

def build():
    jax.random.truncated_normal(jax.random.key(1), -2.0, 2.0, (4, 6), jax.numpy.float32)
""",
    "jax-init": """
import jax

def build():
    jax.nn.initializers.truncated_normal(0.02)(jax.random.key(0), (6, 7), jax.numpy.float32)
""",
    "keras-torch": """
import keras

def build():
    keras.initializers.TruncatedNormal(mean=0.0, stddev=0.02, seed=1)((4, 8), dtype="float32")
""",
}
LIBRARY = {"torch": "torch", "timm": "timm", "timm-tf": "timm", "jax": "jax", "jax-init": "jax",
           "keras-torch": "keras", "record": "torch"}
HELPER = """
import torch
from torch import nn

def init(tensor, mean, std, a, b):
    return nn.init.trunc_normal_(tensor, mean, std, a, b)

def build():
    model = nn.Linear(8, 16).to(torch.bfloat16)
    init(model.weight, 0.0, 0.02, -0.04, 0.04)
    return model
"""


def _one_library_model(sampler: str, tmp_path) -> tuple[str, tuple]:
    """(the --cases-from spec, the --record specs) of a model whose every call is `sampler`'s."""
    if sampler == "timm":
        return str(ROOT / "examples/models/timm_vit.py") + ":timm_only", ()
    (tmp_path / "one_model.py").write_text(HELPER if sampler == "record" else ONE_LIBRARY[sampler])
    spec = f"{tmp_path / 'one_model.py'}:build"
    return spec, ((f"{tmp_path / 'one_model.py'}:init",) if sampler == "record" else ())


def _plan_facts(spec: str, record: tuple, profile: str) -> dict:
    """What a run of a model plans at `profile`, unsharded and on 2 ranks (the recorded samplers,
    the groups' candidates, the sharded groups and their skip reasons), in a fresh process with
    the repository on its path: keras picks its backend at import (torch here)."""
    code = textwrap.dedent(f"""
        import json
        from tests.unit.harness.conftest import _parse
        from harness.session.planner import plan_run

        out = {{}}
        for sizes in ("1", "1,2"):
            opt = _parse(cases_from=[{spec!r}], record={list(record)!r}, profile={profile!r},
                         world_sizes=sizes, report_dir="")
            session = plan_run(opt)
            groups = list(session.groups())
            sharded = [g for g in groups if g.layout is not None]
            out[sizes] = {{
                "candidates": sorted(c.spec for c in session.candidates),
                "samplers": sorted({{c.sampler for c in session.cases}}),
                "judged": sorted({{g.candidate.spec for g in groups}}),
                "cases": sorted({{g.case.id for g in groups}}),
                "sharded": sorted({{g.case.id for g in sharded}}),
                "sharded_dtypes": sorted({{str(g.dtype) for g in sharded}}),
                "sharded_skips": sorted({{str(session.skip_reason(g.candidate, g.dtype, g.device,
                                                                 g)) for g in sharded}}),
            }}
        print(json.dumps(out))
    """)
    env = dict(os.environ, PYTHONPATH=str(ROOT), KERAS_BACKEND="torch")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("profile", ["smoke", "pr"])
@pytest.mark.parametrize("sampler", ["torch", "timm", "timm-tf", "jax", "jax-init", "keras-torch",
                                     "record"])
def test_a_model_calling_one_library_only_is_planned_with_its_sampler(sampler, profile, tmp_path):
    """A model whose every call goes to one recorded function (each library the recording knows,
    and a --record function) plans a run of that sampler alone, at each profile and on 2 ranks:
    no default candidate it did not call (the run that crashed looking one up), its sharded
    groups are its own calls drawn with its sampler, in their parameters' dtype, or skipped with
    the reason a library's array cannot fill a DTensor parameter."""
    library = LIBRARY[sampler]
    if library != "torch" and importlib.util.find_spec(library) is None:
        pytest.skip(f"{library} is not installed (requirements-libraries.txt, "
                    "requirements-timm.txt)")
    spec, record = _one_library_model(sampler, tmp_path)
    facts = _plan_facts(spec, record, profile)
    want = record[0] if sampler == "record" else sampler
    for sizes, plan in facts.items():
        assert plan["candidates"] == plan["samplers"] == plan["judged"] == [want], (sizes, plan)
        assert plan["cases"] and all(c.startswith(("one_model", "timm_vit")) for c in plan["cases"])
    plan = facts["1,2"]
    assert plan["sharded"] == sorted(c for c in plan["cases"] if ":" not in c and "+" not in c)
    functional = sampler in ("jax", "jax-init", "keras-torch")
    assert plan["sharded_dtypes"] == (["torch.float32"] if functional else ["torch.bfloat16"])
    if functional:
        assert all("cannot fill a sharded (DTensor) parameter" in r for r in plan["sharded_skips"])
    else:
        assert plan["sharded_skips"] == ["None"], plan["sharded_skips"]


def test_a_cast_call_is_left_out_of_the_sharded_draw_saying_why(parse, models):
    opt = parse(cases_from=[f"{models}:casts"], world_sizes="1,2", report_dir="")
    session = plan_run(opt)
    sharded = [g for g in session.groups() if g.layout is not None]
    assert sharded and {g.candidate.spec for g in sharded} == {"torch"}
    reasons = {session.skip_reason(g.candidate, g.dtype, g.device, g) for g in sharded}
    assert all(r and "drawn in float32 and cast into bfloat16" in r for r in reasons), reasons


def test_a_model_that_makes_no_call_is_a_one_line_option_error(parse, tmp_path):
    (tmp_path / "silent.py").write_text("from torch import nn\n\ndef build():\n"
                                        "    return nn.Linear(4, 4)\n")
    with pytest.raises(OptionError) as info:
        parse(cases_from=[f"{tmp_path / 'silent.py'}:build"])
    assert "it made no truncated-normal call" in str(info.value) and "\n" not in str(info.value)


def test_recording_a_torch_model_imports_no_library():
    code = textwrap.dedent(f"""
        import sys
        from harness.model_calls import cases_from
        cases = cases_from({str(ROOT / 'examples/models/vit.py') + ':build'!r})
        assert cases and all(c.sampler == "torch" for c in cases)
        print(sorted(m for m in ("timm", "jax", "keras", "mlx", "numpyro") if m in sys.modules))
    """)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"
