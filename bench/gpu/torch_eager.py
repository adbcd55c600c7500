#!/usr/bin/env python3
"""PyTorch eager baseline for kiln's GPU benchmark.

Subcommands:

  export-resnet50 OUT.onnx
      torchvision resnet50 (weights=None, torch.manual_seed(0), eval) as a single-file ONNX
      model at opset 17 (input "input" [1,3,224,224], output "output", static shapes), plus
      OUT.onnx.input.npy (a seeded random input) and OUT.onnx.output.npy (the torchvision
      module's output for it, the reference the time subcommand checks against).

  time --device cuda|cpu --iters N --warmup W [--tf32] [--json OUT.jsonl] NAME=PATH.onnx ...
      Runs each ONNX graph node by node with torch operations ("torch eager (onnx graph)"),
      checks its outputs against a reference, and times it; for resnet18/resnet50 also times
      the native torchvision module ("torchvision eager").

The interpreter is specialized to the inputs it is built with: every value that depends only
on initializers, constants and input shapes (shape arithmetic, Constant nodes) is computed
once when the module is built, as a runtime with static shapes would do; the timed forward
runs only the nodes that depend on input data. An op or attribute it does not implement is
refused with an error naming the node and op, never run approximately.
"""

import argparse
import inspect
import json
import math
import os
import platform
import re
import sys
import time

import numpy as np
import onnx
from onnx import numpy_helper
import torch
import torch.nn.functional as F


class Unsupported(Exception):
    """A model uses an op or attribute value the interpreter does not implement."""


class CheckFailed(Exception):
    """The interpreter's outputs differ from the reference beyond the tolerance."""


# ONNX TensorProto element types to torch dtypes (those torch has in every version we run on).
DTYPES = {
    1: torch.float32,
    2: torch.uint8,
    3: torch.int8,
    5: torch.int16,
    6: torch.int32,
    7: torch.int64,
    9: torch.bool,
    10: torch.float16,
    11: torch.float64,
}
if hasattr(torch, "bfloat16"):
    DTYPES[16] = torch.bfloat16


def to_torch(arr):
    """numpy array -> CPU torch tensor (a copy: numpy_helper arrays may be read-only)."""
    arr = np.asarray(arr)
    if arr.dtype == np.object_ or arr.dtype.kind in "USO":
        raise Unsupported("string tensors are not supported")
    if arr.dtype in (np.uint16, np.uint32, np.uint64):
        raise Unsupported("unsigned %s tensors are not supported" % arr.dtype)
    return torch.from_numpy(np.array(arr, copy=True))


def attrs_of(node):
    out = {}
    for a in node.attribute:
        v = onnx.helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode("utf-8")
        out[a.name] = v
    return out


class Ctx:
    """What an op builder knows about one node: attributes, opset, device, and for each input
    its shape and dtype (from the build-time run) and its value when the value is static."""

    def __init__(self, node, attrs, opset, device, shapes, dtypes, consts, nout):
        self.node = node
        self.a = attrs
        self.opset = opset
        self.device = device
        self.shapes = shapes  # per input: tuple, or None for an absent optional input
        self.dtypes = dtypes
        self.consts = consts  # per input: CPU tensor when static, else None
        self.nout = nout  # number of outputs the graph uses (non-empty names)

    def fail(self, why):
        raise Unsupported("node %r (op %s): %s" % (self.node.name, self.node.op_type, why))

    def has(self, i):
        return i < len(self.shapes) and self.shapes[i] is not None

    def ints(self, i):
        """Static integer list of input i (None when absent); refuses a data-dependent one."""
        if not self.has(i):
            return None
        if self.consts[i] is None:
            self.fail("input %d must be static (computed from constants and shapes)" % i)
        return [int(v) for v in self.consts[i].reshape(-1).tolist()]

    def scalar(self, i):
        if not self.has(i):
            return None
        if self.consts[i] is None:
            self.fail("input %d must be static" % i)
        return self.consts[i].reshape(-1)[0].item()

    def only_outputs(self, n):
        if self.nout > n:
            self.fail("only the first %d output(s) are supported" % n)

    def rank(self, i=0):
        return len(self.shapes[i])


def norm_axis(axis, rank, ctx):
    if not -rank <= axis < max(rank, 1):
        ctx.fail("axis %d out of range for rank %d" % (axis, rank))
    return axis + rank if axis < 0 else axis


# ---- op builders: each returns fn(ins) -> tensor or tuple of tensors ----------------------


def unary(f):
    def build(ctx):
        ctx.only_outputs(1)
        return lambda ins: f(ins[0])

    return build


def binary(f):
    def build(ctx):
        return lambda ins: f(ins[0], ins[1])

    return build


def variadic(f):
    def build(ctx):
        def run(ins):
            acc = ins[0]
            for t in ins[1:]:
                acc = f(acc, t)
            return acc

        return run

    return build


def is_int(dtype):
    return not (dtype.is_floating_point or dtype == torch.bool or dtype.is_complex)


def b_div(ctx):
    if is_int(ctx.dtypes[0]):
        return lambda ins: torch.div(ins[0], ins[1], rounding_mode="trunc")
    return lambda ins: ins[0] / ins[1]


def b_mod(ctx):
    if ctx.a.get("fmod", 0):
        return lambda ins: torch.fmod(ins[0], ins[1])
    if not is_int(ctx.dtypes[0]):
        ctx.fail("fmod=0 on floats")
    return lambda ins: torch.remainder(ins[0], ins[1])


def b_pow(ctx):
    dt = ctx.dtypes[0]
    if ctx.consts[1] is not None and ctx.consts[1].numel() == 1:
        e = ctx.consts[1].reshape(-1)[0].item()
        if e == 2:
            return lambda ins: ins[0] * ins[0]
        if e == 0.5 and dt.is_floating_point:
            return lambda ins: torch.sqrt(ins[0])
        return lambda ins: torch.pow(ins[0], e).to(dt)
    return lambda ins: torch.pow(ins[0], ins[1]).to(dt)


def b_cast(ctx):
    to = ctx.a.get("to")
    if to not in DTYPES:
        ctx.fail("cast to ONNX type %s is not supported" % to)
    dt = DTYPES[to]
    return lambda ins: ins[0].to(dt)


def b_clip(ctx):
    if ctx.opset < 11:
        lo, hi = ctx.a.get("min"), ctx.a.get("max")
    else:
        lo, hi = ctx.scalar(1), ctx.scalar(2)
    if lo is None and hi is None:
        return lambda ins: ins[0]
    return lambda ins: torch.clamp(ins[0], min=lo, max=hi)


def b_leaky(ctx):
    alpha = ctx.a.get("alpha", 0.01)
    return lambda ins: F.leaky_relu(ins[0], alpha)


def b_elu(ctx):
    alpha = ctx.a.get("alpha", 1.0)
    return lambda ins: F.elu(ins[0], alpha)


