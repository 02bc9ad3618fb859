"""A head's profile (pcollapse's score_gap_histogram and p_binade_histogram, which the report's
per-head view draws) equals the same counts made here from the held scores: each visible
non-sink key's distance below its row's maximum in whole nats (40 and more in the last bin) and
each visible key's exact softmax probability by binade (P in [2^-(i+1), 2^-i) in bin i, P = 1 in
bin 0, below 2^-40 and zero in the last), over the rows that see a key besides the sink. The
sums are done in the C++ order (a dot product in index order, the row's sum of exponentials in
key order, glibc's exp), so that every count must agree."""
import math

import numpy as np
import pytest

import roundscope as rs

BINS = 41


def profile_here(q, k, scale, causal, k_sink, mask=None):
    """[score gaps, P binades] of one head: q [Nq, D], k [Nk, D] float32 (held exactly)."""
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
        gaps, binades = profile_here(q[hh], k[hh], 0.25, causal, 1, full_mask)
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
