#!/usr/bin/python3
"""Exports a dynamically quantized torchvision CNN for kiln's real-model set (fetch.sh calls it).

    /usr/bin/python3 export_quantized.py ARCH OPSET OUT.onnx

The float network comes from export_torchvision.py (same ARCH, seed and input); this
script then rewrites it into the graph that ONNX Runtime's dynamic quantizer
(onnxruntime.quantization.quantize_dynamic, its defaults: per-tensor int8 weights) emits,
which cannot be run here because ORT's Python package is not installable:

  - each Conv with a constant weight W (and bias B) becomes
        DynamicQuantizeLinear(x) -> x_q, x_scale, x_zp
        ConvInteger(x_q, W_q, x_zp, W_zp)       (the Conv's attributes)
        Cast(to float) ; Mul(that, Mul(x_scale, W_scale)) ; Add(that, Reshape(B, [1, -1, 1, 1]))
  - the classifier's Gemm (x · Wᵀ + B) is first written as MatMul(x, Wᵀ) + B, the form of a
    linear layer ORT's dynamic quantizer handles, and the MatMul becomes
        MatMulInteger(x_q, Wᵀ_q, x_zp, W_zp) ; Cast ; Mul(that, Mul(x_scale, W_scale))
  - weights are quantized per tensor to int8, symmetric: scale = max|W| / 127, zero
    point 0, W_q = clip(round_half_even(W / scale), -127, 127), stored as initializers
    W_quantized, W_scale, W_zero_point; an activation read by several nodes is quantized once.

Needs Debian's python3-onnx, python3-numpy, python3-torch and python3-torchvision.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class Rewriter:
    """Rewrites a float ONNX graph's Conv and Gemm/MatMul nodes into dynamic-quantized form."""

    def __init__(self, model):
        self.model = model
        self.graph = model.graph
        self.inits = {t.name: t for t in self.graph.initializer}
        self.new_inits = []
        self.quantized_acts = {}  # activation name -> (x_q, x_scale, x_zp)
        self.quantized_weights = {}  # weight name -> (w_q, w_scale, w_zp)

    def constant(self, name):
        t = self.inits.get(name)
        return None if t is None else numpy_helper.to_array(t)

    def add_init(self, array, name):
        t = numpy_helper.from_array(array, name)
        self.new_inits.append(t)
        self.inits[name] = t
        return name

    def quantize_activation(self, x, nodes):
        if x not in self.quantized_acts:
            names = (x + "_quantized", x + "_scale", x + "_zero_point")
            nodes.append(helper.make_node("DynamicQuantizeLinear", [x], list(names), x + "_QuantizeLinear"))
            self.quantized_acts[x] = names
        return self.quantized_acts[x]

    def quantize_weight(self, name, w):
        if name not in self.quantized_weights:
            absmax = float(max(abs(float(w.min())), abs(float(w.max()))))
            scale = np.float32(absmax / 127.0 if absmax > 0 else 1.0)
            q = np.clip(np.rint(w.astype(np.float32) / scale), -127, 127).astype(np.int8)
            self.quantized_weights[name] = (
                self.add_init(q, name + "_quantized"),
                self.add_init(np.array(scale, dtype=np.float32), name + "_scale"),
                self.add_init(np.array(0, dtype=np.int8), name + "_zero_point"),
            )
        return self.quantized_weights[name]

    def integer_product(self, op, node, x, wname, w, attrs, out, nodes):
        """Appends op(x_q, w_q, zps) -> Cast -> Mul(scales) writing out."""
        xq, xs, xzp = self.quantize_activation(x, nodes)
        wq, ws, wzp = self.quantize_weight(wname, w)
        base = node.name or out
        acc = out + "_output_quantized"
        nodes.append(helper.make_node(op, [xq, wq, xzp, wzp], [acc], base + "_quant", **attrs))
        nodes.append(helper.make_node("Cast", [acc], [acc + "_cast_output"], acc + "_cast", to=TensorProto.FLOAT))
        scales = base + "_quant_scales_mul"
        nodes.append(helper.make_node("Mul", [xs, ws], [scales + ":0"], scales))
        nodes.append(helper.make_node("Mul", [acc + "_cast_output", scales + ":0"], [out], base + "_quant_output_scale_mul"))

    def conv(self, node, nodes):
        w = self.constant(node.input[1])
        if w is None:
            return False
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        has_bias = len(node.input) == 3 and node.input[2] != ""
        out = node.output[0]
        scaled = out + "quant_scaled_output" if has_bias else out
        self.integer_product("ConvInteger", node, node.input[0], node.input[1], w, attrs, scaled, nodes)
        if has_bias:
            shape = np.ones(w.ndim, dtype=np.int64)
            shape[1] = -1
            shape_name = self.add_init(shape, out + "_bias_reshape_shape")
            nodes.append(helper.make_node("Reshape", [node.input[2], shape_name], [out + "_bias_reshape_output"]))
            nodes.append(helper.make_node("Add", [scaled, out + "_bias_reshape_output"], [out], out + "_bias_add"))
        return True

    def gemm(self, node, nodes):
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        w = self.constant(node.input[1])
        if w is None or attrs.get("transA", 0) or attrs.get("alpha", 1.0) != 1.0 or attrs.get("beta", 1.0) != 1.0:
            return False
        if attrs.get("transB", 0):
            w = np.ascontiguousarray(w.T)
        wname = node.input[1] + "_matmul"  # the [K, N] weight of the MatMul form
        out = node.output[0]
        has_bias = len(node.input) == 3 and node.input[2] != ""
        product = out + "_MatMul_output" if has_bias else out
        self.integer_product("MatMulInteger", node, node.input[0], wname, w, {}, product, nodes)
        if has_bias:
            nodes.append(helper.make_node("Add", [product, node.input[2]], [out], (node.name or out) + "_Add"))
        return True

    def matmul(self, node, nodes):
        w = self.constant(node.input[1])
        if w is None or w.ndim != 2:
            return False
        self.integer_product("MatMulInteger", node, node.input[0], node.input[1], w, {}, node.output[0], nodes)
        return True

    def run(self):
        rewrite = {"Conv": self.conv, "Gemm": self.gemm, "MatMul": self.matmul}
        nodes, count = [], 0
        for node in self.graph.node:
            fn = rewrite.get(node.op_type)
            if fn is not None and fn(node, nodes):
                count += 1
            else:
                nodes.append(node)
        if count == 0:
            sys.exit("export_quantized.py: no Conv, Gemm or MatMul with a constant weight to quantize")
        # float weights no longer read by any node are dropped, as the quantizer does
        used = {i for n in nodes for i in n.input}
        keep = [t for t in self.graph.initializer if t.name in used] + [t for t in self.new_inits if t.name in used]
        del self.graph.node[:]
        self.graph.node.extend(nodes)
        del self.graph.initializer[:]
        self.graph.initializer.extend(keep)
        return count


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: export_quantized.py ARCH OPSET OUT.onnx")
    arch, opset, out = sys.argv[1], sys.argv[2], sys.argv[3]
    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory() as tmp:
        fp32 = os.path.join(tmp, "fp32.onnx")
        subprocess.run([sys.executable, os.path.join(here, "export_torchvision.py"), arch, opset, fp32], check=True)
        model = onnx.load(fp32)
    count = Rewriter(model).run()
    # ORT's integer ops are in the default domain from opset 10 on; the graph keeps its opset
    model.producer_name = "kiln export_quantized.py"
    onnx.checker.check_model(model)
    onnx.save(model, out)
    print(f"export_quantized.py: {arch}: {count} nodes quantized", file=sys.stderr)


if __name__ == "__main__":
    main()