def b_hardsigmoid(ctx):
    alpha, beta = ctx.a.get("alpha", 0.2), ctx.a.get("beta", 0.5)
    return lambda ins: torch.clamp(ins[0] * alpha + beta, 0.0, 1.0)


def b_gelu(ctx):
    approx = ctx.a.get("approximate", "none")
    if approx not in ("none", "tanh"):
        ctx.fail("approximate=%r" % approx)
    if approx == "none":
        return lambda ins: F.gelu(ins[0])
    return lambda ins: F.gelu(ins[0], approximate="tanh")


def b_prelu(ctx):
    return lambda ins: torch.where(ins[0] < 0, ins[0] * ins[1], ins[0])


def b_where(ctx):
    return lambda ins: torch.where(ins[0], ins[1], ins[2])


def b_identity(ctx):
    ctx.only_outputs(1)
    return lambda ins: ins[0]


def b_dropout(ctx):
    ctx.only_outputs(1)  # inference: identity; the mask output is not supported
    if ctx.opset >= 12 and ctx.has(2) and (ctx.consts[2] is None or bool(ctx.consts[2].item())):
        ctx.fail("training_mode must be static false")
    return lambda ins: ins[0]


def b_matmul(ctx):
    return lambda ins: torch.matmul(ins[0], ins[1])


def b_gemm(ctx):
    a = ctx.a
    alpha, beta = a.get("alpha", 1.0), a.get("beta", 1.0)
    ta, tb = a.get("transA", 0), a.get("transB", 0)
    has_c = ctx.has(2)
    n = ctx.shapes[1][0] if tb else ctx.shapes[1][1]
    if ctx.rank(0) != 2 or ctx.rank(1) != 2:
        ctx.fail("A and B must be 2-D")
    if not ta and tb and alpha == 1.0 and (not has_c or beta == 1.0):
        if not has_c:
            return lambda ins: F.linear(ins[0], ins[1])
        cs = tuple(ctx.shapes[2])
        if cs in ((n,), (1, n)):
            # F.linear fuses the bias add; the bias is a 1-D [N] tensor.
            if cs == (n,):
                return lambda ins: F.linear(ins[0], ins[1], ins[2])
            return lambda ins: F.linear(ins[0], ins[1], ins[2].reshape(n))

    def run(ins):
        A = ins[0].t() if ta else ins[0]
        B = ins[1].t() if tb else ins[1]
        if has_c and beta != 0.0:
            return torch.addmm(ins[2], A, B, beta=beta, alpha=alpha)
        y = torch.mm(A, B)
        return y * alpha if alpha != 1.0 else y

    return run


