"""Attention as real models call it, end to end: a model of grouped-query heads calling
scaled_dot_product_attention with a padding-and-causal mask, in BF16, FP16 and float32, dumped by
roundscope.dump and read by compare, check and report with figures against the masked truth;
emulate and the dump helper on nn.MultiheadAttention; dropout refused in one line; and every
tensor and metadata key the dump helper writes either used or refused by every consumer."""
import json
import warnings

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

import roundscope as rs
import roundscope.torch as rst
from roundscope.dump import AttentionDump

B, H, HKV, N, D = 2, 4, 2, 24, 16
LENGTHS = (N, 15)  # the second text of the batch is padded after 15 tokens


def padding_and_causal(lengths=LENGTHS, n=N):
    """The boolean mask a right-padded causal batch gives: [B, 1, N, N], a view expanded from
    [B, 1, 1, N] & tril, as transformers builds it."""
    keys = (torch.arange(n)[None, :] < torch.tensor(lengths)[:, None])[:, None, None, :]
    return keys & torch.ones(n, n, dtype=torch.bool).tril()


class GqaBlock(torch.nn.Module):
    """One attention block with grouped-query heads (H over HKV), as LLaMA-style models have."""

    def __init__(self, dtype, dropout=0.0):
        super().__init__()
        g = torch.Generator().manual_seed(3)
        self.wq = torch.nn.Parameter((torch.randn(H * D, H * D, generator=g) / H / D ** 0.5).to(dtype))
        self.wk = torch.nn.Parameter((torch.randn(H * D, HKV * D, generator=g) / H / D ** 0.5).to(dtype))
        self.wv = torch.nn.Parameter((torch.randn(H * D, HKV * D, generator=g) / H / D ** 0.5).to(dtype))
        self.dropout = dropout

    def forward(self, x, mask):
        q = (x @ self.wq).view(B, N, H, D).transpose(1, 2)
        k = (x @ self.wk).view(B, N, HKV, D).transpose(1, 2)
        v = (x @ self.wv).view(B, N, HKV, D).transpose(1, 2)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=self.dropout, enable_gqa=True)


def dump_block(folder, dtype, *, recipe_block=None, dropout=0.0, recipe=None):
    """One step of the block, forward and backward, dumped; the file's path."""
    torch.manual_seed(1)
    x = (torch.randn(B, N, H * D) * 4).to(dtype)
    dump = AttentionDump(folder, recipe=recipe)
    with dump.step(0):
        if recipe_block is None:
            GqaBlock(dtype, dropout)(x, padding_and_causal()).float().sum().backward()
        else:
            with rst.emulate(recipe_block):
                GqaBlock(dtype, dropout)(x, padding_and_causal()).float().sum().backward()
    return dump.written[0]


