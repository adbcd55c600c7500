#!/usr/bin/python3
"""Exports a torchvision network in float16 for kiln's real-model set (fetch.sh calls it).

    /usr/bin/python3 export_half.py ARCH OPSET OUT.onnx

The float network comes from export_torchvision.py (same ARCH, seed and input); this
script then stores it in float16 the way a half-precision converter does (onnxconverter-
common's convert_float_to_float16 with keep_io_types off): every float32 initializer,
Constant tensor, graph input and output becomes float16, and a Cast to float32 becomes a
Cast to float16. The nodes are unchanged, so every op computes on float16 tensors.

Needs Debian's python3-onnx, python3-numpy, python3-torch and python3-torchvision.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper


def to_half(model):
    g = model.graph

    def convert(t):
        if t.data_type == TensorProto.FLOAT:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name))

    for t in g.initializer:
        convert(t)
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                convert(a.t)
            if n.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = TensorProto.FLOAT16
    for v in list(g.input) + list(g.output):
        if v.type.tensor_type.elem_type == TensorProto.FLOAT:
            v.type.tensor_type.elem_type = TensorProto.FLOAT16
    del g.value_info[:]
    return model


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: export_half.py ARCH OPSET OUT.onnx")
    arch, opset, out = sys.argv[1], sys.argv[2], sys.argv[3]
    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory() as tmp:
        fp32 = os.path.join(tmp, "float.onnx")
        subprocess.run([sys.executable, os.path.join(here, "export_torchvision.py"), arch, opset, fp32], check=True)
        model = to_half(onnx.load(fp32))
    onnx.checker.check_model(model)
    onnx.save(model, out)


if __name__ == "__main__":
    main()
