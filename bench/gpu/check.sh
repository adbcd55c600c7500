#!/bin/bash
# The CUDA device check: run on a GPU machine from the repository root, with the stage
# folder that bench/gpu/stage.sh filled (the static kiln binary, the GPU test binaries,
# the zoo, a journal prebuilt without a GPU) and an output folder. Each step is
# time-boxed and logged; a failing step does not stop the next. PART is tests (the
# device, the zoo, the prebuilt journal, serving), bench (kiln against PyTorch eager,
# kernel profiles, OpenCL on the GPU) or all.
#   bash bench/gpu/check.sh STAGE OUT [PART]
S=$(realpath "$1"); OUT=$2; PART=${3:-all}
mkdir -p "$OUT"
exec > >(tee "$OUT/log-$PART") 2>&1
step() { echo; echo "=== $1 ($(date +%T))"; }
unxz() { # xz, else Python's lzma
	if command -v xz >/dev/null; then xz -dc "$1"; else python3 -c 'import lzma,sys; sys.stdout.buffer.write(lzma.open(sys.argv[1]).read())' "$1"; fi
}

step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
lscpu | grep -E 'Model name|^CPU\(s\)'
command -v gcc cc xz
python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)'
ls /usr/local/cuda/lib64/libnvrtc.so* 2>/dev/null
for f in "$S"/bin/*.xz; do [ -x "${f%.xz}" ] || { unxz "$f" > "${f%.xz}"; chmod +x "${f%.xz}"; }; done
if [ -z "${KILN_NVRTC:-}" ] && ! ldconfig -p | grep -q 'libnvrtc.so.1[0-9]'; then
	KILN_NVRTC=$(timeout 20 find /usr/local/cuda*/ /opt /usr/lib -name 'libnvrtc.so.1[0-9]' 2>/dev/null | head -1); export KILN_NVRTC
