"""`python -m reports compare BASE NEW`: the PR gate.

BASE and NEW are report directories, possibly from different machines and different candidates
(main's build vs the PR's), so rows are matched *candidate-agnostically* on (case, dtype, check,
device type): `cuda:0` and `cuda:1` are both "cuda", and the candidate's name and version are
ignored. Where several rows share a key (two candidates in one run, two GPUs), the key's verdict
is the worst of them and its stage-1 p-value the smallest. The case column carries the layout of
a sharded group, the shape class and the execution path where they are not the grid's
(``case@w2-shard0``, ``case:61x67``, ``case+compile``), so they are part of the key too.

Exit status:

* 2: BASE or NEW cannot be trusted (`reports.report.read_report`: unreadable, truncated, empty,
  schema-less, parquet and csv disagreeing, a file not matching its manifest's sha256); one line
  on stderr naming the file and the problem, no traceback;
* 1: NEW fails (fail or error) a key that BASE passed, at a level the gate counts
  (``--fail-on harmful|fine|any``, default any: every level; a key whose failure rose from
  below the gate to it counts too); or **lost coverage**: a key BASE judged
  (pass, fail, xfail) that NEW did not (missing, skipped, or an error where BASE failed), unless
  ``--allow-missing GLOB`` names it; or NEW is partial (its run did not finish, or has fewer rows
  than tests collected); or, with ``--gate-throughput``, a case's throughput dropped more than
  `THROUGHPUT_DROP` times;
* 0 otherwise (keys only in NEW are listed but do not gate: BASE has no verdict to regress from;
  a partial BASE is a warning).

A new failure below the gate (``--fail-on harmful``: a fine-structure or api row, by NEW's
``level`` column, `reports.defects`) is listed in a section of its own and does not gate; a row no
diagnosis rated (a report written before the levels) counts at every setting. Nothing about a
lost, partial or untrusted report depends on the gate.

The markdown on stdout lists new failures, fixed keys, stage-1 p-values that became suspicious
(< alpha_suspect in NEW, not in BASE), effects that moved by more than `EFFECT_MDES` times the
larger MDE, and candidate time per sample that changed by more than `SPEED_RATIO` (per device type
overall). Per case it warns about throughput drops of more than `THROUGHPUT_DROP` times: the
candidate's samples/s relative to torch's ``normal_`` on the same tensor, device and machine
(`speed_vs_normal`), so that two runs on different machines compare; reports written before that
column existed fall back to time per sample (where both sides spent `MIN_SECONDS` in the case).
"""

from __future__ import annotations

import fnmatch
import math

import numpy as np
import pandas as pd

from record.store import normalize

from .defects import DEFAULT_FAIL_ON, FAIL_ON, LEVEL_NAMES, gated, level_of
from .overview import RANK, effect_text, fmt_num, short_message, worst

KEY = ["case", "dtype", "check", "device_type"]
#: Verdicts that are a judgement of the candidate (what coverage means).
JUDGED = ("pass", "fail", "xfail")
EFFECT_MDES = 2.0  # the difference of two estimates has sd ~ 0.45 MDE: 2 MDE is not noise
SPEED_RATIO = 1.5
THROUGHPUT_DROP = 2.0  # a case this many times slower (relative to normal_) is a warning
MIN_SECONDS = 0.05  # below this per case the timing is mostly overhead
MAX_LINES = 40
FAILING = ("fail", "error")
#: A key's level is that of its gravest failing row; a row no diagnosis rated ("") ranks with
#: harmful, since every gate counts it.
LEVEL_RANK = {"harmful": 0, "": 1, "undetermined": 2, "fine": 3, "api": 4}


