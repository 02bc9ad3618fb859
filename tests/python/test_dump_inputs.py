"""No silent wrong answer from a dump: every tensor name and metadata key that roundscope.dump
writes (gathered from the files it writes in every configuration below, so that a new one fails
this test until it is listed), and those python -m roundscope.llama_dumps adds, is, for every
consumer, either used (changing it changes the consumer's figures), refused (exit 2, one line
naming it), checked (a value that contradicts the tensors is refused) or informational (changing
it changes no figure: a record, or an output that consumer does not read, which the table says)."""
import json
import shutil

import pytest

import torch
import torch.nn.functional as F

import roundscope as rs
import roundscope.torch as rst
from roundscope.dump import AttentionDump

B, H, HKV, NQ, NK, D = 1, 2, 1, 12, 16, 16

CONSUMERS = ("compare", "check", "report", "attention", "truth", "pcollapse", "bias", "headroom", "leak", "attribute",
             "fit")


def every_written_key(folder):
    """The tensor names and metadata keys of the files the dump helper writes: sdpa with a mask,
    grouped heads and dropout; a kernel of its own with descale factors, a window and a soft cap;
    the layer input; under emulate (the recipe)."""
    g = torch.Generator().manual_seed(0)

    def qkv(nq=NQ, heads=H, kv=HKV, grad=True):
        return [torch.randn(B, h, n, D, generator=g).requires_grad_(grad) for h, n in ((heads, nq), (kv, NK), (kv, NK))]

    tensors, metadata = set(), set()
    dump = AttentionDump(folder)
    with dump.step(0, metadata={"text": "a user's own key"}):
        q, k, v = qkv()
        dump.layer_inputs(x=torch.randn(B, NQ, 8), wq=torch.randn(8, H * D))
        mask = torch.ones(NQ, NK, dtype=torch.bool).tril(NK - NQ)
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.1, enable_gqa=True).sum().backward()

    def kernel(q, k, v, descale_q=None, window_size=None, softcap=None, causal=False):
        return (F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal),
                torch.zeros(q.shape[:-1]))

    with dump.step(1):
        q, k, v = qkv(NK, H, H, grad=False)
        dump.wrap(kernel)(q, k, v, descale_q=torch.tensor([1.0]), window_size=(4, 0), softcap=30.0, causal=True)
    with rst.emulate("fa2-bf16"), dump.step(2):
        q, k, v = qkv(NK, H, H)
        F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
    for path in dump.written:
        tensors |= set(rs.read(path))
        metadata |= set(rs.read_metadata(path))
    return tensors, metadata


# key -> for each consumer: "used", "refused", "checked" or "informational", as a dict; a string
# gives every consumer that behaviour. Notes say why an input is informational for a consumer.
FORWARD_ONLY = {"pcollapse": "informational", "headroom": "informational", "leak": "informational"}
OUTPUTS = {c: "informational" for c in CONSUMERS} | {"compare": "used", "check": "used", "report": "used",
                                                     "fit": "used"}
TABLE = {
    "q": "used", "k": "used", "attn_mask": "used",
    # headroom reads V only for which rows of it are zero (a row of zeros in O is wrong only where
    # it sees a non-zero V): a change of non-zero values changes none of its figures
    "v": {c: "used" for c in CONSUMERS} | {"headroom": "informational"},
    # the kernel's outputs: what compare, check and report hold against the truth and the recipe;
    # bias also reads the stored o (delta from the kernel's O); the other analyses compute their own
    "o": OUTPUTS | {"bias": "used"},
    "lse": OUTPUTS,
    "dq": OUTPUTS, "dk": OUTPUTS, "dv": OUTPUTS,
    # dO: the backward pass's input (truth and attention without --backward do not read it)
    "do": {c: "used" for c in CONSUMERS} | FORWARD_ONLY | {"truth": "informational", "attention": "informational"},
    # the layer input and the query weight: the query-weight part of bias's gradient error
    "x": {c: "informational" for c in CONSUMERS} | {"bias": "used", "report": "used"},
    "wq": {c: "informational" for c in CONSUMERS} | {"bias": "used", "report": "used"},
    "descale_q": "refused",
    # leak studies the first tokens of a causal model, as a square causal problem whatever the file
    # says: the causal flag and its alignment (the same for a square problem) do not enter it
    "causal": {c: "used" for c in CONSUMERS} | {"leak": "informational"},
    "causal_alignment": {c: "used" for c in CONSUMERS} | {"leak": "informational"},
    "softmax_scale": "used", "window_left": "used",
    "window_right": {c: "used" for c in CONSUMERS} | {"leak": "informational"},
    # soft caps: every consumer's (FlashAttention-2's order in the emulated kernels)
    "softcap": "used",
    "dropout_p": "refused", "enable_gqa": "checked",
    # where a file sits in the report; the recipe check verifies; records
    "layer": {c: "informational" for c in CONSUMERS} | {"report": "used"},
    "step": {c: "informational" for c in CONSUMERS} | {"report": "used"},
    "micro_batch": {c: "informational" for c in CONSUMERS} | {"report": "used"},
    "recipe": {c: "informational" for c in CONSUMERS} | {"check": "used"},
    "recipe_settings": {c: "informational" for c in CONSUMERS} | {"check": "used"},
    "source": "checked", "torch_version": "informational", "text": "informational",
    # what python -m roundscope.llama_dumps adds: the GQA group (k's heads must agree) and records
    "gqa_group": "checked", "window": "informational", "offset": "informational", "model": "informational",
    "precision": "informational",
}


