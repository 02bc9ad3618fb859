"""A head's profile (pcollapse's score_gap_histogram and p_binade_histogram, which the report's
per-head view draws) equals the same counts made here from the held scores: each visible
non-sink key's distance below its row's maximum in whole nats (40 and more in the last bin) and
each visible key's exact softmax probability by binade (P in [2^-(i+1), 2^-i) in bin i, P = 1 in
bin 0, below 2^-40 and zero in the last), over the rows that see a key besides the sink. The
sums are done in the C++ order (a dot product in index order, the row's sum of exponentials in
key order, glibc's exp), so that every count must agree.

The view's rows come from the same scores: the mean sink mass of the rows in each of 16 bins of
query position (a row with a sink key and unequal other scores), and the three rows with the
most non-sink keys at or below the row's running maximum - ln 1024 (forward order, S = 1: P S
cast to zero in E4M3), most first, then by share, then by position."""
import math

import numpy as np
import pytest

import roundscope as rs

BINS = 41


def profile_here(q, k, scale, causal, k_sink, mask=None, rows_out=None):
    """[score gaps, P binades] of one head: q [Nq, D], k [Nk, D] float32 (held exactly); each
    row's (position, sink mass or None, non-sink keys, counted) appended to rows_out (one tile:
    every key within the recipe's 128)."""
    gaps, binades = [0] * BINS, [0] * BINS
    q, k = q.astype(np.float64), k.astype(np.float64)
    dots = np.zeros((q.shape[0], k.shape[0]))
    for c in range(q.shape[1]):  # index order, as the model's loop
        dots += q[:, c:c + 1] * k[:, c][None, :]
    for i in range(q.shape[0]):
        visible = min(i + 1, k.shape[0]) if causal else k.shape[0]
        live = [j for j in range(visible) if mask is None or mask[i, j] != -math.inf]
        if not any(j >= k_sink for j in live):
            continue
        s = {j: scale * dots[i, j] + (0.0 if mask is None else mask[i, j]) for j in live}
        top = max(s.values())
        total = 0.0
        for j in live:
            total += math.exp(s[j] - top)
        for j in live:
            if j >= k_sink:
                gaps[min(int(top - s[j]), BINS - 1)] += 1
            p = math.exp(s[j] - top) / total
            binades[BINS - 1 if p == 0 else min(max(0, -math.frexp(p)[1]), BINS - 1)] += 1
        if rows_out is not None:
            rest = [s[j] for j in live if j >= k_sink]
            spread = np.std(rest) > 0 and any(j < k_sink for j in live)
            sink = sum(math.exp(s[j] - top) for j in live if j < k_sink) / total if spread else None
            counted = sum(1 for j in live if j >= k_sink and s[j] <= top - math.log(1024))
            rows_out.append((i, sink, len(rest), counted))
    return gaps, binades


@pytest.mark.parametrize("causal, masked", [(True, False), (False, True)])
def test_the_profile_counts_the_held_scores(causal, masked):
    rng = np.random.default_rng(5)
    h, n, d = 2, 70, 16
    q = (rng.standard_normal((h, n, d)) * 3).astype(np.float32)
    k = (rng.standard_normal((h, n, d)) * 3).astype(np.float32)
    k[:, 0] *= 4  # a sink, and scores spread over tens of nats: every bin in use
    v = rng.standard_normal((h, n, d)).astype(np.float32)
    inputs = {"q": q, "k": k, "v": v}
    mask = None
    if masked:  # a padding mask: the last 9 keys masked, and an additive bias on the others
        mask = np.where(np.arange(n) >= n - 9, -np.inf, 0.5 * np.sin(np.arange(n))).astype(np.float32)
        inputs["attn_mask"] = np.broadcast_to(mask, (1, 1, n, n)).copy()
    r = rs.pcollapse(inputs, recipe="fp8-p-cast-only", k_sink=1, causal=causal, softmax_scale=0.25, threads=2)
    total_gaps, total_binades = [0] * BINS, [0] * BINS
    for head in r["heads"]:
        hh = head["head"]
        full_mask = None if mask is None else np.broadcast_to(mask.astype(np.float64), (n, n))
        rows = []
        gaps, binades = profile_here(q[hh], k[hh], 0.25, causal, 1, full_mask, rows)
        sums, counts = [0.0] * 16, [0] * 16
        for i, sink, _, _ in rows:
            if sink is not None:
                sums[i * 16 // n] += sink
                counts[i * 16 // n] += 1
        assert head["rows_by_position"] == counts and head["position_bins"] == [-(-b * n // 16) for b in range(16)]
        assert head["sink_mass_by_position"] == [x / c if c else None for x, c in zip(sums, counts)]
        worst = sorted((r for r in rows if r[3] > 0), key=lambda r: (-r[3], -r[3] / r[2], r[0]))[:3]
        assert [(r["row"], r["keys"], r["counted"]) for r in head["collapsing_rows"]] == [(r[0], r[2], r[3])
                                                                                          for r in worst]
        assert [r["sink_mass"] for r in head["collapsing_rows"]] == [r[1] if r[1] is not None else "nan"
                                                                     for r in worst]
        # causal: rows of different lengths tell the order apart; masked: every row loses all, by position
        assert len(worst) == 3 and (worst[0][3] > worst[2][3]) == causal, worst
        assert head["score_gap_histogram"] == gaps, (hh, head["score_gap_histogram"], gaps)
        assert head["p_binade_histogram"] == binades, (hh, head["p_binade_histogram"], binades)
        assert sum(1 for x in gaps[:-1] if x) > 15 and gaps[-1] > 0, gaps  # a profile that can tell bins apart
        total_gaps = [a + b for a, b in zip(total_gaps, gaps)]
        total_binades = [a + b for a, b in zip(total_binades, binades)]
    assert r["score_gap_histogram"] == total_gaps and r["p_binade_histogram"] == total_binades
    rows = range(1, n) if causal else range(n)
    keys = (lambda i: i + 1) if causal else (lambda i: n - 9)
    assert sum(total_binades) == h * sum(keys(i) for i in rows), "every visible key of every row with a non-sink key"
    assert sum(total_gaps) == h * sum(keys(i) - 1 for i in rows), "every visible non-sink key"
