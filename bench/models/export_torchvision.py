#!/usr/bin/python3
"""Exports a torchvision network to ONNX for kiln's real-model set (fetch.sh calls it).

    /usr/bin/python3 export_torchvision.py ARCH OPSET OUT.onnx

ARCH is a torchvision.models constructor (efficientnet_b0, resnet50, vit_b_16, ...). The
weights are random (torch.manual_seed(0), torchvision's own initialization): no network
is needed, and speed and numerics exercise the same graph as the trained model. Batch
norms get running statistics, and linear layers weights, drawn from a seeded generator,
so batch norms are not identities and no head starts at zero.
The input is float32 [1, 3, 224, 224] named "input" (the batch dim fixed), the output
"output". Needs Debian's python3-torch and python3-torchvision.
"""
import sys

import torch
import torchvision


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: export_torchvision.py ARCH OPSET OUT.onnx")
    arch, opset, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    ctor = getattr(torchvision.models, arch, None)
    if ctor is None:
        sys.exit(f"export_torchvision.py: torchvision {torchvision.__version__} has no model {arch!r}")
    torch.manual_seed(0)
    model = ctor(weights=None).eval()
    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, torch.nn.Linear):
            # some heads start at zero (ViT's) or near it: give every linear layer weights
            # that keep its outputs of the order of its inputs, so the outputs compared
            # with ONNX Runtime's are not all zero
            with torch.no_grad():
                m.weight.copy_(torch.randn(m.weight.shape, generator=g) / m.in_features ** 0.5)
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            n = m.running_mean.numel()
            m.running_mean.copy_(torch.randn(n, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(n, generator=g) + 0.5)
    x = torch.zeros(1, 3, 224, 224)
    # with gradients enabled (and parameters requiring them): otherwise eval-mode
    # transformer layers take PyTorch's fused attention fast path, which has no ONNX export
    with torch.enable_grad():
        torch.onnx.export(model, x, out, opset_version=opset, input_names=["input"], output_names=["output"],
                          do_constant_folding=True)


if __name__ == "__main__":
    main()