def behaviour(key, consumer):
    b = TABLE[key]
    return b if isinstance(b, str) else b[consumer]


def base_tensors():
    g = torch.Generator().manual_seed(5)
    t = {"q": torch.randn(B, H, NQ, D, generator=g).bfloat16(),
         "k": torch.randn(B, HKV, NK, D, generator=g).bfloat16(),
         "v": torch.randn(B, HKV, NK, D, generator=g).bfloat16(),
         "do": torch.randn(B, H, NQ, D, generator=g).bfloat16(),
         "x": torch.randn(B, NQ, 8, generator=g), "wq": torch.randn(8, H * D, generator=g),
         "attn_mask": torch.rand(B, 1, NQ, NK, generator=g) > 0.2}
    t["attn_mask"][..., 0] = True
    out = rs.attention(t["q"], t["k"], t["v"], recipe="fa2-bf16", causal=True, backward=True, do=t["do"],
                       attn_mask=t["attn_mask"], causal_alignment="top-left")
    t.update(o=out["o"], lse=out["lse"], dq=out["dq"], dk=out["dk"], dv=out["dv"])
    return t


BASE_META = {"causal": "true", "causal_alignment": "top-left", "softmax_scale": "0.25", "layer": "0", "step": "0",
             "micro_batch": "0", "recipe": "fa2-bf16", "recipe_settings": "{}", "source": "roundscope_dump (sdpa)",
             "torch_version": torch.__version__, "text": "jargon", "enable_gqa": "true"}


# Where a key shows only on another problem than the base's: (the change both sides get first).
BEFORE = {"window_right": {"causal": "false"}}

# The word a refusal of the key names where it is not the key itself.
NAMED = {"source": "causal_alignment", "descale_q": "descale", "enable_gqa": "enable_gqa"}


def variant(key, t, meta):
    """The dump with `key` changed (tensors and metadata, copies)."""
    t, meta = dict(t), {**meta, **BEFORE.get(key, {})}
    change = {
        "q": lambda: t.update(q=t["q"] * 2), "k": lambda: t.update(k=t["k"] * 2),
        "v": lambda: t.update(v=(t["v"].float() * 1.5 + 0.25).bfloat16()),
        "attn_mask": lambda: t.update(attn_mask=torch.ones_like(t["attn_mask"])),
        "o": lambda: t.update(o=t["o"] * 1.5), "lse": lambda: t.update(lse=t["lse"] + 1),
        "dq": lambda: t.update(dq=t["dq"] * 2), "dk": lambda: t.update(dk=t["dk"] * 2),
        "dv": lambda: t.update(dv=t["dv"] * 2), "do": lambda: t.update(do=t["do"] * 3),
        "x": lambda: t.update(x=t["x"] * 2), "wq": lambda: t.update(wq=-t["wq"]),
        "descale_q": lambda: t.update(descale_q=torch.tensor([2.0])),
        "causal": lambda: meta.update(causal="false"),
        "causal_alignment": lambda: meta.update(causal_alignment="bottom-right"),
        "softmax_scale": lambda: meta.update(softmax_scale="0.125"),
        "window_left": lambda: meta.update(window_left="3"), "window_right": lambda: meta.update(window_right="2"),
        "softcap": lambda: meta.update(softcap="2.0"), "dropout_p": lambda: meta.update(dropout_p="0.1"),
        "enable_gqa": lambda: meta.update(enable_gqa="false"),
        "layer": lambda: meta.update(layer="3"), "step": lambda: meta.update(step="4"),
        "micro_batch": lambda: meta.update(micro_batch="1"),
        "recipe": lambda: meta.update(recipe="fa3-bf16"),
        "recipe_settings": lambda: meta.update(recipe_settings='{"exp2_arg": "fma"}'),
        "source": lambda: (meta.update(source="roundscope_dump (sdpa)"), meta.pop("causal_alignment")),
        "torch_version": lambda: meta.update(torch_version="0.0"), "text": lambda: meta.update(text="gpl-3"),
        "gqa_group": lambda: meta.update(gqa_group="3"), "window": lambda: meta.update(window="7"),
        "offset": lambda: meta.update(offset="1024"), "model": lambda: meta.update(model="another"),
        "precision": lambda: meta.update(precision="f32"),
    }
    change[key]()
    return t, meta


