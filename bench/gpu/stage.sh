#!/bin/bash
# Fills the stage folder bench/gpu/check.sh reads on a GPU machine (default .gpu,
# which .git/info/exclude should list): static binaries (xz), the zoo split in parts
# (zoo.1, zoo.2, ...: a call to a device machine carries at most 64 MiB with the working
# tree, so each part is carried by its own call and copied aside there), and a journal
# with squeezenet1_1 prebuilt for sm_90 here, without a GPU.
#   ZOO=../shared/zoo PARTS="resnet18 gpt2_tiny,mobilenet_v2" bash bench/gpu/stage.sh [STAGE]
# PARTS is a space-separated list of parts, each a comma-separated list of zoo models;
# the zoo's index.json and README.md go with the last part. The 64 MiB a call carries
# include the working tree (about 13 MiB), so the default parts stay under 50 MiB each.
set -euo pipefail
S=${1:-.gpu}; ZOO=${ZOO:-../shared/zoo}
PARTS=${PARTS:-"resnet18 gpt2_tiny,mobilenet_v2 bert_tiny,squeezenet1_1,lstm_tagger,gru_speech,control_flow"}
repo=$(mktemp -d)
rm -rf "$S" && mkdir -p "$S/bin" "$repo/squeezenet/1"
export CGO_ENABLED=0
go build -ldflags='-s -w' -o "$S/bin/kiln" ./cmd/kiln
# CPU_TESTS=1 adds kernels/cpu's tests, run on the GPU machine's CPU (over 6.5 minutes on
# an H100 host's 16 cores: they compile with gcc one kernel at a time)
tests="devices/cuda:cuda kernels/gpu:gpu vm:vm cmd/kiln/internal/conformance:conf compiler:compiler"
[ "${CPU_TESTS:-}" = 1 ] && tests="$tests kernels/cpu:cpu"
for p in $tests; do
	go test -c -ldflags='-s -w' -o "$S/bin/${p#*:}.test" "./${p%:*}"
done
cp -L /usr/lib/x86_64-linux-gnu/libOpenCL.so.1 "$S/bin/" 2>/dev/null || true
n=0
for part in $PARTS; do
	n=$((n + 1)); mkdir -p "$S/zoo.$n"
	for m in ${part//,/ }; do cp -r "$ZOO/$m" "$S/zoo.$n/"; done
done
cp "$ZOO/index.json" "$ZOO/README.md" "$S/zoo.$n/"
cp "$ZOO/squeezenet1_1/model.onnx" "$repo/squeezenet/1/"
KILN_CPU_ISA=avx2 "$S/bin/kiln" prebuild --model-repository "$repo" --target cuda --cuda-arch sm_90 --cache-dir "$S/journal" -q
rm -rf "$repo"
xz -T2 -6 "$S"/bin/kiln "$S"/bin/*.test
du -sh "$S"/*
