"""Tensor files written and read by hand, independently of roundscope and its peers: a
safetensors file is an 8-byte header length, the JSON header, the data. And bit-for-bit
equality of arrays."""
import json
import struct


def write_safetensors(path, tensors, metadata=None):
    """{name: (dtype, shape, raw bytes)} into `path`."""
    header, data = {}, b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def read_safetensors(path):
    """({name: (dtype, shape, raw bytes)}, metadata) of `path`."""
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8 : 8 + n])
    body = data[8 + n :]
    tensors = {k: (v["dtype"], v["shape"], body[v["data_offsets"][0] : v["data_offsets"][1]])
               for k, v in header.items() if k != "__metadata__"}
    return tensors, header.get("__metadata__", {})


def f32_bytes(values):
    return struct.pack(f"<{len(values)}f", *values)


def same_bits(a, b):
    """Equal bit patterns (NaNs included), shapes and dtypes."""
    import numpy as np
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