fi
echo "KILN_NVRTC=${KILN_NVRTC:-}"
mkdir -p "$S/zoo"
for d in "$S"/zoo.*/*; do ln -sfn "$d" "$S/zoo/"; done
ls "$S" "$S/bin" "$S/zoo"
K=$S/bin/kiln
export KILN_ZOO=$S/zoo KILN_REQUIRE_GPU=1 KILN_REQUIRE_DATA=1 KILN_CACHE_DIR=/tmp/kiln-cache
step "kiln devices"
timeout 60 $K devices

if [ "$PART" != bench ]; then
step "devices/cuda (devicetest on CUDA, events)"
(cd devices/cuda && timeout 60 "$S/bin/cuda.test" -test.count=1 -test.v 2>&1 | grep -E '^(---|ok|FAIL|PASS)|cuda_test|timer_test' | head -60)
step "kernels/gpu on CUDA"
(cd kernels/gpu && timeout 150 "$S/bin/gpu.test" -test.run 'CUDA' -test.count=1 -test.v 2>&1 | grep -E '^(--- |ok|FAIL|PASS)' | head -60)
step "vm on CUDA"
(cd vm && timeout 60 "$S/bin/vm.test" -test.run 'CUDA' -test.count=1 -test.v 2>&1 | grep -E '^(--- |ok|FAIL|PASS)' | head -40)

if [ -x "$S/bin/compiler.test" ]; then
step "compiler: tensor cores on CUDA (tf32)"
(cd compiler && timeout 120 "$S/bin/compiler.test" -test.run 'TestTF32|TestTensorCores|TestRecipePrecision' -test.count=1 -test.v 2>&1 | grep -E '^(--- |ok|FAIL|PASS)|tensorcores' | head -40)
fi
step "zoo on CUDA (TestZooOnCUDA)"
(cd cmd/kiln/internal/conformance && timeout 200 "$S/bin/conf.test" -test.run 'TestZooOnCUDA' -test.count=1 -test.v 2>&1 | grep -vE '^=== ' | tail -60)

if $K run --help 2>/dev/null | grep -q -- '--precision'; then
step "the zoo at --precision tf32 (tolerance 1e-2)"
timeout 120 $K conformance --engine compiled --target cuda --precision tf32 --atol 1e-2 --rtol 1e-2 "$S/zoo" 2>&1 | tail -12
fi
step "a journal prebuilt without a GPU (KILN_CPU_ISA=avx2), read-only"
KILN_CPU_ISA=avx2 timeout 40 $K run --target cuda --cache readonly --cache-dir "$S/journal" "$S/zoo/squeezenet1_1/model.onnx" \
	--input-dir "$S/zoo/squeezenet1_1/test_data_set_0"
step "kiln serve: a KIND_GPU group on cuda:0 from that journal"
mkdir -p /tmp/srv/squeezenet/1 && cp "$S/zoo/squeezenet1_1/model.onnx" /tmp/srv/squeezenet/1/ && printf 'name: "squeezenet"\ninstance_group [{ kind: KIND_GPU, count: 1, gpus: [0] }]\n' > /tmp/srv/squeezenet/config.pbtxt
KILN_CPU_ISA=avx2 timeout 60 $K serve --model-repository /tmp/srv --cache-dir "$S/journal" --cache readonly --http-address :18000 --grpc-address "" --metrics-address :18002 > "$OUT/serve.log" 2>&1 &
srv=$!
for i in $(seq 60); do curl -sf localhost:18000/v2/models/squeezenet/ready >/dev/null && break; sleep 0.5; done
python3 - <<'PY'
import json, urllib.request
body = {"inputs": [{"name": "input", "shape": [1, 3, 224, 224], "datatype": "FP32", "data": [0.5] * (3 * 224 * 224)}]}
try:
    r = urllib.request.urlopen(urllib.request.Request("http://localhost:18000/v2/models/squeezenet/infer", json.dumps(body).encode(), {"Content-Type": "application/json"}), timeout=30)
    out = json.loads(r.read())["outputs"][0]
    print("served on the GPU:", out["name"], out["shape"], "first", out["data"][:3])
except Exception as e:
    print("serve FAILED:", e, getattr(e, "read", lambda: b"")()[:500])
PY
curl -s localhost:18002/metrics | grep -E '^kiln_(journal|compile_seconds_count)' | head
kill $srv 2>/dev/null; wait $srv 2>/dev/null; grep -iE 'gpu|cuda|journal|error' "$OUT/serve.log" | head -20

if [ -x "$S/bin/cpu.test" ]; then
step "kernels/cpu on this machine's CPU"
(cd kernels/cpu && timeout 200 "$S/bin/cpu.test" -test.count=1 -test.timeout 190s 2>&1 | grep -vE '^\s+\S+_test.go:[0-9]+: (ok|pass)' | tail -25)
fi
step "cold start: the PTX finished once and kept in the journal (driver cache off)"
rm -rf /tmp/j2 && cp -r "$S/journal" /tmp/j2
for i in 1 2; do
	CUDA_CACHE_DISABLE=1 KILN_CPU_ISA=avx2 timeout 60 $K serve --model-repository /tmp/srv --cache-dir /tmp/j2 --http-address :18010 --grpc-address "" --metrics-address :18012 > "$OUT/cold$i.log" 2>&1 &
	srv=$!
	for t in $(seq 60); do curl -sf localhost:18010/v2/health/live >/dev/null && break; sleep 0.5; done
	python3 -c '
import json, time, urllib.request
body = {"inputs": [{"name": "input", "shape": [1, 3, 224, 224], "datatype": "FP32", "data": [0.5] * (3 * 224 * 224)}]}
t = time.time()
urllib.request.urlopen(urllib.request.Request("http://localhost:18010/v2/models/squeezenet/infer", json.dumps(body).encode(), {"Content-Type": "application/json"}), timeout=60).read()
print("first request %.1f ms" % ((time.time() - t) * 1e3))' || echo "start $i: request FAILED"
	curl -s localhost:18012/metrics | grep -E '^kiln_journal_(hits|misses)_total'
	kill $srv; wait $srv 2>/dev/null
	grep -E 'model compiled' "$OUT/cold$i.log" | cut -c1-300
done
fi
if [ "$PART" != tests ]; then
step "resnet50 export"
timeout 90 python3 bench/gpu/torch_eager.py export-resnet50 /tmp/resnet50.onnx
step "kiln bench on CUDA (fp32)"
for spec in "resnet18 $S/zoo/resnet18/model.onnx --input-dir $S/zoo/resnet18/test_data_set_0" \
	"bert_tiny $S/zoo/bert_tiny/model.onnx --input-dir $S/zoo/bert_tiny/test_data_set_0" \
	"resnet50 /tmp/resnet50.onnx --input input=/tmp/resnet50.onnx.input.npy" \
	"mobilenet_v2 $S/zoo/mobilenet_v2/model.onnx --input-dir $S/zoo/mobilenet_v2/test_data_set_0" \
	"squeezenet1_1 $S/zoo/squeezenet1_1/model.onnx --input-dir $S/zoo/squeezenet1_1/test_data_set_0"; do
	set -- $spec; name=$1; shift
	echo "--- $name"; timeout 60 $K bench --target cuda --warmup 20 --iters 200 -q --json "$@" | tee -a "$OUT/kiln.jsonl"
done
if $K bench --help 2>/dev/null | grep -q -- '--precision'; then
step "kiln bench on CUDA (tf32)"
for spec in "resnet18 $S/zoo/resnet18/model.onnx --input-dir $S/zoo/resnet18/test_data_set_0" \
	"bert_tiny $S/zoo/bert_tiny/model.onnx --input-dir $S/zoo/bert_tiny/test_data_set_0" \
	"resnet50 /tmp/resnet50.onnx --input input=/tmp/resnet50.onnx.input.npy"; do
	set -- $spec; name=$1; shift
	echo "--- $name tf32"; timeout 60 $K bench --target cuda --precision tf32 --warmup 20 --iters 200 -q --json "$@" | tee -a "$OUT/kiln.jsonl"
done
fi
step "PyTorch eager on the same GPU"
timeout 150 python3 bench/gpu/torch_eager.py time --device cuda --iters 200 --warmup 20 --json "$OUT/torch.jsonl" \
	resnet18=$S/zoo/resnet18/model.onnx bert_tiny=$S/zoo/bert_tiny/model.onnx resnet50=/tmp/resnet50.onnx mobilenet_v2=$S/zoo/mobilenet_v2/model.onnx squeezenet1_1=$S/zoo/squeezenet1_1/model.onnx
timeout 150 python3 bench/gpu/torch_eager.py time --device cuda --iters 200 --warmup 20 --tf32 --json "$OUT/torch.jsonl" \
	resnet18=$S/zoo/resnet18/model.onnx bert_tiny=$S/zoo/bert_tiny/model.onnx resnet50=/tmp/resnet50.onnx
step "kiln bench --profile resnet18 and bert_tiny on CUDA"
timeout 45 $K bench --target cuda --warmup 5 --iters 20 -q --profile $S/zoo/resnet18/model.onnx --input-dir $S/zoo/resnet18/test_data_set_0 2>&1 | head -45
timeout 45 $K bench --target cuda --warmup 5 --iters 20 -q --profile $S/zoo/bert_tiny/model.onnx --input-dir $S/zoo/bert_tiny/test_data_set_0 2>&1 | head -45

if [ $SECONDS -lt 400 ]; then
step "OpenCL on this GPU (NVIDIA's ICD), textures"
ls /etc/OpenCL/vendors 2>/dev/null; ldconfig -p | grep -i opencl; timeout 20 find / -xdev -name 'libnvidia-opencl.so*' 2>/dev/null | head -3
if [ ! -e /etc/OpenCL/vendors/nvidia.icd ] && lib=$(timeout 20 find / -xdev -name 'libnvidia-opencl.so.1' 2>/dev/null | head -1) && [ -n "$lib" ]; then
	mkdir -p /etc/OpenCL/vendors && echo "$lib" > /etc/OpenCL/vendors/nvidia.icd
fi
export KILN_LIBOPENCL=$S/bin/libOpenCL.so.1
timeout 30 $K devices 2>&1 | grep -A3 opencl
if timeout 30 $K devices 2>/dev/null | grep -E '^opencl' | grep -qi nvidia; then
	for m in resnet18 mobilenet_v2; do
		timeout 40 $K run --target opencl -q --cache off $S/zoo/$m/model.onnx --input-dir $S/zoo/$m/test_data_set_0 | tail -2
		for tx in on off; do echo "--- $m textures=$tx"; timeout 40 $K bench --target opencl --textures $tx --warmup 10 --iters 100 -q --json $S/zoo/$m/model.onnx --input-dir $S/zoo/$m/test_data_set_0 | tee -a "$OUT/opencl.jsonl"; done
	done
	for tx in on off; do echo "--- resnet18 textures=$tx, per kernel"; timeout 40 $K bench --target opencl --textures $tx --warmup 5 --iters 20 -q --profile $S/zoo/resnet18/model.onnx --input-dir $S/zoo/resnet18/test_data_set_0 2>&1 | head -30; done
	(cd cmd/kiln/internal/conformance && timeout $((560 - SECONDS)) "$S/bin/conf.test" -test.run 'TestZooOnOpenCL$' -test.count=1 -test.v 2>&1 | grep -vE '^=== ' | tail -30)
fi
fi
fi
step "done"