def figures(cli, consumer, folder):
    """The consumer's figures on the dump in `folder` (paths and timings left out), or the
    one-line error of a refusal."""
    path = folder / "step0_layer0.safetensors"
    args = {"compare": ["compare", path, "--recipe", "fa2-bf16"], "check": ["check", folder],
            "attention": ["attention", path, "--recipe", "fa2-bf16", "--truth", "-o", folder / "out.safetensors"],
            "truth": ["truth", path, "-o", folder / "out.safetensors"],
            "pcollapse": ["pcollapse", path], "bias": ["bias", path], "headroom": ["headroom", path],
            "leak": ["leak", path, "--max-tokens", "12"], "attribute": ["attribute", path, "--recipe", "fa2-bf16"],
            "report": ["report", folder, "-o", folder / "r", "--no-html", "--leak-tokens", "12",
                       "--no-cache"],
            "fit": ["fit", path, "--from", "fa2-bf16", "--keys", "kv_order", "--max-evaluations", "3"]}[consumer]
    p = cli.run(*args, "--json", check=False)
    if p.returncode == 2:
        return ("refused", p.stderr)
    assert p.returncode in (0, 1), (consumer, p.stderr)
    result = json.loads(p.stdout)
    if consumer == "truth":
        result = {n: rs.read(folder / "out.safetensors")[n].tolist() for n in ("o", "lse")}
    if consumer == "attention":
        result = result["errors"]
    if consumer == "report":
        report = json.loads((folder / "r" / "report.json").read_text())
        result = [json.loads((folder / "r" / layer["file"]).read_text()) for layer in report["layers"]]
        for layer in result:
            for h in layer["heads"]:
                for k in ("task", "digest", "file"):
                    h.pop(k, None)
            for c in layer["compare"]:
                c.pop("file", None)
    if consumer == "check":
        result = [{k: v for k, v in c.items() if k not in ("file", "seconds")} for c in result["checks"]]
    for k in ("file", "files", "seconds", "output"):
        if isinstance(result, dict):
            result.pop(k, None)
    return ("ran", json.dumps(result, sort_keys=True, default=str))


@pytest.mark.slow  # several seconds: the full suite runs it, the fast loop does not
def test_every_input_the_dump_helper_writes_is_used_or_refused_by_every_consumer(cli, tmp_path):
    tensors, metadata = every_written_key(tmp_path / "written")
    assert tensors | metadata <= set(TABLE), f"not in the table: {sorted((tensors | metadata) - set(TABLE))}"
    assert {"attn_mask", "do", "dk", "x", "descale_q"} <= tensors and {"dropout_p", "enable_gqa", "window_left",
                                                                      "softcap", "recipe"} <= metadata
    t, meta = base_tensors(), BASE_META
    base_dir = tmp_path / "base"
    base_dir.mkdir()
    rs.write(base_dir / "step0_layer0.safetensors", t, meta)
    base = {c: figures(cli, c, base_dir) for c in CONSUMERS}
    assert all(kind == "ran" for kind, _ in base.values()), {c: b for c, b in base.items() if b[0] != "ran"}
    wrong = []
    for i, key in enumerate(TABLE):
        before = base
        if key in BEFORE:  # the problem the key shows on, without it
            folder = tmp_path / f"b{i}"
            folder.mkdir()
            rs.write(folder / "step0_layer0.safetensors", t, {**meta, **BEFORE[key]})
            before = {c: figures(cli, c, folder) for c in CONSUMERS}
        folder = tmp_path / f"v{i}"
        folder.mkdir()
        vt, vm = variant(key, t, meta)
        rs.write(folder / "step0_layer0.safetensors", vt, vm)
        for consumer in CONSUMERS:
            want = behaviour(key, consumer)
            kind, got = figures(cli, consumer, folder)
            if want == "used" and not (kind == "ran" and got != before[consumer][1]):
                wrong.append(f"{key} / {consumer}: not used ({kind}: {got[:120]})")
            elif want in ("refused", "checked") and not (kind == "refused" and NAMED.get(key, key) in got):
                wrong.append(f"{key} / {consumer}: not refused ({kind}: {got[:120]})")
            elif want == "informational" and not (kind == "ran" and got == before[consumer][1]):
                wrong.append(f"{key} / {consumer}: said informational, but {kind}: {got[:120]}")
        shutil.rmtree(folder)
    assert not wrong, "\n".join(wrong)