# The recipe whose formats are each model dtype's.
RECIPE_OF = {torch.bfloat16: "fa2-bf16", torch.float16: "fa2-f16", torch.float32: "fa2-f32"}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_a_padded_gqa_dump_is_compared_against_the_masked_truth(cli, tmp_path, dtype):
    path = dump_block(tmp_path, dtype)
    t = load_file(path)
    meta = rs.read_metadata(path)
    assert t["k"].shape == (B, HKV, N, D) and t["attn_mask"].shape == (B, 1, N, N), "the mask is kept compact"
    assert meta["enable_gqa"] == "true" and meta["causal_alignment"] == "top-left"
    result = cli.json("compare", path, "--recipe", RECIPE_OF[dtype])
    errors = result["outputs"]
    assert set(errors) == {"o", "dq", "dk", "dv"}
    # against the masked truth: the error of PyTorch's own kernel in that dtype (its sums of up to
    # N = 24 terms and its softmax: within 16 units of the dtype's rounding); the unmasked
    # problem's truth is a different answer altogether
    unit = {torch.bfloat16: 2 ** -8, torch.float16: 2 ** -11, torch.float32: 2 ** -24}[dtype]
    for name in ("o", "dq", "dk", "dv"):
        assert errors[name]["rel_rms"] < 16 * unit, (name, errors[name])
    unmasked = rs.truth(t["q"], t["k"].repeat_interleave(H // HKV, 1), t["v"].repeat_interleave(H // HKV, 1))
    rel = ((t["o"].double() - unmasked["o"]).norm() / unmasked["o"].norm()).item()
    assert rel > 0.05, "the mask changes the answer"
    # the report over the same dump: per-head results naming each query head's key-value head
    summary = cli.json("report", tmp_path, "-o", tmp_path / "report", "--recipe", RECIPE_OF[dtype], "--no-html",
                       "--leak-tokens", "16")
    layer = json.loads((tmp_path / "report" / json.loads((tmp_path / "report" / "report.json").read_text())
                        ["layers"][0]["file"]).read_text())
    assert [h["kv_head"] for h in layer["heads"]] == [h["head"] // (H // HKV) for h in layer["heads"]]
    assert len(layer["heads"]) == B * H and summary["files"] == 1
    compared = layer["compare"][0]["compare"][RECIPE_OF[dtype]]["outputs"]
    assert {n: o["rel_rms"] for n, o in compared.items()} == pytest.approx(
        {n: e["rel_rms"] for n, e in errors.items()}, rel=1e-9)


def test_a_float32_dump_against_bf16_recipes_is_said_not_compared(cli, tmp_path):
    dump_block(tmp_path, torch.float32)
    cli.json("report", tmp_path, "-o", tmp_path / "report", "--no-html", "--leak-tokens", "16")
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    layer = json.loads((tmp_path / "report" / report["layers"][0]["file"]).read_text())
    skipped = layer["compare"][0]["compare"]
    assert set(skipped) == {"fa2-bf16", "fa3-fp8"}
    assert all("o is f32" in x["skipped"] and "fa2-f32" in x["skipped"] for x in skipped.values()), skipped
    # --set gives every recipe the file's formats: compared
    cli.json("report", tmp_path, "-o", tmp_path / "report2", "--no-html", "--leak-tokens", "16", "--recipe",
             "fa2-bf16", "--set", "input=f32", "--set", "p_format=f32", "--set", "o_format=f32", "--set",
             "grad_format=f32", "--set", "ds_format=f32", "--set", "score_product=f64", "--set", "pv_product=f64",
             "--set", "grad_product=f64")
    report = json.loads((tmp_path / "report2" / "report.json").read_text())
    layer = json.loads((tmp_path / "report2" / report["layers"][0]["file"]).read_text())
    assert "outputs" in layer["compare"][0]["compare"]["fa2-bf16+"]


def test_an_emulated_padded_gqa_model_checks_bit_for_bit(cli, tmp_path):
    path = dump_block(tmp_path, torch.bfloat16, recipe_block="fa2-bf16")
    assert rs.read_metadata(path)["recipe"] == "fa2-bf16"
    result = cli.json("check", tmp_path)
    assert result["failed"] == 0 and result["passed"] == 1, result
    compared = cli.json("compare", path, "--recipe", "fa2-bf16")
    assert compared["matched"] == compared["total"] > 0
    # one flipped bit of dk fails
    t = load_file(path)
    t["dk"].view(torch.int16)[0, 1, 3, 2] ^= 1
    save_file(t, path, metadata=rs.read_metadata(path))
    assert cli.json("check", tmp_path, check=False)["failed"] == 1


def test_dropout_is_refused_in_one_line_by_every_consumer(cli, tmp_path):
    torch.manual_seed(0)
    path = dump_block(tmp_path, torch.bfloat16, dropout=0.2, recipe="fa2-bf16")
    assert rs.read_metadata(path)["dropout_p"] == "0.2"
    for command in (["compare", path, "--recipe", "fa2-bf16"], ["check", tmp_path],
                    ["truth", path, "-o", tmp_path / "t.safetensors"], ["report", tmp_path, "-o", tmp_path / "r"],
                    ["pcollapse", path], ["headroom", path],
                    ["bias", path], ["attribute", path, "--recipe", "fa2-bf16"], ["leak", path],
                    ["attention", path, "--recipe", "fa2-bf16", "-o", tmp_path / "a.safetensors"]):
        m = cli.error(*command)
        assert "dropout" in m and "dropout_p = 0.2" in m, (command[0], m)


def test_multihead_attention_is_emulated_or_counted_and_warned(cli, tmp_path):
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(32, 4, batch_first=True)
    x = torch.randn(2, 10, 32)
    padding = torch.tensor([[False] * 10, [False] * 7 + [True] * 3])  # key_padding_mask: True is padding
    with pytest.warns(UserWarning, match="need_weights"):
        with rst.emulate("fa2-bf16") as mode:
            mha(x, x, x, key_padding_mask=padding)
    assert mode.emulated == 0 and mode.fallbacks["need_weights"] == 1
    with rst.emulate("fa2-bf16", fallback="error"):
        with pytest.raises(ValueError, match="need_weights"):
            mha(x, x, x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with rst.emulate("fa2-bf16") as mode:
            out, _ = mha(x, x, x, key_padding_mask=padding, need_weights=False)
    assert mode.emulated == 1 and not mode.fallbacks
    with pytest.warns(UserWarning, match="nothing was emulated"):
        with rst.emulate("fa2-bf16"):
            torch.softmax(x @ x.transpose(1, 2), -1)
    # the dump helper: with need_weights=False the call and its mask are dumped and compared;
    # with the default, nothing reaches it and it says so
    dump = AttentionDump(tmp_path / "mha")
    with dump.step(0):
        mha(x, x, x, key_padding_mask=padding, need_weights=False)
    result = cli.json("compare", dump.written[0], "--recipe", "fa2-bf16", "--set", "input=f32", "--set",
                      "p_format=f32", "--set", "o_format=f32", "--set", "score_product=f64", "--set",
                      "pv_product=f64")
    assert result["outputs"]["o"]["rel_rms"] < 1e-5, result["outputs"]["o"]
    with pytest.warns(UserWarning, match="no scaled_dot_product_attention"):
        with AttentionDump(tmp_path / "none").step(0):
            mha(x, x, x)


def test_emulate_runs_masks_and_groups_natively(tmp_path):
    """attn_mask, is_causal with Nq != Nk (PyTorch's top-left) and enable_gqa are emulated, not
    sent to the fallback; the result lies within BF16's rounding of float64 PyTorch."""
    g = torch.Generator().manual_seed(4)
    q = torch.randn(B, H, 10, D, generator=g).bfloat16().requires_grad_()
    k, v = (torch.randn(B, HKV, N, D, generator=g).bfloat16().requires_grad_() for _ in range(2))
    mask = torch.rand(B, 1, 10, N, generator=g) > 0.3
    for kwargs in ({"attn_mask": mask}, {"is_causal": True}, {"attn_mask": mask.float().log()}):
        with rst.emulate("fa2-bf16", fallback="error") as mode:
            out = F.scaled_dot_product_attention(q, k, v, enable_gqa=True, **kwargs)
            out.float().sum().backward()
        assert mode.emulated == 1
        want = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), enable_gqa=True,
                                              **{n: (x.double() if x.is_floating_point() else x) if torch.is_tensor(x)
                                                 else x for n, x in kwargs.items()})
        finite = torch.isfinite(want)
        rel = ((out.double() - want)[finite].norm() / want[finite].norm()).item()
        assert rel < 2 ** -8, (kwargs.keys(), rel)
        assert k.grad.shape == k.shape
        q.grad = k.grad = v.grad = None


def test_grouped_heads_give_the_figures_of_their_key_value_heads_repeated(cli, tmp_path):
    """What changes when a dump holds the model's key-value heads rather than repeated ones: no
    head's figure (each query head reads the same keys and values), only dK and dV, which are the
    key-value heads' sums."""
    path = dump_block(tmp_path / "grouped", torch.bfloat16)
    t, meta = load_file(path), rs.read_metadata(path)
    for name in ("k", "v"):
        t[name] = t[name].repeat_interleave(H // HKV, 1).contiguous()
    del t["dk"], t["dv"]
    meta.pop("enable_gqa")
    (tmp_path / "repeated").mkdir()
    save_file(t, tmp_path / "repeated" / "step0_layer0.safetensors", metadata=meta)
    heads = {}
    for kind in ("grouped", "repeated"):
        cli.json("report", tmp_path / kind, "-o", tmp_path / f"r-{kind}", "--no-html", "--leak-tokens", "16")
        report = json.loads((tmp_path / f"r-{kind}" / "report.json").read_text())
        layer = json.loads((tmp_path / f"r-{kind}" / report["layers"][0]["file"]).read_text())
        heads[kind] = [{k: v for k, v in h.items() if k not in ("task", "digest", "kv_head")} for h in layer["heads"]]
        for h in heads[kind]:  # each head's own worst elements: the same but for dK and dV, the groups' sums
            h["compare_worst"] = {recipe: {o: x for o, x in outputs.items() if o not in ("dk", "dv")}
                                  for recipe, outputs in h["compare_worst"].items()}
    assert heads["grouped"] == heads["repeated"]


@pytest.mark.parametrize("alignment", ["top-left", "bottom-right"])
def test_the_efficient_backward_runs_causal_across_shapes_as_its_mask_is_aligned(alignment):
    """PyTorch's memory-efficient backward with Nq != Nk under a causal mask, as SDPA's is_causal
    (top-left) or a lower-right causal bias (bottom-right) runs it: each key block's first query
    block follows the alignment (getSmallestQueryForKey). A plan of the other alignment visits
    blocks the mask hides or skips blocks it shows: its gradients are far from the truth."""
    g = torch.Generator().manual_seed(5)
    q, do = (torch.randn(1, 128, 32, generator=g) for _ in range(2))
    k, v = (torch.randn(1, 256, 32, generator=g) for _ in range(2))
    r = rs.attention(q, k, v, recipe="torch-efficient-sm90", causal=True, causal_alignment=alignment, backward=True,
                     do=do, truth=True)
    for name in ("o", "dq", "dk", "dv"):
        assert r["errors"][name]["rel_rms"] < 0.02, (name, r["errors"][name])
    unseen = slice(128, 256) if alignment == "top-left" else slice(0, 0)  # keys past the last query's diagonal
    assert not r["dk"][:, unseen].any() and not r["dv"][:, unseen].any()
    assert r["dk"][:, 120:128].any() and (alignment == "top-left" or r["dk"][:, 248:].any())


def test_the_efficient_backward_refuses_a_window():
    """Its block order follows the causal mask type only: a sliding window, which SDPA never passes
    it, is refused rather than ordered as if absent. The forward, which visits every block, takes
    it as it takes a boolean mask; other recipes' backwards take it."""
    q = k = v = do = torch.zeros(1, 128, 32)
    with pytest.raises(ValueError, match="sliding window"):
        rs.attention(q, k, v, recipe="torch-efficient-sm90", causal=True, window_left=16, backward=True, do=do)
    rs.attention(q, k, v, recipe="torch-efficient-sm90", causal=True, window_left=16)
    rs.attention(q, k, v, recipe="fa2-bf16", causal=True, window_left=16, backward=True, do=do)


def test_the_cudnn_backward_takes_boolean_masks_and_refuses_a_bias():
    """cuDNN's backward (torch-cudnn-sm90 at D 64) is modelled with boolean masks, which zero P
    where they hide a key; how cuDNN adds an additive bias to P's argument is not captured, so a
    bias is refused for the backward (the forward takes it). At another head dimension the
    backward is refused, naming the one captured."""
    g = torch.Generator().manual_seed(6)
    q, k, v, do = (torch.randn(1, 2, 32, 64, generator=g) for _ in range(4))
    keep = torch.ones(1, 1, 32, 32, dtype=torch.bool)
    keep[..., 3] = False
    r = rs.attention(q, k, v, recipe="torch-cudnn-sm90", attn_mask=keep, backward=True, do=do, truth=True)
    assert not r["dk"][:, :, 3].any() and not r["dv"][:, :, 3].any()
    assert r["errors"]["dq"]["rel_rms"] < 0.02, r["errors"]["dq"]
    bias = torch.zeros(1, 1, 32, 32)
    bias[..., 3] = -1.5
    rs.attention(q, k, v, recipe="torch-cudnn-sm90", attn_mask=bias)
    with pytest.raises(ValueError, match="boolean masks"):
        rs.attention(q, k, v, recipe="torch-cudnn-sm90", attn_mask=bias, backward=True, do=do)
    wide = torch.zeros(1, 2, 32, 128)
    with pytest.raises(ValueError, match="head dimension 64"):
        rs.attention(wide, wide, wide, recipe="torch-cudnn-sm90", backward=True, do=wide)