def _keyed(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    df["device_type"] = df["device"].astype(str).str.split(":").str[0]
    for c in ("p_value_stage1", "alpha_suspect", "effect", "mde", "candidate_s", "n_stage1", "n_stage2"):
        df[c] = pd.to_numeric(df[c], errors="coerce")
    return df


def key_text(key: tuple) -> str:
    """The key as `--allow-missing` globs see it: case/dtype/check/device_type."""
    return "/".join(str(k) for k in key)


def per_key(df: pd.DataFrame, key: list = KEY) -> pd.DataFrame:
    """One row per key: worst verdict, smallest stage-1 p, the worst row's message/effect."""
    df = _keyed(df)
    for c in key:
        df[c] = df[c].fillna("").astype(str)  # groupby would drop a missing key part
    df["_rank"] = df["verdict"].map(lambda v: RANK.get(v, 6))
    # The representative row of a key is its worst one (the failing GPU, the failing candidate).
    rep = df.sort_values("_rank", ascending=False, kind="stable").groupby(key, sort=False).head(1)
    rep = rep.set_index(key)
    g = df.groupby(key)
    out = pd.DataFrame({
        "verdict": g["verdict"].agg(worst),
        "p1": g["p_value_stage1"].min(),
        "alpha_suspect": g["alpha_suspect"].max(),
    })
    for c in ("message", "effect", "effect_unit", "mde", "candidate", "device", "repro"):
        out[c] = rep[c].reindex(out.index)
    failing = df[df["verdict"].isin(FAILING)]
    # An error row is the harness's own failure to judge: unrated, whatever its level says.
    levels = (failing["level"].map(level_of).where(failing["verdict"] == "fail", "")
              if "level" in failing.columns else pd.Series("", index=failing.index))
    graver = failing.assign(_level=levels).groupby(key)["_level"].agg(
        lambda v: min(v, key=LEVEL_RANK.__getitem__))
    out["level"] = [v if isinstance(v, str) else "" for v in graver.reindex(out.index)]
    return out


def _samples_seconds(df: pd.DataFrame, by: list) -> pd.DataFrame:
    """Candidate seconds and samples per group (stage-1 n once per case, stage-2 n once per case)."""
    df = _keyed(df)
    case_key = ["candidate", "case", "dtype", "device"]
    per_case = df.groupby(case_key).agg(s=("candidate_s", "sum"), n1=("n_stage1", "max"),
                                        n2=("n_stage2", "max")).reset_index()
    per_case["device_type"] = per_case["device"].astype(str).str.split(":").str[0]
    per_case["n"] = per_case["n1"].fillna(0) + per_case["n2"].fillna(0)
    return per_case.groupby(by).agg(s=("s", "sum"), n=("n", "sum"))


def _ns(s, n) -> float:
    return s / n * 1e9 if n and n > 0 and s > 0 else math.nan


def _label(env: dict, df: pd.DataFrame) -> str:
    cands = sorted({f"{c} {v}" if isinstance(v, str) else str(c)
                    for c, v in zip(df["candidate"], df["candidate_version"])})
    run = env.get("run_id", "?")
    return f"run {run}: {', '.join(cands)} · torch {env.get('torch', '?')} · {env.get('cpu', '?')}"


def _row_text(key, r) -> str:
    case, dtype, check, dev = key
    eff = effect_text(r)
    return f"`{case}` {dtype} {dev} **{check}**: {short_message(r.get('message'), 160)}" + (f" · {eff}" if eff else "")


def throughput_drops(base: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """Cases (case, dtype, device type) whose throughput fell more than THROUGHPUT_DROP times:
    by speed_vs_normal where both runs have it, else by time per sample."""
    def speed(df):
        df = _keyed(df)
        if "speed_vs_normal" not in df.columns:
            return pd.Series(dtype=float)
        df["speed_vs_normal"] = pd.to_numeric(df["speed_vs_normal"], errors="coerce")
        return df.groupby(["case", "dtype", "device_type"])["speed_vs_normal"].min()

    rows = {}
    sb, sn = speed(base), speed(new)
    both = pd.concat([sb.rename("base"), sn.rename("new")], axis=1, join="inner").dropna()
    both = both[(both["base"] > 0) & (both["new"] > 0)]
    for key, r in both.iterrows():
        rows[key] = dict(measure="samples/s ÷ normal_'s", base=r["base"], new=r["new"],
                         factor=r["base"] / r["new"])
    cb = _samples_seconds(base, ["case", "dtype", "device_type"])
    cn = _samples_seconds(new, ["case", "dtype", "device_type"])
    j = cb.merge(cn, left_index=True, right_index=True, suffixes=("_b", "_n"), how="inner")
    j = j[(j["s_b"] >= MIN_SECONDS) & (j["s_n"] >= MIN_SECONDS) & (j["n_b"] > 0) & (j["n_n"] > 0)]
    for key, r in j.iterrows():
        if key not in rows:
            per_b, per_n = r["s_b"] / r["n_b"] * 1e9, r["s_n"] / r["n_n"] * 1e9
            rows[key] = dict(measure="ns/sample", base=per_b, new=per_n, factor=per_n / per_b)
    frame = pd.DataFrame.from_dict(rows, orient="index",
                                   columns=["measure", "base", "new", "factor"])
    frame = frame[frame["factor"] > THROUGHPUT_DROP] if len(frame) else frame
    return frame.sort_values("factor", ascending=False)


def lost_coverage(b: pd.DataFrame, n: pd.DataFrame) -> pd.DataFrame:
    """Keys BASE judged that NEW did not: missing, skipped, or an error where BASE failed (an
    error where BASE passed is a new failure). Column `why`."""
    judged = b[b["verdict"].isin(JUDGED)]
    missing = judged[~judged.index.isin(n.index)].assign(why="missing in NEW")
    both = judged.join(n[["verdict", "message"]].add_suffix("_n"), how="inner")
    skipped = both[both["verdict_n"] == "skip"]
    errored = both[(both["verdict_n"] == "error") & (both["verdict"] != "pass")]
    parts = [missing,
             skipped.assign(why=[f"skipped in NEW: {short_message(m, 100)}" for m in skipped["message_n"]]),
             errored.assign(why=[f"error in NEW: {short_message(m, 100)}" for m in errored["message_n"]])]
    out = pd.concat([p.drop(columns=[c for c in ("verdict_n", "message_n") if c in p]) for p in parts])
    return out.sort_index()


def _gated(levels: pd.Series, fail_on: str) -> pd.Series:
    """Per key, whether its failure counts at the gate `fail_on` (a boolean Series)."""
    return pd.Series([gated(v, fail_on) for v in levels], index=levels.index, dtype=bool)


def compare(base: pd.DataFrame, new: pd.DataFrame, base_env: dict | None = None,
            new_env: dict | None = None, gate_throughput: bool = False, allow_missing=(),
            base_partial: str | None = None, new_partial: str | None = None,
            fail_on: str = DEFAULT_FAIL_ON) -> tuple[str, int]:
    """(markdown, exit status) for two results tables (see the module docstring).
    `allow_missing`: globs over `key_text` of keys whose loss of coverage does not gate;
    `*_partial`: why a report is not a whole run (`reports.report.Report.partial`);
    `fail_on`: the levels a new failure gates at (a key of `reports.defects.FAIL_ON`)."""
    if fail_on not in FAIL_ON:
        raise ValueError(f"fail_on: unknown {fail_on!r}; known: {', '.join(FAIL_ON)}")
    base_env, new_env = base_env or {}, new_env or {}
    base, new = normalize(base), normalize(new)  # crafted frames may lack optional columns
    b, n = per_key(base), per_key(new)
    both = b.merge(n, left_index=True, right_index=True, suffixes=("_b", "_n"), how="inner")
    failing = FAILING
    base_gated = both["verdict_b"].isin(failing) & _gated(both["level_b"], fail_on)
    # New at the gate's level: NEW fails where BASE passed, or BASE failed only below the gate.
    below_in_base = both["verdict_b"].isin(failing) & ~base_gated
    risen = both[both["verdict_n"].isin(failing) & ((both["verdict_b"] == "pass") | below_in_base)]
    new_gated = _gated(risen["level_n"], fail_on)
    regress = risen[new_gated]
    below = risen[~new_gated & (risen["verdict_b"] == "pass")]
    fixed = both[both["verdict_b"].isin(failing) & (both["verdict_n"] == "pass")]
    still = both[both["verdict_b"].isin(failing) & both["verdict_n"].isin(failing)
                 & ~both.index.isin(regress.index)]
    only_new = n[~n.index.isin(b.index)]
    unrun_fail = only_new[only_new["verdict"].isin(failing)]
    dropped = b[~b.index.isin(n.index)]

    a_n = both["alpha_suspect_n"].fillna(1e-3)
    a_b = both["alpha_suspect_b"].fillna(1e-3)
    suspicious = both[(both["p1_n"] < a_n) & ~(both["p1_b"] < a_b) & both["p1_b"].notna()
                      & ~both.index.isin(risen.index)]

    eff = both[both["effect_n"].notna() & both["effect_b"].notna()
               & (both["effect_unit_n"].fillna("") == both["effect_unit_b"].fillna(""))].copy()
    mde = np.fmax(eff["mde_n"].astype(float), eff["mde_b"].astype(float))
    eff["delta"] = eff["effect_n"] - eff["effect_b"]
    moved = eff[mde.notna() & (mde > 0) & (eff["delta"].abs() > EFFECT_MDES * mde)
                & ~eff.index.isin(risen.index) & ~eff.index.isin(fixed.index)]  # listed above

    lost = lost_coverage(b, n)
    allowed = lost[[any(fnmatch.fnmatchcase(key_text(k), g) for g in allow_missing)
                    for k in lost.index]] if len(lost) else lost
    lost = lost[~lost.index.isin(allowed.index)]

    out = ["# Conformance comparison", "",
           f"- BASE: {_label(base_env, base)}", f"- NEW: {_label(new_env, new)}", "",
           f"Matched {len(both)} (case, dtype, check, device type) keys; {len(only_new)} only in "
           f"NEW, {len(dropped)} only in BASE.", ""]
    if new_partial:
        out += [f"> **NEW is partial**: {new_partial}. A run that did not finish cannot pass the gate.", ""]
    if base_partial:
        out += [f"> warning: BASE is partial: {base_partial}; keys it lacks cannot regress.", ""]

    def section(title, frame, render):
        out.append(f"## {title} ({len(frame)})")
        out.append("")
        if not len(frame):
            out.append("none")
        for i, (key, r) in enumerate(frame.iterrows()):
            if i == MAX_LINES:
                out.append(f"- … {len(frame) - MAX_LINES} more")
                break
            out.append("- " + render(key, r))
        out.append("")

    def new_fail(key, r):
        rr = {k[:-2]: v for k, v in r.items() if k.endswith("_n")}
        level = f" [{LEVEL_NAMES[level_of(rr.get('level'))]}]" if rr.get("level") else ""
        base = ("BASE passed" if r["verdict_b"] == "pass"
                else f"BASE failed at {LEVEL_NAMES[level_of(r['level_b'])]}")
        text = _row_text(key, rr) + f"{level} ({base})"
        return text + (f" · `{rr['repro']}`" if isinstance(rr.get("repro"), str) else "")

    if fail_on != DEFAULT_FAIL_ON:
        counted = " and ".join(LEVEL_NAMES[v] for v in FAIL_ON[fail_on] if v)
        out += [f"Gate `--fail-on {fail_on}`: new failures gate at {counted} (and unrated rows); "
                f"those below are listed, not gated.", ""]
    section("New failures", regress, new_fail)
    if fail_on != DEFAULT_FAIL_ON:
        section(f"New failures below the gate (--fail-on {fail_on}: listed, not gated)", below,
                new_fail)
    section("Lost coverage: BASE judged, NEW did not", lost,
            lambda k, r: f"`{key_text(k)}`: {r['why']} (BASE {r['verdict']})")
    if len(allowed):
        section("Lost coverage accepted by --allow-missing", allowed,
                lambda k, r: f"`{key_text(k)}`: {r['why']}")
    section("Fixed", fixed, lambda k, r: _row_text(k, {x[:-2]: v for x, v in r.items() if x.endswith("_b")})
            + " (BASE failed, NEW passes)")
    if len(unrun_fail):
        section("Failing in NEW, not run in BASE", unrun_fail, _row_text)
    section("Stage-1 p-value became suspicious", suspicious,
            lambda k, r: f"`{k[0]}` {k[1]} {k[3]} **{k[2]}**: p₁ {fmt_num(r['p1_b'])} → "
                         f"{fmt_num(r['p1_n'])} (α_suspect {fmt_num(r['alpha_suspect_n'])})")
    section("Large changes of effect", moved,
            lambda k, r: f"`{k[0]}` {k[1]} {k[3]} **{k[2]}**: {fmt_num(r['effect_b'])} → "
                         f"{fmt_num(r['effect_n'])} {r['effect_unit_n'] or ''} "
                         f"(MDE {fmt_num(np.fmax(r['mde_b'], r['mde_n']), 2)})")

    # Throughput: time inside the candidate per sample.
    out.append("## Throughput (candidate time per sample)")
    out.append("")
    tb, tn = _samples_seconds(base, ["device_type"]), _samples_seconds(new, ["device_type"])
    lines = []
    for dev in sorted(set(tb.index) | set(tn.index)):
        nb = _ns(*tb.loc[dev]) if dev in tb.index else math.nan
        nn = _ns(*tn.loc[dev]) if dev in tn.index else math.nan
        flag = ""
        if nb > 0 and nn > 0 and max(nn / nb, nb / nn) > SPEED_RATIO:
            flag = f" **{'slower' if nn > nb else 'faster'} ×{max(nn / nb, nb / nn):.2g}**"
        lines.append(f"- {dev}: {fmt_num(nb)} → {fmt_num(nn)} ns/sample{flag}")
    if base_env.get("cpu") and new_env.get("cpu") and base_env.get("cpu") != new_env.get("cpu"):
        lines.append(f"- note: different machines ({base_env['cpu']} vs {new_env['cpu']})")
    out += lines or ["no timing data"]
    out.append("")
    drops = throughput_drops(base, new)
    section(f"Throughput drops (more than {THROUGHPUT_DROP:g}x slower per case)", drops,
            lambda k, r: f"`{k[0]}` {k[1]} {k[2]}: {r['measure']} {fmt_num(r['base'])} → "
                         f"{fmt_num(r['new'])} (÷{r['factor']:.3g})"
                         + ("" if gate_throughput else " · warning (gates with --gate-throughput)"))
    if len(still):
        out.append(f"{len(still)} key(s) fail in both runs (not a regression).")
        out.append("")
    status = 1 if (len(regress) or len(lost) or new_partial
                   or (gate_throughput and len(drops))) else 0
    throughput_gated = f", {len(drops)} throughput drop(s)" if gate_throughput else ""
    partial = ", NEW partial" if new_partial else ""
    allowed_new = (f", {len(below)} below --fail-on {fail_on} (not gated)"
                   if fail_on != DEFAULT_FAIL_ON else "")
    out.append(f"**Verdict: {'FAIL' if status else 'OK'}** — {len(regress)} new failure(s)"
               f"{allowed_new}, {len(lost)} key(s) of lost coverage{partial}{throughput_gated}, "
               f"{len(fixed)} fixed.")
    return "\n".join(out) + "\n", status
