#!/usr/bin/python3
"""Exports a torchvision segmentation, detection or video network for kiln's real-model set
(fetch.sh calls it).

    /usr/bin/python3 export_tvtask.py TASK.ARCH OPSET OUT.onnx

TASK is segmentation, detection or video, ARCH a constructor of torchvision.models.TASK
(lraspp_mobilenet_v3_large, deeplabv3_mobilenet_v3_large, ssdlite320_mobilenet_v3_large,
fasterrcnn_mobilenet_v3_large_320_fpn, ...). Weights are random from fixed seeds, as in export_torchvision.py, but every
convolution's weights are drawn again with variance GAIN/fan_in: with torchvision's own
initialization these networks' activations shrink layer by layer (SSDLite's deepest
features near 1e-26, every class score 1/91), so the outputs compared with ONNX
Runtime's would not test the arithmetic. Batch norms get running statistics as in
export_torchvision.py.

A segmentation network takes float32 [1, 3, 224, 224] named "input" and returns its
"out" map as "output"; a video network (mc3_18, r3d_18, r2plus1d_18: 3-D convolutions)
a clip of 8 frames, float32 [1, 3, 8, 112, 112] named "input", and returns its class
scores as "output". A detection network takes the list of one image float32
[3, 320, 320] (SSDLite's transform resizes it to 320×320, the 320 Faster R-CNN's to
320 on its shorter side) and returns torchvision's boxes,
scores and labels: the export keeps its post-processing (per-class score thresholds,
top-k, NonMaxSuppression), so the graph has data-dependent extents throughout.
Needs Debian's python3-torch and python3-torchvision.
"""
import sys

import torch
import torchvision
from torchvision.models import detection, segmentation, video

TASKS = {"segmentation": segmentation, "detection": detection, "video": video}

# GAIN: at 2 LR-ASPP's output reaches hundreds and float32's rounding moves it by 1e-2
# (PyTorch's own float32 against float64), more than the tolerances; at 1 DeepLabV3's
# output hardly depends on its input (2e-5 between two random images) and SSDLite's
# scores are nearly uniform; at 1.5 float32 is within 1e-6 of float64 on both
# segmentation networks
GAIN = 1.5


def main():
    if len(sys.argv) != 4 or "." not in sys.argv[1]:
        sys.exit("usage: export_tvtask.py TASK.ARCH OPSET OUT.onnx")
    (task, arch), opset, out = sys.argv[1].split(".", 1), int(sys.argv[2]), sys.argv[3]
    if task not in TASKS:
        sys.exit(f"export_tvtask.py: task {task!r}, want one of {sorted(TASKS)}")
    module = TASKS[task]
    ctor = getattr(module, arch, None)
    if ctor is None:
        sys.exit(f"export_tvtask.py: torchvision {torchvision.__version__} has no {task} model {arch!r}")
    torch.manual_seed(0)
    model = (ctor(weights=None) if task == "video" else ctor(weights=None, weights_backbone=None)).eval()
    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, (torch.nn.Conv2d, torch.nn.Conv3d)):
            fan_in = m.weight[0].numel()
            with torch.no_grad():
                m.weight.copy_(torch.randn(m.weight.shape, generator=g) * (GAIN / fan_in) ** 0.5)
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            n = m.running_mean.numel()
            m.running_mean.copy_(torch.randn(n, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(n, generator=g) + 0.5)
    if task == "segmentation":
        torch.onnx.export(model, torch.zeros(1, 3, 224, 224), out, opset_version=opset, input_names=["input"],
                          output_names=["output"], do_constant_folding=True)
    elif task == "video":
        torch.onnx.export(model, torch.zeros(1, 3, 8, 112, 112), out, opset_version=opset, input_names=["input"],
                          output_names=["output"], do_constant_folding=True)
    else:
        # traced on an image of random pixels: the post-processing's shapes are then
        # not specialized to "no box passes the threshold"
        x = [torch.rand(3, 320, 320, generator=torch.Generator().manual_seed(2))]
        torch.onnx.export(model, (x,), out, opset_version=opset, input_names=["input"],
                          output_names=["boxes", "scores", "labels"], do_constant_folding=True)


if __name__ == "__main__":
    main()
