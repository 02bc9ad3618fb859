"""Structured mutation of JSON documents for the Python fuzzers (atheris, libFuzzer's engine):
an input is one JSON document; a mutation parses it, changes one to four of its nodes (a value
replaced by a hostile one or by a copy of another node, a key removed or added, a list entry
removed or repeated) and writes it back. One in eight mutations changes bytes instead (a byte
replaced, removed or repeated), so that text which is not JSON is tried too."""
from __future__ import annotations

import copy
import json
import random

# Values a hand-edited or hostile file may hold where the readers expect something else.
HOSTILE = [
    None, True, False, 0, -1, 1, 2**31, 2**53 + 1, 2**63 - 1, 2**63, 2**64, -2**63 - 1, 10**400, -10**400,
    0.5, -0.0, 1e308, -1e308, 5e-324, float("nan"), float("inf"), float("-inf"),
    "", "nan", "inf", "-inf", "0", "1", "2-3", "nan ", "A", "B", "C", "x" * 5000,
    '"><img src=x onerror=alert(1)>', "<x-injected>", "</script><script>alert(1)</script>", "javascript:alert(1)",
    "\x1b[31mred\x1b[0m", "a\nb", "\0", "\ud800", "../outside.json", "/etc/passwd", "layers/../../x.json",
    "layers//layer0.json", ".", "..", "x/../../../escaped", "../../evil.tar.xz", "ok.tar.xz", "0" * 64,
    [], {}, [None], [[[[[[[[]]]]]]]], {"": None},
]
KEYS = ["file", "layer", "step", "head", "heads", "batch", "heads_per_batch", "compare", "outputs", "skipped",
        "matched", "total", "ulp_histogram", "ulps", "count", "rel_rms", "sampling_error", "layers", "files",
        "bias_over_steps", "steps", "cumulative", "sign_test_p", "options", "recipes", "name", "rows", "seed",
        "pcollapse", "runs", "order", "scale", "headroom", "formats", "format", "leak", "bias", "kernel",
        "attribute", "all_low", "phase", "archives", "archive", "sha256", "kit", "dry_run", "exact", "runnable",
        "bhnd", "input_sha256", "softmax_scale", "shape", "kernels", "pass", "backend", "causal", "symlink",
        "hardlink", "dir", "base64", "sweep/sweep.jsonl", "bench/bench.jsonl", "sdpa/sdpa_cases.json",
        "sdpa/sdpa_S1_fwd.safetensors", "probe/conversions.safetensors", "mufu/mufu_ex2.safetensors", "../../x"]


def _nodes(x, path=()):
    """Every node of x with its path from the root."""
    yield path, x
    if isinstance(x, dict):
        for k, v in x.items():
            yield from _nodes(v, path + (k,))
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from _nodes(v, path + (i,))


def _set(root, path, value):
    if not path:
        return value
    parent = root
    for k in path[:-1]:
        parent = parent[k]
    parent[path[-1]] = value
    return root


def _hostile(rng, nodes):
    # Always a copy: a list or object placed twice would become one node of two parents (and a
    # later mutation could put a node inside itself).
    if rng.random() < 0.25:
        return copy.deepcopy(rng.choice(nodes)[1])  # another node
    return copy.deepcopy(rng.choice(HOSTILE))


def mutate_document(doc, rng: random.Random):
    """doc with one to four nodes changed."""
    for _ in range(rng.randint(1, 4)):
        nodes = list(_nodes(doc))
        path, node = rng.choice(nodes)
        action = rng.random()
        if isinstance(node, dict) and action < 0.3:
            if node and rng.random() < 0.5:
                del node[rng.choice(list(node))]
            else:
                node[rng.choice(KEYS + [str(v) for v in HOSTILE if isinstance(v, str)])] = _hostile(rng, nodes)
        elif isinstance(node, list) and node and action < 0.3:
            i = rng.randrange(len(node))
            if rng.random() < 0.5:
                del node[i]
            else:
                node.insert(i, copy.deepcopy(node[i]))
        else:
            doc = _set(doc, path, _hostile(rng, nodes))
    return doc


def _mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if not out:
            out.append(rng.randrange(256))
            continue
        i, action = rng.randrange(len(out)), rng.random()
        if action < 0.4:
            out[i] = rng.choice(b'{}[]",:0123456789.-eE \\ntrufalsN' + bytes([rng.randrange(256)]))
        elif action < 0.7:
            del out[i]
        else:
            j = rng.randrange(i, min(len(out), i + 64) + 1)
            out[j:j] = out[i:j]
    return bytes(out)


def custom_mutator(seed_document):
    """A libFuzzer custom mutator over JSON documents, starting from seed_document where the
    input is not JSON."""
    def mutate(data: bytes, max_size: int, seed: int) -> bytes:
        rng = random.Random(seed)
        if rng.random() < 0.125:
            return _mutate_bytes(data, rng)[:max_size]
        try:
            doc = json.loads(data)
        except (ValueError, RecursionError):
            doc = json.loads(json.dumps(seed_document))
        out = json.dumps(mutate_document(doc, rng), allow_nan=True).encode("utf-8", "surrogatepass")
        return out if len(out) <= max_size else data
    return mutate
