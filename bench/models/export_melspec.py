#!/usr/bin/python3
"""Exports a keyword-spotting network with a mel-spectrogram front end for kiln's
real-model set (fetch.sh calls it).

    /usr/bin/python3 export_melspec.py NAME OPSET OUT.onnx

NAME is kws_cnn_gru (the only one). The input is a float32 waveform [1, 16000] named
"waveform" (one second at 16 kHz), the output "output", [1, 12] logits. The graph is

    front end (ONNX signal ops, opset 17):
        STFT(waveform[1, 16000, 1], frame_step 160, HannWindow(512) periodic, frame_length 512,
             onesided) -> [1, 97, 257, 2]
        power: ReduceSum(spec · spec, last axis) -> [1, 97, 257]
        MatMul with MelWeightMatrix(64 bins, DFT 512, 16 kHz, 20 Hz..8 kHz) -> [1, 97, 64]
        Log(mel + 1e-6), Unsqueeze -> [1, 1, 97, 64]
    head (PyTorch, exported by torch.onnx):
        two Conv-BatchNorm-ReLU-MaxPool blocks (16 and 32 channels) -> [1, 32, 24, 16]
        Transpose/Reshape to [1, 24, 512] time steps -> GRU(512 -> 64, batch first)
        the last step -> Linear(64 -> 12)

Debian's PyTorch 1.13 has no ONNX export of torch.stft, so the front end is written
with onnx.helper and prepended to the exported head. The weights are random
(torch.manual_seed(0), batch norms with seeded running statistics). Needs Debian's
python3-onnx, python3-numpy and python3-torch.
"""
import io
import sys

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

SAMPLES, FRAME, STEP, MELS, CLASSES = 16000, 512, 160, 64, 12
FRAMES = (SAMPLES - FRAME) // STEP + 1  # 97


class Head(torch.nn.Module):
    def __init__(self):
        super().__init__()

        def block(cin, cout):
            return torch.nn.Sequential(
                torch.nn.Conv2d(cin, cout, 3, padding=1, bias=False),
                torch.nn.BatchNorm2d(cout),
                torch.nn.ReLU(),
                torch.nn.MaxPool2d(2),
            )

        self.features = torch.nn.Sequential(block(1, 16), block(16, 32))
        self.gru = torch.nn.GRU(32 * (MELS // 4), 64, batch_first=True)
        self.fc = torch.nn.Linear(64, CLASSES)

    def forward(self, logmel):  # [1, 1, FRAMES, MELS]
        f = self.features(logmel)  # [1, 32, FRAMES // 4, MELS // 4]
        f = f.permute(0, 2, 1, 3).reshape(1, f.shape[2], -1)
        y, _ = self.gru(f)
        return self.fc(y[:, -1])


def export_head(opset):
    torch.manual_seed(0)
    head = Head().eval()
    g = torch.Generator().manual_seed(1)
    for m in head.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            n = m.running_mean.numel()
            m.running_mean.copy_(torch.randn(n, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(n, generator=g) + 0.5)
    buf = io.BytesIO()
    x = torch.zeros(1, 1, FRAMES, MELS)
    torch.onnx.export(head, x, buf, opset_version=opset, input_names=["logmel"], output_names=["output"],
                      do_constant_folding=True)
    return onnx.load_from_string(buf.getvalue())


def front_end():
    """The nodes and initializers from "waveform" [1, SAMPLES] to "logmel" [1, 1, FRAMES, MELS]."""
    def scalar(name, value, dtype):
        return numpy_helper.from_array(np.array(value, dtype=dtype), name)

    inits = [
        numpy_helper.from_array(np.array([1, SAMPLES, 1], dtype=np.int64), "fe_signal_shape"),
        scalar("fe_frame_step", STEP, np.int64),
        scalar("fe_frame_length", FRAME, np.int64),
        scalar("fe_window_size", FRAME, np.int64),
        scalar("fe_num_mel_bins", MELS, np.int64),
        scalar("fe_dft_length", FRAME, np.int64),
        scalar("fe_sample_rate", SAMPLES, np.int64),
        scalar("fe_lower_hz", 20.0, np.float32),
        scalar("fe_upper_hz", SAMPLES / 2, np.float32),
        numpy_helper.from_array(np.array([-1], dtype=np.int64), "fe_last_axis"),
        scalar("fe_eps", 1e-6, np.float32),
        numpy_helper.from_array(np.array([1], dtype=np.int64), "fe_channel_axis"),
    ]
    nodes = [
        helper.make_node("Reshape", ["waveform", "fe_signal_shape"], ["fe_signal"], "fe_signal"),
        helper.make_node("HannWindow", ["fe_window_size"], ["fe_window"], "fe_window", periodic=1,
                         output_datatype=TensorProto.FLOAT),
        helper.make_node("STFT", ["fe_signal", "fe_frame_step", "fe_window", "fe_frame_length"], ["fe_stft"],
                         "fe_stft", onesided=1),
        helper.make_node("Mul", ["fe_stft", "fe_stft"], ["fe_squares"], "fe_squares"),
        helper.make_node("ReduceSum", ["fe_squares", "fe_last_axis"], ["fe_power"], "fe_power", keepdims=0),
        helper.make_node("MelWeightMatrix", ["fe_num_mel_bins", "fe_dft_length", "fe_sample_rate", "fe_lower_hz",
                                             "fe_upper_hz"], ["fe_mel_weights"], "fe_mel_weights",
                         output_datatype=TensorProto.FLOAT),
        helper.make_node("MatMul", ["fe_power", "fe_mel_weights"], ["fe_mel"], "fe_mel"),
        helper.make_node("Add", ["fe_mel", "fe_eps"], ["fe_mel_eps"], "fe_mel_eps"),
        helper.make_node("Log", ["fe_mel_eps"], ["fe_logmel"], "fe_logmel"),
        helper.make_node("Unsqueeze", ["fe_logmel", "fe_channel_axis"], ["logmel"], "fe_unsqueeze"),
    ]
    return nodes, inits


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: export_melspec.py NAME OPSET OUT.onnx")
    name, opset, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if name != "kws_cnn_gru":
        sys.exit(f"export_melspec.py: no model {name!r} (kws_cnn_gru is the only one)")
    if opset < 17:
        sys.exit("export_melspec.py: STFT, HannWindow and MelWeightMatrix need opset 17 or later")
    model = export_head(opset)
    nodes, inits = front_end()
    g = model.graph
    if [i.name for i in g.input] != ["logmel"]:
        sys.exit(f"export_melspec.py: the head's inputs are {[i.name for i in g.input]}, want ['logmel']")
    head_nodes = list(g.node)
    del g.node[:]
    g.node.extend(nodes + head_nodes)
    g.initializer.extend(inits)
    del g.input[:]
    g.input.append(helper.make_tensor_value_info("waveform", TensorProto.FLOAT, [1, SAMPLES]))
    model.producer_name = "kiln export_melspec.py"
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, out)


if __name__ == "__main__":
    main()
