"""A synthetic statically quantized network in ONNX's QOperator form, for timing kiln's
QLinearConv against ONNX Runtime's: four 3x3 QLinearConv layers of 64 channels at
128x128, uint8 data, symmetric int8 weights with per-channel scales, an int32 bias.

Usage (Debian's python3-onnx and numpy): /usr/bin/python3 make_qlinearconv.py DIR
writes DIR/qlinearconv_3x3/{model.onnx,test_data_set_0/input_0.pb} (no reference
outputs: bench/ortcompare times it; kiln's results are checked against the reference
evaluator by the kernel tests, TestQLinearConvBlockedMatchesRef).
"""
import os
import sys

import numpy as np
import onnx
from onnx import helper, TensorProto, numpy_helper
rng = np.random.default_rng(0)
C, M, H, W = 64, 64, 128, 128
nodes, inits = [], []
def init(name, arr): inits.append(numpy_helper.from_array(arr, name)); return name
prev = 'x'
for l in range(4):
    w = rng.integers(-127, 128, size=(M, C, 3, 3), dtype=np.int8)
    b = rng.integers(-2000, 2000, size=(M,), dtype=np.int32)
    nodes.append(helper.make_node('QLinearConv', [prev, init(f'xs{l}', np.array(0.02, np.float32)), init(f'xz{l}', np.array(128, np.uint8)),
        init(f'w{l}', w), init(f'ws{l}', (rng.random(M).astype(np.float32) * 0.01 + 0.001)), init(f'wz{l}', np.zeros(M, np.int8)),
        init(f'ys{l}', np.array(0.05 * (l + 1), np.float32)), init(f'yz{l}', np.array(128, np.uint8)), init(f'b{l}', b)],
        [f'y{l}'], pads=[1, 1, 1, 1], kernel_shape=[3, 3]))
    prev = f'y{l}'
g = helper.make_graph(nodes, 'qlc', [helper.make_tensor_value_info('x', TensorProto.UINT8, [1, C, H, W])],
                      [helper.make_tensor_value_info(prev, TensorProto.UINT8, [1, M, H, W])], inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])
m.ir_version = 8
case = os.path.join(sys.argv[1], 'qlinearconv_3x3')
os.makedirs(os.path.join(case, 'test_data_set_0'), exist_ok=True)
onnx.save(m, os.path.join(case, 'model.onnx'))
x = rng.integers(0, 256, size=(1, C, H, W), dtype=np.uint8)
open(os.path.join(case, 'test_data_set_0', 'input_0.pb'), 'wb').write(numpy_helper.from_array(x, 'x').SerializeToString())