def conv_pads(ctx, spatial, kernel, strides, dil):
    """ONNX pads (begins, ends) per spatial dim, auto_pad resolved."""
    nd = len(spatial)
    auto = ctx.a.get("auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        pads = list(ctx.a.get("pads", [0] * (2 * nd)))
        return pads[:nd], pads[nd:]
    if auto == "VALID":
        return [0] * nd, [0] * nd
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        ctx.fail("auto_pad=%r" % auto)
    begins, ends = [], []
    for i in range(nd):
        out = -(-spatial[i] // strides[i])
        total = max(0, (out - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 - spatial[i])
        small, big = total // 2, total - total // 2
        begins.append(small if auto == "SAME_UPPER" else big)
        ends.append(big if auto == "SAME_UPPER" else small)
    return begins, ends


def torch_pad_list(begins, ends):
    """ONNX per-dim (begin, end) -> F.pad's list, last dimension first."""
    out = []
    for b, e in reversed(list(zip(begins, ends))):
        out += [b, e]
    return out


def b_conv(ctx):
    ctx.only_outputs(1)
    nd = ctx.rank(0) - 2
    if nd not in (1, 2, 3):
        ctx.fail("only 1-D, 2-D and 3-D convolutions are supported")
    wshape = list(ctx.shapes[1][2:])
    kernel = list(ctx.a.get("kernel_shape", wshape))
    if kernel != wshape:
        ctx.fail("kernel_shape %s does not match the weight %s" % (kernel, wshape))
    strides = list(ctx.a.get("strides", [1] * nd))
    dil = list(ctx.a.get("dilations", [1] * nd))
    group = ctx.a.get("group", 1)
    begins, ends = conv_pads(ctx, list(ctx.shapes[0][2:]), kernel, strides, dil)
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nd]
    has_b = ctx.has(2)
    if begins == ends:
        pad = tuple(begins)
        if has_b:
            return lambda ins: conv(ins[0], ins[1], ins[2], strides, pad, dil, group)
        return lambda ins: conv(ins[0], ins[1], None, strides, pad, dil, group)
    tp = torch_pad_list(begins, ends)
    return lambda ins: conv(F.pad(ins[0], tp), ins[1], ins[2] if has_b else None, strides, 0, dil, group)


def pool_params(ctx):
    nd = ctx.rank(0) - 2
    if "kernel_shape" not in ctx.a:
        ctx.fail("kernel_shape is required")
    kernel = list(ctx.a["kernel_shape"])
    strides = list(ctx.a.get("strides", [1] * nd))
    dil = list(ctx.a.get("dilations", [1] * nd))
    begins, ends = conv_pads(ctx, list(ctx.shapes[0][2:]), kernel, strides, dil)
    return nd, kernel, strides, dil, begins, ends


def pool_out_shape(ctx, kernel, strides, dil, begins, ends, ceil):
    """Output spatial shape by the ONNX formula, to check torch's against at build time."""
    out = []
    for i, n in enumerate(ctx.shapes[0][2:]):
        span = n + begins[i] + ends[i] - ((kernel[i] - 1) * dil[i] + 1)
        q = span / strides[i]
        out.append(int(math.ceil(q) if ceil else math.floor(q)) + 1)
    return out


def checked_pool(ctx, fn, want):
    """Wraps fn so that the build-time run checks its spatial output shape once."""
    state = {"checked": False}

    def run(ins):
        y = fn(ins)
        if not state["checked"]:
            if list(y.shape[2:]) != want:
                ctx.fail("torch pooling gives %s, ONNX expects %s" % (list(y.shape[2:]), want))
            state["checked"] = True
        return y

    return run


def b_maxpool(ctx):
    ctx.only_outputs(1)
    if ctx.a.get("storage_order", 0):
        ctx.fail("storage_order=1")
    nd, kernel, strides, dil, begins, ends = pool_params(ctx)
    if nd not in (1, 2, 3):
        ctx.fail("only 1-D, 2-D and 3-D pooling is supported")
    ceil = bool(ctx.a.get("ceil_mode", 0))
    pool = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[nd]
    want = pool_out_shape(ctx, kernel, strides, dil, begins, ends, ceil)
    if begins == ends and all(b * 2 <= k for b, k in zip(begins, kernel)):
        pad = tuple(begins)
        fn = lambda ins: pool(ins[0], kernel, strides, pad, dil, ceil_mode=ceil)  # noqa: E731
    else:
        tp = torch_pad_list(begins, ends)
        fn = lambda ins: pool(F.pad(ins[0], tp, value=-math.inf), kernel, strides, 0, dil, ceil_mode=ceil)  # noqa: E731
    return checked_pool(ctx, fn, want)


def b_avgpool(ctx):
    ctx.only_outputs(1)
    nd, kernel, strides, dil, begins, ends = pool_params(ctx)
    if any(d != 1 for d in dil):
        ctx.fail("dilated average pooling")
    if nd not in (1, 2, 3):
        ctx.fail("only 1-D, 2-D and 3-D pooling is supported")
    ceil = bool(ctx.a.get("ceil_mode", 0))
    cip = bool(ctx.a.get("count_include_pad", 0))
    pool = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[nd]
    want = pool_out_shape(ctx, kernel, strides, dil, begins, ends, ceil)
    if begins == ends and all(b * 2 <= k for b, k in zip(begins, kernel)):
        pad = tuple(begins)
        fn = lambda ins: pool(ins[0], kernel, strides, pad, ceil_mode=ceil, count_include_pad=cip)  # noqa: E731
    elif cip:
        tp = torch_pad_list(begins, ends)
        fn = lambda ins: pool(F.pad(ins[0], tp), kernel, strides, 0, ceil_mode=ceil)  # noqa: E731
    else:
        ctx.fail("asymmetric pads with count_include_pad=0")
    return checked_pool(ctx, fn, want)


def b_global_avg(ctx):
    r = ctx.rank(0)
    if r == 4:
        return lambda ins: F.adaptive_avg_pool2d(ins[0], 1)
    dims = tuple(range(2, r))
    return lambda ins: ins[0].mean(dim=dims, keepdim=True)


def b_global_max(ctx):
    dims = tuple(range(2, ctx.rank(0)))
    return lambda ins: torch.amax(ins[0], dim=dims, keepdim=True)


def b_batchnorm(ctx):
    ctx.only_outputs(1)
    if ctx.a.get("training_mode", 0):
        ctx.fail("training_mode=1")
    if ctx.opset < 9 and ctx.a.get("spatial", 1) != 1:
        ctx.fail("spatial=0")
    eps = ctx.a.get("epsilon", 1e-5)
    return lambda ins: F.batch_norm(ins[0], ins[3], ins[4], ins[1], ins[2], False, 0.0, eps)


def b_layernorm(ctx):
    ctx.only_outputs(1)
    r = ctx.rank(0)
    axis = norm_axis(ctx.a.get("axis", -1), r, ctx)
    eps = ctx.a.get("epsilon", 1e-5)
    ns = tuple(ctx.shapes[0][axis:])
    has_b = ctx.has(2)
    if tuple(ctx.shapes[1]) != ns or (has_b and tuple(ctx.shapes[2]) != ns):

        def run(ins):
            y = F.layer_norm(ins[0], ns, None, None, eps)
            y = y * ins[1]
            return y + ins[2] if has_b else y

        return run
    if has_b:
        return lambda ins: F.layer_norm(ins[0], ns, ins[1], ins[2], eps)
    return lambda ins: F.layer_norm(ins[0], ns, ins[1], None, eps)


def b_softmax(kind):
    def build(ctx):
        f = F.softmax if kind == "softmax" else F.log_softmax
        r = ctx.rank(0)
        if ctx.opset >= 13:
            axis = norm_axis(ctx.a.get("axis", -1), r, ctx)
            return lambda ins: f(ins[0], dim=axis)
        axis = norm_axis(ctx.a.get("axis", 1), r, ctx)
        if axis == r - 1:
            return lambda ins: f(ins[0], dim=-1)
        shape = tuple(ctx.shapes[0])
        rows = int(np.prod(shape[:axis], dtype=np.int64))
        return lambda ins: f(ins[0].reshape(rows, -1), dim=-1).reshape(shape)

    return build


def b_flatten(ctx):
    shape = ctx.shapes[0]
    axis = ctx.a.get("axis", 1)
    if axis < 0:
        axis += len(shape)
    rows = int(np.prod(shape[:axis], dtype=np.int64))
    cols = int(np.prod(shape[axis:], dtype=np.int64))
    return lambda ins: ins[0].reshape(rows, cols)


def reshape_target(ctx, shape, target):
    allowzero = ctx.a.get("allowzero", 0)
    out = []
    for i, d in enumerate(target):
        if d == 0 and not allowzero:
            if i >= len(shape):
                ctx.fail("0 in the shape at dim %d beyond the input rank" % i)
            out.append(shape[i])
        else:
            out.append(d)
    return out


def b_reshape(ctx):
    if ctx.opset < 5:
        target = list(ctx.a.get("shape", []))
    elif ctx.consts[1] is not None:
        target = ctx.ints(1)
    else:
        return lambda ins: ins[0].reshape(reshape_target(ctx, list(ins[0].shape), [int(v) for v in ins[1].tolist()]))
    out = reshape_target(ctx, list(ctx.shapes[0]), target)
    return lambda ins: ins[0].reshape(out)


def b_transpose(ctx):
    r = ctx.rank(0)
    perm = list(ctx.a.get("perm", list(range(r))[::-1]))
    return lambda ins: ins[0].permute(perm)


def b_unsqueeze(ctx):
    axes = ctx.a.get("axes") if ctx.opset < 13 else ctx.ints(1)
    if axes is None:
        ctx.fail("axes are required")
    shape = list(ctx.shapes[0])
    r = len(shape) + len(axes)
    axes = sorted(norm_axis(a, r, ctx) for a in axes)
    for a in axes:
        shape.insert(a, 1)
    return lambda ins: ins[0].reshape(shape)


def b_squeeze(ctx):
    axes = ctx.a.get("axes") if ctx.opset < 13 else ctx.ints(1)
    shape = list(ctx.shapes[0])
    if axes is None:
        out = [d for d in shape if d != 1]
    else:
        axes = {norm_axis(a, len(shape), ctx) for a in axes}
        for a in axes:
            if shape[a] != 1:
                ctx.fail("squeezing dim %d of size %d" % (a, shape[a]))
        out = [d for i, d in enumerate(shape) if i not in axes]
    return lambda ins: ins[0].reshape(out)


def b_concat(ctx):
    if "axis" not in ctx.a:
        ctx.fail("axis is required")
    axis = norm_axis(ctx.a["axis"], ctx.rank(0), ctx)
    return lambda ins: torch.cat(list(ins), dim=axis)


def b_split(ctx):
    r = ctx.rank(0)
    axis = norm_axis(ctx.a.get("axis", 0), r, ctx)
    dim = ctx.shapes[0][axis]
    if ctx.opset < 13:
        sizes = ctx.a.get("split")
    else:
        sizes = ctx.ints(1)
    n = len(ctx.node.output)
    if sizes is None:
        if ctx.opset >= 18 and "num_outputs" in ctx.a:
            n = ctx.a["num_outputs"]
            part = -(-dim // n)
            sizes = [part] * (n - 1) + [dim - part * (n - 1)]
        else:
            if dim % n:
                ctx.fail("dim %d does not split evenly into %d outputs" % (dim, n))
            sizes = [dim // n] * n
    sizes = list(sizes)
    if sum(sizes) != dim:
        ctx.fail("split sizes %s do not sum to %d" % (sizes, dim))
    return lambda ins: torch.split(ins[0], sizes, dim=axis)


def b_slice(ctx):
    shape = list(ctx.shapes[0])
    r = len(shape)
    if ctx.opset < 10:
        starts, ends = ctx.a.get("starts"), ctx.a.get("ends")
        axes, steps = ctx.a.get("axes"), None
    else:
        starts, ends, axes, steps = ctx.ints(1), ctx.ints(2), ctx.ints(3), ctx.ints(4)
    if axes is None:
        axes = list(range(len(starts)))
    if steps is None:
        steps = [1] * len(starts)
    index = [slice(None)] * r
    gathers = []
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = norm_axis(a, r, ctx)
        if st == 0:
            ctx.fail("step 0")
        # Python's slice clamping is the ONNX rule (ends beyond the dim, INT64_MAX, negatives).
        s2, e2, st2 = slice(s, e, st).indices(shape[a])
        if st2 > 0:
            index[a] = slice(s2, max(e2, s2), st2)
        else:
            gathers.append((a, list(range(s2, e2, st2))))
    index = tuple(index)
    dev = ctx.device
    gathers = [(a, torch.tensor(ix, dtype=torch.int64, device=dev)) for a, ix in gathers]

    def run(ins):
        y = ins[0][index]
        for a, ix in gathers:
            y = torch.index_select(y, a, ix.to(y.device))
        return y

    return run


def b_gather(ctx):
    axis = norm_axis(ctx.a.get("axis", 0), ctx.rank(0), ctx)
    dim = ctx.shapes[0][axis]
    idx = ctx.consts[1]
    lead = (slice(None),) * axis
    if idx is not None and idx.dim() == 0:
        i = int(idx.item())
        i = i + dim if i < 0 else i
        return lambda ins: ins[0].select(axis, i)
    if idx is not None:
        fixed = torch.where(idx < 0, idx + dim, idx).to(torch.int64)
        out_shape = list(ctx.shapes[0][:axis]) + list(idx.shape) + list(ctx.shapes[0][axis + 1:])
        flat = fixed.reshape(-1).to(ctx.device)
        return lambda ins: torch.index_select(ins[0], axis, flat.to(ins[0].device)).reshape(out_shape)
    # Data-dependent indices: advanced indexing keeps ONNX's shape rule and negative indices.
    return lambda ins: ins[0][lead + (ins[1],)]


def b_shape(ctx):
    start = ctx.a.get("start", 0)
    end = ctx.a.get("end", None)
    return lambda ins: torch.tensor(list(ins[0].shape)[start:end], dtype=torch.int64)


def b_size(ctx):
    return lambda ins: torch.tensor(ins[0].numel(), dtype=torch.int64)


def b_constant(ctx):
    a = ctx.a
    if "value" in a:
        t = to_torch(numpy_helper.to_array(a["value"]))
    elif "value_float" in a:
        t = torch.tensor(a["value_float"], dtype=torch.float32)
    elif "value_floats" in a:
        t = torch.tensor(list(a["value_floats"]), dtype=torch.float32)
    elif "value_int" in a:
        t = torch.tensor(a["value_int"], dtype=torch.int64)
    elif "value_ints" in a:
        t = torch.tensor(list(a["value_ints"]), dtype=torch.int64)
    else:
        ctx.fail("only value, value_float(s) and value_int(s) are supported")
    return lambda ins: t


def b_constant_of_shape(ctx):
    v = ctx.a.get("value")
    t = to_torch(numpy_helper.to_array(v)) if v is not None else torch.zeros(1, dtype=torch.float32)
    fill = t.reshape(-1)[0].item()
    dt = t.dtype
    if ctx.consts[0] is not None:
        shape = ctx.ints(0)
        return lambda ins: torch.full(shape, fill, dtype=dt)
    return lambda ins: torch.full([int(d) for d in ins[0].tolist()], fill, dtype=dt, device=ins[0].device)


def b_range(ctx):
    start, limit, delta = ctx.scalar(0), ctx.scalar(1), ctx.scalar(2)
    dt = ctx.dtypes[0]
    return lambda ins: torch.arange(start, limit, delta, dtype=dt)


def b_expand(ctx):
    target = ctx.ints(1)
    out = list(torch.broadcast_shapes(tuple(ctx.shapes[0]), tuple(target)))
    return lambda ins: ins[0].expand(out)


def b_tile(ctx):
    reps = ctx.ints(1)
    return lambda ins: ins[0].repeat(reps)


def reduce_axes(ctx):
    """(axes or None for all, keepdims); None result means identity (noop_with_empty_axes)."""
    keep = bool(ctx.a.get("keepdims", 1))
    if ctx.has(1):
        axes = ctx.ints(1)
    else:
        axes = ctx.a.get("axes")
    r = ctx.rank(0)
    if not axes:
        if ctx.a.get("noop_with_empty_axes", 0):
            return "noop", keep
        return list(range(r)), keep
    return sorted(norm_axis(a, r, ctx) for a in axes), keep


def b_reduce(kind):
    def build(ctx):
        axes, keep = reduce_axes(ctx)
        if axes == "noop":
            return lambda ins: ins[0]
        if kind == "mean":
            return lambda ins: torch.mean(ins[0], dim=axes, keepdim=keep)
        if kind == "sum":
            return lambda ins: torch.sum(ins[0], dim=axes, keepdim=keep)
        if kind == "max":
            return lambda ins: torch.amax(ins[0], dim=axes, keepdim=keep)
        if kind == "min":
            return lambda ins: torch.amin(ins[0], dim=axes, keepdim=keep)
        if kind == "prod":

            def run(ins):
                y = ins[0]
                for a in reversed(axes):
                    y = torch.prod(y, dim=a, keepdim=keep)
                return y

            return run
        ctx.fail("BUG: reduction kind %r" % kind)

    return build


def b_argext(kind):
    def build(ctx):
        if ctx.a.get("select_last_index", 0):
            ctx.fail("select_last_index=1")
        axis = norm_axis(ctx.a.get("axis", 0), ctx.rank(0), ctx)
        keep = bool(ctx.a.get("keepdims", 1))
        f = torch.argmax if kind == "max" else torch.argmin
        return lambda ins: f(ins[0], dim=axis, keepdim=keep)

    return build


def b_pad(ctx):
    mode = ctx.a.get("mode", "constant")
    if mode != "constant":
        ctx.fail("mode=%r" % mode)
    r = ctx.rank(0)
    if ctx.opset < 11:
        pads, value, axes = list(ctx.a.get("pads")), ctx.a.get("value", 0.0), None
    else:
        pads = ctx.ints(1)
        value = ctx.scalar(2) if ctx.has(2) else 0
        axes = ctx.ints(3) if ctx.has(3) else None
    axes = list(range(r)) if axes is None else [norm_axis(a, r, ctx) for a in axes]
    n = len(axes)
    begins, ends = [0] * r, [0] * r
    for i, a in enumerate(axes):
        begins[a], ends[a] = pads[i], pads[n + i]
    tp = torch_pad_list(begins, ends)
    return lambda ins: F.pad(ins[0], tp, value=value)


OPS = {
    "Add": binary(torch.add),
    "Sub": binary(torch.sub),
    "Mul": binary(torch.mul),
    "Div": b_div,
    "Mod": b_mod,
    "Pow": b_pow,
    "Max": variadic(torch.maximum),
    "Min": variadic(torch.minimum),
    "Sum": variadic(torch.add),
    "Equal": binary(torch.eq),
    "Less": binary(torch.lt),
    "LessOrEqual": binary(torch.le),
    "Greater": binary(torch.gt),
    "GreaterOrEqual": binary(torch.ge),
    "And": binary(torch.logical_and),
    "Or": binary(torch.logical_or),
    "Xor": binary(torch.logical_xor),
    "Not": unary(torch.logical_not),
    "Where": b_where,
    "Relu": unary(F.relu),
    "Sigmoid": unary(torch.sigmoid),
    "Tanh": unary(torch.tanh),
    "Exp": unary(torch.exp),
    "Log": unary(torch.log),
    "Sqrt": unary(torch.sqrt),
    "Erf": unary(torch.erf),
    "Abs": unary(torch.abs),
    "Neg": unary(torch.neg),
    "Reciprocal": unary(torch.reciprocal),
    "Floor": unary(torch.floor),
    "Ceil": unary(torch.ceil),
    "Sin": unary(torch.sin),
    "Cos": unary(torch.cos),
    "Sign": unary(torch.sign),
    "Softplus": unary(F.softplus),
    "HardSwish": unary(F.hardswish),
    "LeakyRelu": b_leaky,
    "Elu": b_elu,
    "HardSigmoid": b_hardsigmoid,
    "Gelu": b_gelu,
    "PRelu": b_prelu,
    "Clip": b_clip,
    "Cast": b_cast,
    "Identity": b_identity,
    "Dropout": b_dropout,
    "MatMul": b_matmul,
    "Gemm": b_gemm,
    "Conv": b_conv,
    "MaxPool": b_maxpool,
    "AveragePool": b_avgpool,
    "GlobalAveragePool": b_global_avg,
    "GlobalMaxPool": b_global_max,
    "BatchNormalization": b_batchnorm,
    "LayerNormalization": b_layernorm,
    "Softmax": b_softmax("softmax"),
    "LogSoftmax": b_softmax("log_softmax"),
    "Flatten": b_flatten,
    "Reshape": b_reshape,
    "Transpose": b_transpose,
    "Unsqueeze": b_unsqueeze,
    "Squeeze": b_squeeze,
    "Concat": b_concat,
    "Split": b_split,
    "Slice": b_slice,
    "Gather": b_gather,
    "Shape": b_shape,
    "Size": b_size,
    "Constant": b_constant,
    "ConstantOfShape": b_constant_of_shape,
    "Range": b_range,
    "Expand": b_expand,
    "Tile": b_tile,
    "ReduceMean": b_reduce("mean"),
    "ReduceSum": b_reduce("sum"),
    "ReduceMax": b_reduce("max"),
    "ReduceMin": b_reduce("min"),
    "ReduceProd": b_reduce("prod"),
    "ArgMax": b_argext("max"),
    "ArgMin": b_argext("min"),
    "Pad": b_pad,
}

# Inputs an op reads as host values (shapes, axes, bounds): a static value there stays a CPU
# tensor; every other static input is copied to the device once at build time.
HOST_INPUTS = {
    "Reshape": {1},
    "Expand": {1},
    "Slice": {1, 2, 3, 4},
    "Unsqueeze": {1},
    "Squeeze": {1},
    "Split": {1},
    "Tile": {1},
    "Clip": {1, 2},
    "Range": {0, 1, 2},
    "ConstantOfShape": {0},
    "Pad": {1, 2, 3},
    "ReduceMean": {1},
    "ReduceSum": {1},
    "ReduceMax": {1},
    "ReduceMin": {1},
    "ReduceProd": {1},
}

# Ops whose outputs depend only on their inputs' shapes, not their values.
SHAPE_ONLY = {"Shape", "Size"}


def model_opset(model):
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return o.version
    raise Unsupported("the model imports no default-domain opset")


class OnnxEager(torch.nn.Module):
    """Executes an ONNX graph with torch ops, node by node, specialized to fixed input shapes.

    Build: one run over all nodes on the CPU with the given inputs records every value's shape
    and which values are static (initializers, Constant outputs, Shape outputs, and anything
    computed only from static values); static values are kept, and the device plan holds only
    the remaining nodes, each with its static inputs bound (on the device, or on the host for
    the inputs an op reads as shapes or axes).
    """

    def __init__(self, model, feeds, device):
        super().__init__()
        g = model.graph
        opset = model_opset(model)
        self.device = device
        bad = sorted({"%s%s" % (n.domain + "." if n.domain not in ("", "ai.onnx") else "", n.op_type)
                      for n in g.node if n.domain not in ("", "ai.onnx") or n.op_type not in OPS})
        if bad:
            raise Unsupported("unsupported op(s): %s" % ", ".join(bad))
        inits = {t.name: to_torch(numpy_helper.to_array(t)) for t in g.initializer}
        self.input_names = [i.name for i in g.input if i.name not in inits]
        self.output_names = [o.name for o in g.output]
        missing = [n for n in self.input_names if n not in feeds]
        if missing:
            raise Unsupported("no value for input(s) %s" % missing)
        self.input_shapes = [tuple(feeds[n].shape) for n in self.input_names]

        vals = dict(inits)  # build-time values on the CPU
        static = set(inits)
        for n in self.input_names:
            vals[n] = feeds[n].cpu()
        plan_src = []
        for node in g.node:
            for name in node.input:
                if name and name not in vals:
                    raise Unsupported("node %r (op %s): input %r is not defined before it" % (node.name, node.op_type, name))
            ins = [vals[i] if i else None for i in node.input]
            consts = [vals[name] if name and name in static else None for name in node.input]
            ctx = Ctx(node, attrs_of(node), opset, torch.device("cpu"),
                      [tuple(t.shape) if t is not None else None for t in ins],
                      [t.dtype if t is not None else None for t in ins],
                      consts, sum(1 for o in node.output if o))
            fn = OPS[node.op_type](ctx)
            outs = fn(ins)
            if not isinstance(outs, (tuple, list)):
                outs = (outs,)
            is_static = node.op_type in SHAPE_ONLY or all(name == "" or name in static for name in node.input)
            for name, t in zip(node.output, outs):
                if name:
                    vals[name] = t
                    if is_static:
                        static.add(name)
            if not is_static:
                plan_src.append((node, ctx))

        # Device plan: rebuild each dynamic node for the device with its static inputs bound.
        on_device = {}

        def dev_const(name):
            if name not in on_device:
                on_device[name] = vals[name].to(device)
            return on_device[name]

        self.plan = []
        for node, ctx in plan_src:
            host = HOST_INPUTS.get(node.op_type, set())
            refs = []
            for i, name in enumerate(node.input):
                if not name:
                    refs.append(None)
                elif name in static:
                    refs.append(vals[name] if i in host else dev_const(name))
                else:
                    refs.append(name)
            ctx.device = device
            fn = OPS[node.op_type](ctx)
            self.plan.append((fn, refs, [o for o in node.output]))
        self.static_outputs = {n: dev_const(n) for n in self.output_names if n in static}
        self.n_nodes = len(g.node)
        self.n_dynamic = len(self.plan)
        self.build_outputs = [vals[n] for n in self.output_names]

    def forward(self, *args):
        env = dict(zip(self.input_names, args))
        for fn, refs, outs in self.plan:
            ins = [env[r] if r.__class__ is str else r for r in refs]
            y = fn(ins)
            if isinstance(y, (tuple, list)):
                for name, t in zip(outs, y):
                    if name:
                        env[name] = t
            else:
                env[outs[0]] = y
        return [self.static_outputs[n] if n in self.static_outputs else env[n] for n in self.output_names]


# ---- inputs and references ----------------------------------------------------------------


def load_pb(path):
    t = onnx.load_tensor(path)
    return t.name, numpy_helper.to_array(t)


def graph_inputs(model):
    inits = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def test_files(path, prefix):
    d = os.path.join(os.path.dirname(os.path.abspath(path)), "test_data_set_0")
    if not os.path.isdir(d):
        return []
    files = [f for f in os.listdir(d) if re.fullmatch(prefix + r"_(\d+)\.pb", f)]
    files.sort(key=lambda f: int(re.findall(r"\d+", f)[-1]))
    return [os.path.join(d, f) for f in files]


def np_dtype(elem_type):
    return onnx.helper.tensor_dtype_to_np_dtype(elem_type) if hasattr(onnx.helper, "tensor_dtype_to_np_dtype") \
        else onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[elem_type]


def model_inputs(model, path):
    """(feeds name -> numpy, where from)."""
    ins = graph_inputs(model)
    names = [i.name for i in ins]
    files = test_files(path, "input")
    if files:
        feeds = {}
        for k, f in enumerate(files):
            name, arr = load_pb(f)
            if name not in names:
                if k >= len(names):
                    raise Unsupported("%s: more input files than model inputs" % f)
                name = names[k]
            feeds[name] = arr
        return feeds, "test_data_set_0"
    npy = path + ".input.npy"
    if os.path.exists(npy) and len(names) == 1:
        return {names[0]: np.load(npy)}, os.path.basename(npy)
    rng = np.random.default_rng(0)
    feeds = {}
    for i in ins:
        tt = i.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 1 for d in tt.shape.dim]
        dt = np_dtype(tt.elem_type)
        if np.issubdtype(dt, np.floating):
            feeds[i.name] = rng.standard_normal(shape).astype(dt)
        elif dt == np.bool_:
            feeds[i.name] = np.ones(shape, dtype=dt)
        else:
            feeds[i.name] = np.zeros(shape, dtype=dt)  # index-like ints: 0 is always in range
    return feeds, "random"


def references(model, path, feeds):
    """(list of numpy outputs, where from) or (None, "unchecked")."""
    files = test_files(path, "output")
    if files:
        return [load_pb(f)[1] for f in files], "test_data_set_0"
    npy = path + ".output.npy"
    if os.path.exists(npy) and len(model.graph.output) == 1:
        return [np.load(npy)], os.path.basename(npy)
    try:
        import onnxruntime as ort
    except ImportError:
        return None, "unchecked"
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds), "onnxruntime CPU"


def compare(outs, refs):
    """(max abs diff, max relative diff = abs diff / max(|ref|)) over all outputs."""
    worst_abs, worst_rel = 0.0, 0.0
    if len(outs) != len(refs):
        raise CheckFailed("%d outputs, reference has %d" % (len(outs), len(refs)))
    for k, (o, r) in enumerate(zip(outs, refs)):
        o = o.detach().float().cpu().numpy() if o.dtype.is_floating_point else o.detach().cpu().numpy()
        r = np.asarray(r)
        if o.shape != r.shape:
            raise CheckFailed("output %d has shape %s, reference %s" % (k, o.shape, r.shape))
        if not np.issubdtype(r.dtype, np.floating):
            if not np.array_equal(o, r):
                raise CheckFailed("integer output %d differs from the reference" % k)
            continue
        d = float(np.max(np.abs(o.astype(np.float64) - r.astype(np.float64)))) if o.size else 0.0
        scale = float(np.max(np.abs(r))) if r.size else 0.0
        worst_abs = max(worst_abs, d)
        worst_rel = max(worst_rel, d / max(scale, 1e-12))
    return worst_abs, worst_rel


# ---- precision, timing, reporting ---------------------------------------------------------


def has_attr(obj, name):
    """hasattr that survives torch.backends.cuda.matmul raising AssertionError for a name it lacks."""
    try:
        getattr(obj, name)
        return True
    except Exception:
        return False


def set_tf32(enabled, device):
    """TF32 on or off for cuBLAS matmuls and cuDNN convolutions; returns the state it reads back.

    torch >= 2.9 keeps a legacy state (allow_tf32, float32_matmul_precision) and a per-op
    fp32_precision state, and raises when a reader finds them disagreeing. The legacy setters
    write both, so they are used on every version; the per-op state is then read back, and set
    only if it did not follow."""
    import warnings

    cm, cd = torch.backends.cuda.matmul, torch.backends.cudnn
    want = "tf32" if enabled else "ieee"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy setters warn about their deprecation
        cm.allow_tf32 = enabled
        cd.allow_tf32 = enabled
        new_api = has_attr(cm, "fp32_precision") and has_attr(getattr(cd, "conv", None), "fp32_precision")
        if new_api:
            subs = [cd.conv] + ([cd.rnn] if has_attr(getattr(cd, "rnn", None), "fp32_precision") else [])
            for obj in [cm] + subs:
                if obj.fp32_precision != want:  # off: "ieee" rather than an inherited "none"
                    obj.fp32_precision = want
            state = "fp32_precision: cuda.matmul=%s cudnn.conv=%s" % (cm.fp32_precision, cd.conv.fp32_precision)
        else:
            state = "allow_tf32: cuda.matmul=%s cudnn=%s" % (cm.allow_tf32, cd.allow_tf32)
        # A matmul and a convolution now, so that a refused flag state fails here, named.
        a = torch.ones(8, 8, device=device)
        torch.mm(a, a)
        F.conv2d(torch.ones(1, 1, 4, 4, device=device), torch.ones(1, 1, 3, 3, device=device))
        sync(device)
    return state


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_fn(fn, device, iters, warmup):
    with torch.inference_mode():
        for _ in range(warmup):
            fn()
        sync(device)
        times = []
        for _ in range(iters):
            sync(device)
            t0 = time.perf_counter()
            fn()
            sync(device)
            times.append((time.perf_counter() - t0) * 1e3)
    p10, p50, p90 = np.percentile(np.array(times), [10, 50, 90])
    return float(p50), float(p10), float(p90)


def device_name(device):
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return platform.processor() or "cpu"


def torchvision_model(arch):
    import torchvision

    ctor = getattr(torchvision.models, arch)
    torch.manual_seed(0)
    try:
        m = ctor(weights=None)
    except TypeError:  # torchvision < 0.13
        m = ctor(pretrained=False)
    return m.eval()


def emit(row, json_path):
    med = row.get("median_ms")
    if med is None:
        line = "%-16s %-26s %-5s %-4s ERROR %s" % (row["model"], row["impl"], row["device"], row["precision"], row.get("error"))
    else:
        line = "%-16s %-26s %-5s %-4s median %8.3f ms  p10 %8.3f  p90 %8.3f  (n=%d)  check: %s" % (
            row["model"], row["impl"], row["device"], row["precision"], med, row["p10_ms"], row["p90_ms"],
            row["iters"], row["check"])
    print(line, flush=True)
    if json_path:
        with open(json_path, "a") as f:
            f.write(json.dumps(row) + "\n")


def run_model(name, path, args, device, precision, gpu):
    """Times one model; returns False when its check failed or it could not be run."""
    base = {"model": name, "device": device.type, "gpu_name": gpu, "precision": precision, "iters": args.iters,
            "warmup": args.warmup, "torch": torch.__version__}
    ok = True
    row = dict(base, impl="torch eager (onnx graph)")
    try:
        model = onnx.load(path)
        feeds_np, src = model_inputs(model, path)
        feeds = {k: to_torch(v) for k, v in feeds_np.items()}
        t0 = time.perf_counter()
        m = OnnxEager(model, feeds, device)
        build_s = time.perf_counter() - t0
        args_dev = [feeds[n].to(device) for n in m.input_names]
        with torch.inference_mode():
            outs = m(*args_dev)
        sync(device)
        refs, ref_src = references(model, path, feeds_np)
        if refs is None:
            check, diff = "unchecked", None
        else:
            diff, rel = compare(outs, refs)
            check = "max|d|=%.3g rel=%.3g vs %s" % (diff, rel, ref_src)
            if rel > 1e-3:
                if precision == "fp32":
                    raise CheckFailed("%s: max abs diff %.3g (relative %.3g) vs %s exceeds 1e-3" % (name, diff, rel, ref_src))
                check += " (above 1e-3; tf32)"
        print("# %s: %d nodes, %d run per call (rest static), inputs from %s, built in %.2fs" % (
            name, m.n_nodes, m.n_dynamic, src, build_s), flush=True)
        med, p10, p90 = time_fn(lambda: m(*args_dev), device, args.iters, args.warmup)
        row.update(median_ms=med, p10_ms=p10, p90_ms=p90, check=check, max_abs_diff=diff)
        emit(row, args.json)
    except (Unsupported, CheckFailed) as e:
        row.update(median_ms=None, p10_ms=None, p90_ms=None, check="FAILED", error=str(e))
        emit(row, args.json)
        return False
    except Exception as e:  # a torch or file error on one model must not lose the others' rows
        row.update(median_ms=None, p10_ms=None, p90_ms=None, check="FAILED", error="%s: %s" % (type(e).__name__, e))
        emit(row, args.json)
        return False

    arch = next((a for a in ("resnet18", "resnet50") if a in name.lower()), None)
    if arch:
        row = dict(base, impl="torchvision eager")
        try:
            time_torchvision(arch, path, args_dev[0], args, device, row)
        except Exception as e:
            row.update(median_ms=None, p10_ms=None, p90_ms=None, check="FAILED", error="%s: %s" % (type(e).__name__, e))
            emit(row, args.json)
            ok = False
    return ok


def time_torchvision(arch, path, x, args, device, row):
    """The native torchvision module (weights=None, seed 0) on the same input."""
    net = torchvision_model(arch).to(device)
    with torch.inference_mode():
        y = net(x)
    sync(device)
    npy = path + ".output.npy"
    check, diff = "n/a (weights=None; same architecture, other weights)", None
    if arch == "resnet50" and os.path.exists(npy):
        ref = np.load(npy)
        if tuple(ref.shape) == tuple(y.shape):
            diff, rel = compare([y], [ref])
            check = "max|d|=%.3g rel=%.3g vs %s" % (diff, rel, os.path.basename(npy))
    med, p10, p90 = time_fn(lambda: net(x), device, args.iters, args.warmup)
    row.update(median_ms=med, p10_ms=p10, p90_ms=p90, check=check, max_abs_diff=diff)
    emit(row, args.json)


def cmd_time(args):
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit("torch_eager: --device cuda but torch.cuda.is_available() is false")
    precision = "fp32"
    if device.type == "cuda":
        how = set_tf32(args.tf32, device)
        precision = "tf32" if args.tf32 else "fp32"
        torch.backends.cudnn.benchmark = args.cudnn_benchmark
        print("# %s, torch %s, %s, cudnn.benchmark=%s" % (device_name(device), torch.__version__, how,
                                                         args.cudnn_benchmark), flush=True)
    elif args.tf32:
        print("# --tf32 has no effect on the CPU; running fp32", flush=True)
    if args.threads:
        torch.set_num_threads(args.threads)
    gpu = device_name(device)
    failed = []
    for spec in args.models:
        if "=" not in spec:
            sys.exit("torch_eager: model %r is not NAME=PATH.onnx" % spec)
        name, path = spec.split("=", 1)
        if not run_model(name, path, args, device, precision, gpu):
            failed.append(name)
        if device.type == "cuda":
            torch.cuda.empty_cache()
    if failed:
        sys.exit("torch_eager: FAILED: %s" % ", ".join(failed))


# ---- export -------------------------------------------------------------------------------


def export_legacy(net, x, out):
    kwargs = dict(opset_version=17, input_names=["input"], output_names=["output"], do_constant_folding=True)
    params = inspect.signature(torch.onnx.export).parameters
    if not any(p.kind == p.VAR_KEYWORD for p in params.values()):
        kwargs = {k: v for k, v in kwargs.items() if k in params}
    if "dynamo" in params:
        kwargs["dynamo"] = False  # the TorchScript exporter: a plain Conv/Relu/... graph
    with torch.no_grad():
        torch.onnx.export(net, (x,), out, **kwargs)


def export_manual(net, x, out):
    """resnet50 as Conv/Relu/MaxPool/Add/GlobalAveragePool/Flatten/Gemm with BatchNorm folded
    into the convolutions (what the legacy exporter emits), written with onnx.helper."""
    from onnx import helper, TensorProto

    nodes, inits = [], []
    count = [0]

    def fresh(prefix):
        count[0] += 1
        return "%s_%d" % (prefix, count[0])

    def conv_bn(inp, conv, bn, relu):
        w = conv.weight.detach().double()
        scale = bn.weight.detach().double() / torch.sqrt(bn.running_var.detach().double() + bn.eps)
        wf = (w * scale.reshape(-1, 1, 1, 1)).float()
        bf = (bn.bias.detach().double() - bn.running_mean.detach().double() * scale).float()
        wn, bname, y = fresh("W"), fresh("B"), fresh("conv")
        inits.append(numpy_helper.from_array(wf.numpy(), wn))
        inits.append(numpy_helper.from_array(bf.numpy(), bname))
        k = list(conv.kernel_size)
        p = list(conv.padding)
        nodes.append(helper.make_node("Conv", [inp, wn, bname], [y], kernel_shape=k, strides=list(conv.stride),
                                      pads=p + p, dilations=list(conv.dilation), group=conv.groups))
        if relu:
            r = fresh("relu")
            nodes.append(helper.make_node("Relu", [y], [r]))
            return r
        return y

    h = conv_bn("input", net.conv1, net.bn1, True)
    mp = fresh("pool")
    nodes.append(helper.make_node("MaxPool", [h], [mp], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
    h = mp
    for layer in (net.layer1, net.layer2, net.layer3, net.layer4):
        for blk in layer:
            t = conv_bn(h, blk.conv1, blk.bn1, True)
            t = conv_bn(t, blk.conv2, blk.bn2, True)
            t = conv_bn(t, blk.conv3, blk.bn3, False)
            sc = conv_bn(h, blk.downsample[0], blk.downsample[1], False) if blk.downsample is not None else h
            s, r = fresh("add"), fresh("relu")
            nodes.append(helper.make_node("Add", [t, sc], [s]))
            nodes.append(helper.make_node("Relu", [s], [r]))
            h = r
    nodes.append(helper.make_node("GlobalAveragePool", [h], ["gap"]))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], axis=1))
    inits.append(numpy_helper.from_array(net.fc.weight.detach().numpy(), "fc.weight"))
    inits.append(numpy_helper.from_array(net.fc.bias.detach().numpy(), "fc.bias"))
    nodes.append(helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["output"], alpha=1.0, beta=1.0, transB=1))
    graph = helper.make_graph(nodes, "resnet50", [helper.make_tensor_value_info("input", TensorProto.FLOAT, list(x.shape))],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [x.shape[0], 1000])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="torch_eager.py")
    model.ir_version = min(model.ir_version, 8)
    onnx.save(model, out)


