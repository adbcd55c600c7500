#!/usr/bin/python3
"""Exports a statically quantized torchvision CNN in ONNX's QDQ form (the form ONNX
Runtime's quantize_static writes by default), for kiln's benchmarks.

    KILN_ORT_NODE_MODULES=bench/ort/node_modules /usr/bin/python3 export_qdq.py ARCH OPSET OUT.onnx

The float network comes from export_torchvision.py (same ARCH, seed and input); the
activations are calibrated on ONNX Runtime (calibrate.js: the min and max of each over
four seeded random inputs), then the graph is rewritten as quantize_static would
(whose Python package cannot be installed here):

  - each activation that a Conv or Gemm reads, each Conv's output and each Add's inputs and
    output get QuantizeLinear -> DequantizeLinear (uint8, asymmetric per tensor: scale
    (max - min) / 255 over the range widened to hold 0, zero point round(-min / scale));
  - Conv weights are stored int8, symmetric per output channel (scale max|W| / 127),
    behind a DequantizeLinear on axis 0, and biases int32 in units of the input's
    scale times the weight's, behind their own DequantizeLinear.

ONNX Runtime fuses these patterns into integer kernels (QLinearConv, QLinearAdd);
ONNX's semantics, which kiln computes, are the float operators between the pairs, so
outputs differ from ONNX Runtime's wherever a rounding of the integer path and of the
float one fall on two sides of a quantization step.
Needs Debian's python3-onnx, python3-numpy, python3-torch and python3-torchvision, node and
onnxruntime-node (KILN_ORT_NODE_MODULES, default bench/ort/node_modules).
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def calibrate(model, path, tmp, node_modules):
    """Returns {tensor: [min, max]} for the activations export_qdq.py quantizes."""
    inits = {t.name for t in model.graph.initializer}
    names = []
    for n in model.graph.node:
        cands = []
        if n.op_type in ("Conv", "Gemm"):
            cands = [n.input[0]] + list(n.output[:1])
        elif n.op_type == "Add":
            cands = list(n.input) + list(n.output)
        for t in cands:
            if t and t not in inits and t not in names:
                names.append(t)
    m = onnx.load(path)
    outs = {o.name for o in m.graph.output}
    for t in names:
        if t not in outs:
            m.graph.output.append(helper.make_tensor_value_info(t, TensorProto.FLOAT, None))
    calib = os.path.join(tmp, "calib.onnx")
    onnx.save(m, calib)
    ranges = os.path.join(tmp, "ranges.json")
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, NODE_PATH=node_modules)
    subprocess.run(["node", os.path.join(here, "calibrate.js"), calib, "input", "1x3x224x224", "4", ranges],
                   check=True, env=env)
    with open(ranges) as f:
        return json.load(f)


def uint8_params(lo, hi):
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = np.float32((hi - lo) / 255.0 or 1.0)
    return scale, np.uint8(np.clip(round(-lo / scale), 0, 255))


def rewrite(model, ranges):
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    added = []

    def init(array, name):
        added.append(numpy_helper.from_array(array, name))
        return name

    pairs = {}  # activation -> its Q/DQ nodes
    for t, (lo, hi) in ranges.items():
        s, z = uint8_params(lo, hi)
        sn, zn = init(np.array(s, np.float32), t + "_scale"), init(np.array(z, np.uint8), t + "_zero_point")
        pairs[t] = [helper.make_node("QuantizeLinear", [t, sn, zn], [t + "_quantized"]),
                    helper.make_node("DequantizeLinear", [t + "_quantized", sn, zn], [t + "_dequantized"])]
    for n in g.node:
        for k, t in enumerate(n.input):
            if t in pairs:
                n.input[k] = t + "_dequantized"
    weights = []
    for n in g.node:
        if n.op_type != "Conv" or n.input[1] not in inits or (len(n.input) > 2 and n.input[2] and n.input[2] not in inits):
            continue  # weights computed in the graph stay float
        w = numpy_helper.to_array(inits[n.input[1]]).astype(np.float32)
        sw = np.maximum(np.abs(w).reshape(w.shape[0], -1).max(1), 1e-12) / 127.0
        wq = np.clip(np.rint(w / sw.reshape(-1, 1, 1, 1)), -127, 127).astype(np.int8)
        base = n.output[0]
        names = [init(wq, base + "_w_quantized"), init(sw.astype(np.float32), base + "_w_scale"),
                 init(np.zeros(w.shape[0], np.int8), base + "_w_zero_point")]
        weights.append(helper.make_node("DequantizeLinear", names, [base + "_w"], axis=0))
        n.input[1] = base + "_w"
        if len(n.input) > 2 and n.input[2]:
            b = numpy_helper.to_array(inits[n.input[2]]).astype(np.float32)
            x = n.input[0].removesuffix("_dequantized")
            sb = (uint8_params(*ranges[x])[0] * sw).astype(np.float32)
            names = [init(np.rint(b / sb).astype(np.int32), base + "_b_quantized"), init(sb, base + "_b_scale"),
                     init(np.zeros(w.shape[0], np.int32), base + "_b_zero_point")]
            weights.append(helper.make_node("DequantizeLinear", names, [base + "_b"], axis=0))
            n.input[2] = base + "_b"
    nodes = list(weights)
    for t in [i.name for i in g.input]:
        nodes += pairs.get(t, [])
    for n in g.node:
        nodes.append(n)
        for o in n.output:
            nodes += pairs.get(o, [])
    del g.node[:]
    g.node.extend(nodes)
    g.initializer.extend(added)
    used = {t for n in g.node for t in n.input}
    keep = [t for t in g.initializer if t.name in used]
    del g.initializer[:]
    g.initializer.extend(keep)
    return len(pairs)


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: export_qdq.py ARCH OPSET OUT.onnx")
    arch, opset, out = sys.argv[1], sys.argv[2], sys.argv[3]
    here = os.path.dirname(os.path.abspath(__file__))
    node_modules = os.environ.get("KILN_ORT_NODE_MODULES", os.path.join(here, "..", "ort", "node_modules"))
    with tempfile.TemporaryDirectory() as tmp:
        fp32 = os.path.join(tmp, "fp32.onnx")
        subprocess.run([sys.executable, os.path.join(here, "export_torchvision.py"), arch, opset, fp32], check=True)
        model = onnx.load(fp32)
        ranges = calibrate(model, fp32, tmp, node_modules)
    count = rewrite(model, ranges)
    model.producer_name = "kiln export_qdq.py"
    onnx.checker.check_model(model)
    onnx.save(model, out)
    print(f"export_qdq.py: {arch}: {count} activations quantized", file=sys.stderr)


if __name__ == "__main__":
    main()
