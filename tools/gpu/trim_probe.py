#!/usr/bin/env python3
"""Makes a `roundscope probe` capture small enough for the repository, without losing the check
of any tile: the first KEEP tiles of each distribution stay raw (A, B, C, D, dist: what
`roundscope mma FILE --check` reads), and every tile of the capture leaves two digests,

    tile_digest_inputs[t] = sum_i mix(i, A_i) + mix(2^30 + i, B_i) + mix(2^31 + i, C_i)
    tile_digest_d[t]      = sum_i mix(i, D_i)                       (mod 2^64)

with mix emu's conversion_mix (SplitMix64's finalizer of (index, bits)) and i the element's
index within its tile. The test (tests/emu/mma/test_mma_golden.cpp) regenerates the tiles from
the capture's seed, checks the inputs' digests (a changed tile generator is reported as that)
and the model's D against every tile_digest_d.

    trim_probe.py CAPTURE.safetensors... --out DIR [--keep 8]
"""
import hashlib
import json
import pathlib
import struct
import sys

import numpy as np

from kit_files import Parser, is_same_file, write_whole

M64 = (1 << 64) - 1
WIDTH = {"BF16": np.uint16, "F16": np.uint16, "F8_E4M3": np.uint8, "F8_E5M2": np.uint8, "F32": np.uint32,
         "U8": np.uint8, "U16": np.uint16, "U32": np.uint32, "U64": np.uint64,
         "I8": np.uint8, "I16": np.uint16, "I32": np.uint32, "I64": np.uint64}


def mix(index, bits):
    """conversion_mix over arrays (uint64 arithmetic wraps mod 2^64, as in C++)."""
    with np.errstate(over="ignore"):
        z = (index.astype(np.uint64) << np.uint64(32) | bits.astype(np.uint64)) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def read(path):
    """(metadata, {name: (dtype, shape, array)}, sha256) of a safetensors file; ValueError naming
    what is wrong with one that is not well formed."""
    data = pathlib.Path(path).read_bytes()
    if len(data) < 8:
        raise ValueError("shorter than a safetensors header")
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise ValueError(f"its header claims {n} bytes, the file has {len(data) - 8} after the length")
    try:
        header = json.loads(data[8:8 + n])
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise ValueError(f"its header is not JSON ({e.msg if hasattr(e, 'msg') else e})") from None
    if not isinstance(header, dict):
        raise ValueError("its header is not a JSON object")
    meta = header.pop("__metadata__", {})
    body = data[8 + n:]
    tensors = {}
    for name, h in header.items():
        try:
            a, b = h["data_offsets"]
            dtype, shape = h["dtype"], [int(x) for x in h["shape"]]
            width = WIDTH[dtype]
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"tensor '{name}' has no valid dtype, shape and data_offsets") from None
        if not 0 <= a <= b <= len(body) or (b - a) != int(np.prod(shape, dtype=np.int64)) * np.dtype(width).itemsize:
            raise ValueError(f"tensor '{name}': its data_offsets do not fit the file or its shape")
        tensors[name] = (dtype, shape, np.frombuffer(body[a:b], dtype=width).reshape(shape))
    return meta, tensors, hashlib.sha256(data).hexdigest()


def write(path, meta, tensors):
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        dtype, shape, arr = tensors[name]
        raw = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    header["__metadata__"] = meta
    text = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    text += b" " * (-len(text) % 8)
    write_whole(path, struct.pack("<Q", len(text)) + text + b"".join(blobs))


def tile_digests(tensors):
    parts = []
    for name, base in (("A", 0), ("B", 1 << 30), ("C", 1 << 31)):
        arr = tensors[name][2]
        t = arr.shape[0]
        flat = arr.reshape(t, -1)
        idx = np.arange(flat.shape[1], dtype=np.uint64) + np.uint64(base)
        parts.append(mix(np.broadcast_to(idx, flat.shape), flat).sum(axis=1, dtype=np.uint64))
    with np.errstate(over="ignore"):
        inputs = parts[0] + parts[1] + parts[2]
    d = tensors["D"][2].reshape(tensors["D"][2].shape[0], -1)
    idx = np.arange(d.shape[1], dtype=np.uint64)
    return inputs, mix(np.broadcast_to(idx, d.shape), d).sum(axis=1, dtype=np.uint64)


def capture_problem(meta, tensors):
    """What makes a well-formed safetensors file not a probe capture, or None: tiles A, B, C, D
    (tile first) and dist (one distribution index a tile), with a seed in the metadata."""
    if not isinstance(meta, dict) or "seed" not in meta or not all(isinstance(v, str) for v in meta.values()):
        return "no seed in its metadata"
    if not {"A", "B", "C", "D", "dist"} <= tensors.keys():
        return "it lacks one of A, B, C, D and dist"
    dist = tensors["dist"][2]
    if dist.ndim != 1 or dist.shape[0] == 0:
        return "dist is not one distribution index a tile"
    for name in ("A", "B", "C", "D"):
        arr = tensors[name][2]
        if arr.ndim < 2 or arr.shape[0] != dist.shape[0] or arr.dtype.itemsize > 8:
            return f"{name} is not one tile of up to 64-bit words per dist entry"
    return None


def main(argv=None):
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("captures", nargs="+")
    p.add_argument("--out", required=True)
    p.add_argument("--keep", type=int, default=8, help="raw tiles kept of each distribution")
    a = p.parse_args(argv)
    if a.keep < 1:
        print(f"trim_probe.py: --keep: {a.keep} is not a number of tiles from 1 up", file=sys.stderr)
        return 2
    out = pathlib.Path(a.out)
    for path in a.captures:  # the trimmed file has the capture's name: never the capture itself
        if is_same_file(out / pathlib.Path(path).name, path):
            print(f"trim_probe.py: --out: {out / pathlib.Path(path).name} would be {path} itself; trim into "
                  "another folder", file=sys.stderr)
            return 2
    # Every capture read and checked before anything is written: a bad one leaves no output.
    captures = []
    for path in a.captures:
        try:
            meta, tensors, sha = read(path)
        except (OSError, ValueError) as e:
            print(f"trim_probe.py: {path}: {' '.join(str(e).split())}", file=sys.stderr)
            return 2
        why = capture_problem(meta, tensors)
        if why:
            print(f"trim_probe.py: {path}: not a roundscope probe capture ({why})", file=sys.stderr)
            return 2
        captures.append((path, meta, tensors, sha))
    if len({pathlib.Path(p).name for p in a.captures}) != len(a.captures):
        print("trim_probe.py: two captures have one name: their trimmed files would overwrite each other",
              file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    for path, meta, tensors, sha in captures:
        dist = tensors["dist"][2]
        kept = np.concatenate([np.nonzero(dist == k)[0][:a.keep] for k in np.unique(dist)])
        inputs, d = tile_digests(tensors)
        small = {name: (dt, [len(kept)] + shape[1:], arr[kept]) for name, (dt, shape, arr) in tensors.items()}
        small["tile_digest_inputs"] = ("U64", [len(inputs)], inputs)
        small["tile_digest_d"] = ("U64", [len(d)], d)
        per_dist = int(np.bincount(dist).max())
        meta = dict(meta, capture_sha256=sha, capture_tiles=str(len(dist)), per_distribution=str(per_dist),
                    kept=f"the first {a.keep} tiles of each distribution raw; every tile's digests")
        write(out / pathlib.Path(path).name, meta, small)
        print(f"{pathlib.Path(path).name}: {len(kept)} of {len(dist)} tiles raw, {len(dist)} digests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
