# Builds examples/mlp: a 2-layer MLP with a symbolic batch, one test data set, and x.npy.
# Reference outputs are computed with numpy, independently of kiln.
# Run with Debian's python (python3-onnx, python3-numpy): /usr/bin/python3 make.py
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

rng = np.random.default_rng(7)
w1 = rng.standard_normal((8, 16)).astype(np.float32) * 0.5
b1 = rng.standard_normal(16).astype(np.float32) * 0.1
w2 = rng.standard_normal((16, 4)).astype(np.float32) * 0.5
b2 = rng.standard_normal(4).astype(np.float32) * 0.1

graph = helper.make_graph(
    [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="fc1"),
        helper.make_node("Relu", ["h"], ["a"], name="relu"),
        helper.make_node("Gemm", ["a", "w2", "b2"], ["logits"], name="fc2"),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=-1),
    ],
    "mlp",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
    [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 4])],
    [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
     numpy_helper.from_array(w2, "w2"), numpy_helper.from_array(b2, "b2")],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="kiln-examples")
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, "model.onnx")

x = rng.standard_normal((3, 8)).astype(np.float32)
logits = np.maximum(x @ w1 + b1, 0) @ w2 + b2
e = np.exp(logits - logits.max(axis=-1, keepdims=True))
probs = (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)

import os
os.makedirs("test_data_set_0", exist_ok=True)
with open("test_data_set_0/input_0.pb", "wb") as f:
    f.write(numpy_helper.from_array(x, "x").SerializeToString())
with open("test_data_set_0/output_0.pb", "wb") as f:
    f.write(numpy_helper.from_array(probs, "probs").SerializeToString())
np.save("x.npy", x)
