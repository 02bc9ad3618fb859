"""One head of a llama_dumps dump as an attention problem of its own, for the examples that
measure head by head (pretrained_bias.py, pretrained_pcollapse.py), and the check that the
split loses nothing: a dump holding what a head alone would not carry (a mask, a window, a
softcap, dropout, FP8 descales, a metadata key not known here) is refused, never split without
it (docs/cli.md, "The attention problem")."""
import math

import roundscope
from result_cache import Refused

TENSORS = {"q", "k", "v", "do", "o", "dq", "dk", "dv", "lse"}  # the inputs and what the kernel gave
# Metadata that describes where a dump came from and changes nothing in the problem.
PROVENANCE = {"layer", "step", "micro_batch", "model", "offset", "precision", "source", "text", "torch_version",
              "window", "recipe"}
NEUTRAL = {"window_left": "-1", "window_right": "-1", "softcap": "0", "dropout_p": "0"}


def head_inputs(tensors: dict, head: int, names=("q", "k", "v", "do")) -> dict:
    """Query head `head` and the key-value head it reads ([B, H, N, D] dumps, grouped or
    repeated), without O: the recipe forms its own."""
    kv = head // (tensors["q"].shape[1] // tensors["k"].shape[1])
    return {n: tensors[n][:, kv:kv + 1] if n in ("k", "v") else tensors[n][:, head:head + 1] for n in names}


def launch_heads(tensors: dict) -> int:
    """B x H of the dump's launch, which a head measured alone passes on (launch_heads): PyTorch's
    split-KV and split-key choices read the whole grid."""
    return tensors["q"].shape[0] * tensors["q"].shape[1]


def problem(path: str) -> tuple[bool, float]:
    """(causal, softmax_scale) of a dump whose heads can be taken one at a time; Refused names
    what cannot, before any work."""
    try:
        meta, tensors = roundscope.read_metadata(path), roundscope.read(path, mmap=True)
    except (ValueError, OSError) as e:
        raise Refused(str(e).splitlines()[0]) from None
    missing = {"q", "k", "v", "do"} - set(tensors)
    if missing:
        raise Refused(f"{path}: no {', '.join(sorted(missing))} (a llama_dumps dump holds q, k, v, do)")
    extra = set(tensors) - TENSORS
    if extra:
        raise Refused(f"{path}: holds {', '.join(sorted(extra))}, which the head-by-head split would drop")
    q, k = tensors["q"].shape, tensors["k"].shape
    if len(q) != 4 or len(k) != 4 or k[1] == 0 or q[1] % k[1] or tensors["v"].shape[:3] != k[:3]:
        raise Refused(f"{path}: q {list(q)}, k {list(k)} are not [B, H, N, D] over a whole number of k's heads")
    for key, value in meta.items():
        if key in NEUTRAL:
            try:
                neutral = float(value) == float(NEUTRAL[key])
            except ValueError:
                neutral = False
            if not neutral:
                raise Refused(f"{path}: metadata {key} = {value!r}, which the head-by-head split does not carry")
        elif key not in PROVENANCE and key not in ("causal", "causal_alignment", "softmax_scale", "enable_gqa",
                                                   "gqa_group"):
            raise Refused(f"{path}: metadata {key!r} is not known to the head-by-head split")
    group = meta.get("gqa_group", str(q[1] // k[1]))
    g = int(group) if group.isdigit() else 0
    if not g or not (q[1] == k[1] * g or q[1] == k[1] and q[1] % g == 0):
        raise Refused(f"{path}: metadata gqa_group {group!r} does not fit q's {q[1]} and k's {k[1]} heads")
    if meta.get("causal") not in ("true", "false"):
        raise Refused(f"{path}: metadata causal is {meta.get('causal')!r}, not true or false")
    try:
        scale = float(meta["softmax_scale"])
    except (KeyError, ValueError):
        scale = math.nan
    if not 0 < scale < math.inf:
        raise Refused(f"{path}: metadata softmax_scale is {meta.get('softmax_scale')!r}, not a positive number")
    if meta["causal"] == "true" and q[2] != k[2]:
        raise Refused(f"{path}: a causal mask over Nq != Nk, whose alignment the head-by-head split does not carry")
    return meta["causal"] == "true", scale
