"""The types of the analyses' results: each function returns a plain dict (what the command's
--json prints) whose keys these TypedDicts declare, so that a type checker and an editor know
them. A class's own annotations are the keys every result has; those of its `More` base (total
False) appear only with the options docs/cli.md names. tests/python/test_results.py checks every
key of real results against these declarations, both ways."""
from __future__ import annotations

import sys
from typing import Any, Dict, List, Optional, Union

if sys.version_info >= (3, 11):
    from typing import TypedDict
else:  # generic TypedDicts and total=False bases
    from typing_extensions import TypedDict

Number = Union[float, int, str]  # JSON numbers; "nan", "inf" and "-inf" come as strings


# -- pcollapse ----------------------------------------------------------------------------------
class _PcollapseHeadRunMore(TypedDict, total=False):
    underflow_without_sink: Number  # without_sink=True, or the synthetic scenario


class PcollapseHeadRun(_PcollapseHeadRunMore):
    """One head's run (per KV order and scale)."""
    order: str
    scale: Number
    underflow_fraction: Number
    predicted_fraction: Number
    predicted_fraction_empirical: Number
    closed_form_fraction: Number  # null in reverse order and for a head without a sink
    counted: int


class _PcollapseRunMore(_PcollapseHeadRunMore, total=False):
    mse_gain_over_forward: Number  # a reverse-order run beside its forward run
    dp: Number                     # sweep_scale=True
    normal_octaves: Number
    exact_scaling: bool
    saturates: bool                # S above the P format's largest value: P = 1 is clipped


class PcollapseRun(_PcollapseRunMore, PcollapseHeadRun):
    """A run over every head."""
    predicted_fraction_averaged: Number
    saturated: int
    delta_c: Number
    mse: Number


class CollapsingRow(TypedDict):
    head: int
    row: int  # its position in the problem
    keys: int  # visible non-sink keys
    counted: int  # of them at or below the running max - ln 1024 - ln S (the first run's order and scale)
    sink_mass: Number


class PcollapseHead(TypedDict):
    head: int
    sink_mass: Number
    effective_sink_strength: Number
    score_spread: Number
    score_gap_histogram: List[int]
    p_binade_histogram: List[int]
    sink_mass_by_position: List[Optional[Number]]  # 16 bins of query position; None: no row measured
    rows_by_position: List[int]
    position_bins: List[int]  # each bin's first position
    collapsing_rows: List[CollapsingRow]
    runs: List[PcollapseHeadRun]


class _PcollapseMore(TypedDict, total=False):
    sink_strength: Number  # the synthetic scenario


class PcollapseResult(_PcollapseMore):
    recipe: str
    k_sink: int
    delta_k: Number
    sink_mass: Number
    effective_sink_strength: Number
    score_spread: Number
    score_gap_histogram: List[int]
    p_binade_histogram: List[int]
    sink_mass_by_position: List[Optional[Number]]
    rows_by_position: List[int]
    position_bins: List[int]
    collapsing_rows: List[CollapsingRow]
    collapsing_rows_run: Dict[str, Any]  # the order and scale the rows are counted for
    runs: List[PcollapseRun]
    heads: List[PcollapseHead]


# -- leak ---------------------------------------------------------------------------------------
class LeakByPosition(TypedDict):
    future_influence: List[Number]
    parallel_vs_autoregressive: List[Number]


class LeakResult(TypedDict):
    format: str
    block: int
    fix: bool
    tokens: int
    future_pairs: int
    leaking_pairs: int
    leaking_pairs_natural: Optional[int]          # natural=True, else None
    max_future_influence_natural: Optional[Number]
    masked_contribution_violations: int
    max_future_influence: Number
    mixed_scale_blocks: int
    parallel_vs_autoregressive_max_abs_diff: Number
    by_position: LeakByPosition


# -- headroom -----------------------------------------------------------------------------------
class HeadroomFormat(TypedDict):
    format: str
    ln_max: Number
    min_naive_margin: Number
    naive_exp_overflow_rows: int
    naive_sum_overflow_rows: int
    shifted_overflow_rows: int
    emulated_naive_nonfinite_rows: int
    emulated_naive_zero_rows: int
    emulated_online_nonfinite_rows: int
    emulated_online_zero_rows: int
    emulated_shifted_nonfinite_rows: int
    emulated_shifted_zero_rows: int


class HeadroomRow(TypedDict):
    head: int
    row: int
    max_score: Number
    lse: Number


class _HeadroomMore(TypedDict, total=False):
    note: str  # what was not run and why (a soft cap: the naive softmaxes)


class HeadroomResult(_HeadroomMore):
    rows_total: int
    formats: List[HeadroomFormat]
    rows: List[HeadroomRow]


# -- bias ---------------------------------------------------------------------------------------
class BiasTopDim(TypedDict):
    dim: int
    contribution: Number
    o_error_negative_fraction: Number
    v_negative_fraction: Number