def verify_export(out, x, y):
    """Loads what an exporter wrote, embeds external data, checks it, and runs it with the
    interpreter on the CPU against the torchvision output; returns the loaded model."""
    from onnx import external_data_helper

    model = onnx.load(out)
    if any(external_data_helper.uses_external_data(t) for t in model.graph.initializer):
        onnx.save(model, out, save_as_external_data=False)  # load() pulled the data in: embed it
        model = onnx.load(out)
    onnx.checker.check_model(model)
    names = [i.name for i in graph_inputs(model)]
    outs = [o.name for o in model.graph.output]
    if names != ["input"] or outs != ["output"]:
        raise CheckFailed("inputs %s and outputs %s, want [input] and [output]" % (names, outs))
    m = OnnxEager(model, {"input": x}, torch.device("cpu"))
    diff, rel = compare(m.build_outputs, [y.numpy()])
    if rel > 1e-3:
        raise CheckFailed("the exported graph differs from torchvision: max abs diff %.3g (relative %.3g)" % (diff, rel))
    return model, diff


def cmd_export(args):
    import collections

    out = args.out
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    net = torchvision_model("resnet50")
    x = torch.from_numpy(np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32))
    with torch.no_grad():
        y = net(x)
    order = {"auto": ["legacy", "manual"], "legacy": ["legacy"], "manual": ["manual"]}[args.exporter]
    errors = []
    for how in order:
        try:
            (export_legacy if how == "legacy" else export_manual)(net, x, out)
            model, diff = verify_export(out, x, y)
            used = how
            break
        except Exception as e:  # the exporter's own errors are many and version-dependent
            errors.append("%s exporter: %s: %s" % (how, type(e).__name__, e))
            print("# %s" % errors[-1], file=sys.stderr, flush=True)
    else:
        sys.exit("torch_eager: export failed:\n  " + "\n  ".join(errors))
    np.save(out + ".input.npy", x.numpy())
    np.save(out + ".output.npy", y.numpy())
    ops = collections.Counter(n.op_type for n in model.graph.node)
    print("wrote %s (%.1f MB, %s exporter, torch %s, opset %d, ir_version %d; interpreter vs torchvision max|d|=%.3g)" % (
        out, os.path.getsize(out) / 1e6, used, torch.__version__, model_opset(model), model.ir_version, diff))
    print("ops: %s" % ", ".join("%s x%d" % kv for kv in sorted(ops.items())))
    print("wrote %s.input.npy and %s.output.npy (torchvision's output for that input)" % (out, out))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd")
    e = sub.add_parser("export-resnet50", help="export torchvision resnet50 (seed 0) to ONNX opset 17")
    e.add_argument("out", help="OUT.onnx")
    e.add_argument("--exporter", choices=["auto", "legacy", "manual"], default="auto",
                   help="legacy: torch.onnx.export (dynamo=False where accepted); manual: onnx.helper "
                        "graph from the module's weights; auto: legacy, then manual if it fails")
    t = sub.add_parser("time", help="check and time ONNX graphs run with torch eager ops")
    t.add_argument("--device", choices=["cuda", "cpu"], required=True)
    t.add_argument("--iters", type=int, default=200)
    t.add_argument("--warmup", type=int, default=20)
    t.add_argument("--tf32", action="store_true", help="allow TF32 in matmuls and convolutions")
    t.add_argument("--cudnn-benchmark", action="store_true", help="torch.backends.cudnn.benchmark = True")
    t.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (cpu; 0: torch's default)")
    t.add_argument("--json", help="append one JSON object per row to this file")
    t.add_argument("models", nargs="+", metavar="NAME=PATH.onnx")
    args = p.parse_args()
    if args.cmd == "export-resnet50":
        cmd_export(args)
    elif args.cmd == "time":
        cmd_time(args)
    else:
        p.print_help()
        sys.exit(2)


if __name__ == "__main__":
    main()
