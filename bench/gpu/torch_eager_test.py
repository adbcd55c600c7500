#!/usr/bin/env python3
"""Checks torch_eager.py's ONNX interpreter against numpy on single-op graphs, attribute
defaults and edge cases included. Run: python3 bench/gpu/torch_eager_test.py (CPU only)."""

import os
import sys
import unittest

import numpy as np
import torch
from onnx import TensorProto, helper, numpy_helper

sys.dont_write_bytecode = True  # no __pycache__ beside the script
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_eager as te  # noqa: E402

RNG = np.random.default_rng(1)


def run(op, inputs, opset=17, consts=None, nout=1, **attrs):
    """One-node graph: inputs are graph inputs, consts are initializers (so static)."""
    consts = consts or {}
    names = list(inputs) + list(consts)
    outs = ["y%d" % i for i in range(nout)]
    node = helper.make_node(op, names, outs, **attrs)
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in inputs]
    ovi = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs]
    inits = [numpy_helper.from_array(v, n) for n, v in consts.items()]
    model = helper.make_model(helper.make_graph([node], "t", vi, ovi, inits),
                              opset_imports=[helper.make_opsetid("", opset)])
    feeds = {n: te.to_torch(v) for n, v in inputs.items()}
    m = te.OnnxEager(model, feeds, torch.device("cpu"))
    with torch.inference_mode():
        ys = m(*[feeds[n] for n in m.input_names])
    return [y.numpy() for y in ys] if nout > 1 else ys[0].numpy()


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def i64(*v):
    return np.array(v, dtype=np.int64)


