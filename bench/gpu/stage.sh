#!/bin/bash
# Fills the stage folder bench/gpu/check.sh reads on a GPU machine (default .gpu,
# which .git/info/exclude should list): static binaries (xz), the zoo split in three
# parts of about 50 MB (zoo.1, zoo.2, zoo.3: a call to a device machine carries at most
# 64 MiB with the working tree), and a journal with squeezenet1_1 prebuilt for sm_90
# here, without a GPU.
#   ZOO=../shared/zoo bash bench/gpu/stage.sh [STAGE]
set -euo pipefail
S=${1:-.gpu}; ZOO=${ZOO:-../shared/zoo}
repo=$(mktemp -d)
rm -rf "$S" && mkdir -p "$S/bin" "$S/zoo.1" "$S/zoo.2" "$S/zoo.3" "$repo/squeezenet/1"
export CGO_ENABLED=0
go build -ldflags='-s -w' -o "$S/bin/kiln" ./cmd/kiln
for p in devices/cuda:cuda kernels/gpu:gpu vm:vm cmd/kiln/internal/conformance:conf; do
	go test -c -ldflags='-s -w' -o "$S/bin/${p#*:}.test" "./${p%:*}"
done
cp -L /usr/lib/x86_64-linux-gnu/libOpenCL.so.1 "$S/bin/" 2>/dev/null || true
cp -r "$ZOO/resnet18" "$ZOO/squeezenet1_1" "$S/zoo.1/"
cp -r "$ZOO/gpt2_tiny" "$ZOO/mobilenet_v2" "$ZOO/lstm_tagger" "$S/zoo.2/"
cp -r "$ZOO/bert_tiny" "$ZOO/gru_speech" "$ZOO/control_flow" "$ZOO/index.json" "$ZOO/README.md" "$S/zoo.3/"
cp "$ZOO/squeezenet1_1/model.onnx" "$repo/squeezenet/1/"
KILN_CPU_ISA=avx2 "$S/bin/kiln" prebuild --model-repository "$repo" --target cuda --cuda-arch sm_90 --cache-dir "$S/journal" -q
rm -rf "$repo"
xz -T2 -6 "$S"/bin/kiln "$S"/bin/*.test
du -sh "$S"/*