class BiasHeadTies(TypedDict):
    tied_rows: int
    one_key_rows: int
    tie_dominated_rows: int
    tie_share_mean: Number


class _BiasStepMore(TypedDict, total=False):
    fixes: Dict[str, Number]  # fix=True: the coefficient sum with each fix


class BiasStep(_BiasStepMore):
    recipe: str
    rows: int
    coefficient_sum: Number
    t_statistic: Number
    positive_rows: int
    p_bar_one_count: int
    tied_rows: int
    one_key_rows: int
    repeated_max_rows: int
    tie_dominated_rows: int
    tie_dominance: Number
    tie_share_mean: Number
    o_from_file: bool
    top_dims: List[BiasTopDim]
    head_ties: List[BiasHeadTies]


class _BiasMore(TypedDict, total=False):
    # several steps (steps=, or a list of inputs)
    steps: List[BiasStep]
    cumulative_coefficient: List[Number]
    positive_steps: int
    negative_steps: int
    sign_test_p: Number
    fixes: Dict[str, Number]
    fix_signs: Dict[str, int]
    tie_gap: Number  # synthetic: G
    tied_keys: int   # synthetic: T identical leading keys (1: a single dominant key)


class BiasResult(_BiasMore, BiasStep):
    pass


# -- attribute ----------------------------------------------------------------------------------
class AttributeStage(TypedDict):
    stage: str
    only_this_low: Number
    only_this_exact: Number


class AttributeResult(TypedDict):
    recipe: str
    all_low: Number
    all_exact: Number
    delta_recipe: Number
    delta_from_f32_o: Number
    stages: List[AttributeStage]


# -- compare, check -----------------------------------------------------------------------------
class CompareWorst(TypedDict):
    index: List[int]
    kernel: Number
    recipe: Number
    truth: Number
    ulp: Number


class CompareDifference(TypedDict):
    index: List[int]
    kernel: Number
    recipe: Number
    truth: Number
    ulp: Optional[int]


class UlpBin(TypedDict):
    ulps: str
    count: int


class _CompareOutputMore(TypedDict, total=False):
    outside_tolerance: int  # rtol and atol given


class CompareOutput(_CompareOutputMore):
    dtype: str
    matched: int
    total: int
    max_abs: Number
    max_ulp: Number
    rms: Number
    rel_rms: Number
    ulp_histogram: List[UlpBin]
    worst: List[CompareWorst]
    max_row_ulp: Number
    sign_flips_near_zero: int
    nonfinite: int
    first_nonfinite: Optional[CompareDifference]
    largest_difference: Optional[CompareDifference]


class CompareResult(TypedDict):
    file: str
    recipe: str
    causal: bool
    softmax_scale: Number
    heads: int
    n_q: int
    n_kv: int
    matched: int
    total: int
    outputs: Dict[str, CompareOutput]
    notes: List[str]  # what the recipe's bits cannot settle (dQ's atomic adds past one key block)


class FitOutput(TypedDict):
    matched: int
    total: int


class FitCandidate(TypedDict):
    preset: str
    settings: Dict[str, str]
    outputs: Dict[str, FitOutput]
    matched: int
    total: int


class FitExplanation(TypedDict):
    stage: str
    key: str
    value: str
    rows: int


class FitFirstDifference(TypedDict):
    file: str
    output: str
    index: List[int]
    kernel: Number
    recipe: Number


class FitRowSteps(TypedDict):
    statistics: int
    after_statistics: int
    unsplit: int


class FitDivergence(TypedDict):
    rows: int
    rows_total: int
    steps: FitRowSteps
    sampled: int
    first: FitFirstDifference
    explanations: List[FitExplanation]


class FitResult(TypedDict):
    files: List[str]
    best: FitCandidate
    exact: bool
    candidates: List[FitCandidate]
    sampled: bool
    evaluations: int
    refused: int
    rounds: int
    seconds: Number
    stopped: str
    divergence: Optional[FitDivergence]


class Check(TypedDict):
    file: str
    kind: str
    name: str
    passed: bool
    matched: int
    total: int
    detail: str
    seconds: Number


class CheckResult(TypedDict):
    dir: str
    checks: List[Check]
    passed: int
    failed: int
    skipped: int


# -- mx.compare_rules, attention(truth=True) ----------------------------------------------------
class ScaleRuleFigures(TypedDict):
    rule: str
    blocks_differing_from_floor: int
    scale_up: int
    scale_down: int
    saturated: int
    max_abs_error: Number
    rms_error: Number
    relative_rms_error: Number


class CompareRulesTensor(TypedDict):
    name: str
    blocks: int
    rules: List[ScaleRuleFigures]


class CompareRulesResult(TypedDict):
    format: str
    block: int
    tensors: List[CompareRulesTensor]


class OutputErrors(TypedDict):
    max_abs: Number
    rms: Number
    rel_rms: Number


AttentionErrors = Dict[str, OutputErrors]  # attention(..., truth=True)["errors"], per output

__all__ = [name for name in dir() if name[0].isupper() and not name.startswith("_")]