class OpSemantics(unittest.TestCase):
    def close(self, got, want, tol=1e-5):
        self.assertEqual(got.shape, want.shape)
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)

    def test_softmax_before_opset13_flattens_at_axis(self):
        x = f32(2, 3, 4)
        flat = x.reshape(2, 12)
        e = np.exp(flat - flat.max(1, keepdims=True))
        self.close(run("Softmax", {"x": x}, opset=11), (e / e.sum(1, keepdims=True)).reshape(2, 3, 4))

    def test_softmax_opset13_defaults_to_last_axis(self):
        x = f32(2, 3, 4)
        e = np.exp(x - x.max(-1, keepdims=True))
        self.close(run("Softmax", {"x": x}, opset=13), e / e.sum(-1, keepdims=True))

    def test_gemm_transposes_and_scales(self):
        a, b, c = f32(4, 3), f32(5, 4), f32(1, 5)
        got = run("Gemm", {"a": a, "b": b}, consts={"c": c}, transA=1, transB=1, alpha=0.5, beta=2.0)
        self.close(got, 0.5 * a.T @ b.T + 2.0 * c)

    def test_gemm_linear_path_with_row_bias(self):
        a, b, c = f32(2, 3), f32(5, 3), f32(1, 5)
        self.close(run("Gemm", {"a": a}, consts={"b": b, "c": c}, transB=1), a @ b.T + c)

    def test_reshape_zero_copies_and_minus_one_infers(self):
        x = f32(2, 3, 4)
        self.close(run("Reshape", {"x": x}, consts={"s": i64(0, -1)}), x.reshape(2, 12))

    def test_slice_negative_step_and_clamped_ends(self):
        x = f32(5, 6)
        got = run("Slice", {"x": x}, consts={"s": i64(-1, 1), "e": i64(-(2 ** 63), 2 ** 63 - 1),
                                              "a": i64(0, 1), "p": i64(-2, 2)})
        self.close(got, x[::-2, 1::2])

    def test_slice_before_opset10_reads_attributes(self):
        x = f32(4, 5)
        self.close(run("Slice", {"x": x}, opset=9, starts=[1], ends=[100], axes=[1]), x[:, 1:])

    def test_gather_negative_static_indices_on_axis1(self):
        x = f32(3, 4)
        idx = i64(-1, 0, 2).reshape(3, 1)
        self.close(run("Gather", {"x": x}, consts={"i": idx}, axis=1), np.take(x, [[3], [0], [2]], axis=1))

    def test_unsqueeze_axes_input_and_attribute(self):
        x = f32(3, 4)
        self.close(run("Unsqueeze", {"x": x}, consts={"a": i64(0, -1)}), x.reshape(1, 3, 4, 1))
        self.close(run("Unsqueeze", {"x": x}, opset=11, axes=[1]), x.reshape(3, 1, 4))

    def test_squeeze_without_axes_drops_all_ones(self):
        x = f32(1, 3, 1, 4)
        self.close(run("Squeeze", {"x": x}), x.reshape(3, 4))

    def test_expand_is_bidirectional(self):
        x = f32(3, 1)
        self.close(run("Expand", {"x": x}, consts={"s": i64(2, 1, 4)}), np.broadcast_to(x, (2, 3, 4)))

    def test_split_default_and_sizes(self):
        x = f32(6, 2)
        a, b, c = run("Split", {"x": x}, nout=3)
        self.close(b, x[2:4])
        a, b = run("Split", {"x": x}, consts={"s": i64(1, 5)}, nout=2)
        self.close(b, x[1:])

    def test_reduce_mean_axes_attribute_and_noop(self):
        x = f32(2, 3, 4)
        self.close(run("ReduceMean", {"x": x}, opset=13, axes=[1], keepdims=0), x.mean(1))
        self.close(run("ReduceMean", {"x": x}, opset=18, consts={"a": np.zeros(0, np.int64)},
                       noop_with_empty_axes=1), x)
        self.close(run("ReduceMean", {"x": x}, opset=18), x.mean(axis=(0, 1, 2), keepdims=True))

    def test_clip_attributes_before_opset11(self):
        x = f32(10)
        self.close(run("Clip", {"x": x}, opset=6, min=-0.5, max=0.5), np.clip(x, -0.5, 0.5))

    def test_conv_same_upper_pads_asymmetrically(self):
        x, w = f32(1, 2, 6, 6), f32(3, 2, 2, 2)
        got = run("Conv", {"x": x}, consts={"w": w}, auto_pad="SAME_UPPER", strides=[1, 1])
        want = torch.nn.functional.conv2d(torch.nn.functional.pad(torch.from_numpy(x), [0, 1, 0, 1]),
                                          torch.from_numpy(w)).numpy()
        self.close(got, want)

    def test_conv_grouped_with_explicit_asymmetric_pads(self):
        x, w, b = f32(1, 4, 5, 5), f32(4, 2, 3, 3), f32(4)
        got = run("Conv", {"x": x}, consts={"w": w, "b": b}, group=2, pads=[1, 0, 0, 1])
        xp = np.pad(x, [(0, 0), (0, 0), (1, 0), (0, 1)])
        want = np.zeros((1, 4, 4, 4), np.float32)
        for o in range(4):
            g = o // 2
            for i in range(4):
                for j in range(4):
                    want[0, o, i, j] = (xp[0, 2 * g:2 * g + 2, i:i + 3, j:j + 3] * w[o]).sum() + b[o]
        self.close(got, want, 1e-4)

    def test_maxpool_asymmetric_pads_use_minus_infinity(self):
        x = -np.abs(f32(1, 1, 4, 4)) - 1
        got = run("MaxPool", {"x": x}, kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 0, 0])
        xp = np.pad(x, [(0, 0), (0, 0), (1, 0), (1, 0)], constant_values=-np.inf)
        want = np.array([[xp[0, 0, 2 * i:2 * i + 2, 2 * j:2 * j + 2].max() for j in range(2)] for i in range(2)])
        self.close(got, want.reshape(1, 1, 2, 2))

    def test_averagepool_excludes_pads_by_default(self):
        x = f32(1, 1, 3, 3)
        got = run("AveragePool", {"x": x}, kernel_shape=[3, 3], pads=[1, 1, 1, 1])
        self.close(got[0, 0, 0, 0:1], np.array([x[0, 0, 0:2, 0:2].mean()]))

    def test_layernorm_and_integer_div(self):
        x, s, b = f32(2, 8), f32(8), f32(8)
        mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        self.close(run("LayerNormalization", {"x": x}, consts={"s": s, "b": b}), (x - mu) / np.sqrt(var + 1e-5) * s + b, 1e-4)

    def test_unknown_op_is_refused_by_name(self):
        with self.assertRaisesRegex(te.Unsupported, "NonMaxSuppression"):
            run("NonMaxSuppression", {"x": f32(1, 4)})

    def test_unsupported_attribute_is_refused(self):
        with self.assertRaisesRegex(te.Unsupported, "storage_order"):
            run("MaxPool", {"x": f32(1, 1, 4, 4)}, kernel_shape=[2, 2], storage_order=1)


if __name__ == "__main__":
    unittest.main()
