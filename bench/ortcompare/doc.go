// Command ortcompare benchmarks kiln side by side with ONNX Runtime (the npm package
// onnxruntime-node, driven by bench/ort/bench.js) on the model zoo, in one run.
//
// For each model it converts test_data_set_0's inputs into the ORT runner's format,
// measures kiln's cold compile (the wall time of `kiln compile -O L`, once per model and
// level), and then, for each thread count, runs R rounds; a round runs `kiln bench` and
// the ORT runner, each in its own process, so that both engines see the same machine
// conditions: round 1 in the order of --engines, each later round in that order rotated
// by one more (the second of two back-to-back runs measured 3-4% slower here, so no
// engine always runs first). The table gives, per model and thread count,
// the median over rounds of each round's p50 latency, the ratio kiln/ORT of those
// medians, the ratio "by round" (the median over rounds of each round's kiln p50 over
// that round's ORT p50: a slow spell of the machine spanning a few rounds moves both
// sides of a round's ratio, where it can move one engine's median and not the other's;
// JSON ratio_kiln_over_ort_by_round) and the compile time. An engine that fails on a
// model gets its error in the table row; the run goes on.
//
// --levels 0,3 compiles and measures kiln at each of those graph optimization levels
// (kiln compile -O, 0 to 3; default 3 alone): every level has its own compiled file and
// compile time, and each round runs kiln at every level, ascending, where --engines puts
// kiln, so that drift hits all alike. With more than one level the table has, per level
// L, an "OL p50 ms", an "OL/ORT" and an "OL compile s" column, plus the highest level's
// p50 over the lowest's ("O3/O0"), and the geometric means come per level and for
// O3/O0; with one level it is the table above. In the JSON, engines.kiln and
// ratio_kiln_over_ort are the highest level, engines["kiln-O<n>"] each lower one;
// kiln_compiles, kiln_levels (p50 and ratio to ORT per level) and
// ratio_high_over_low_level hold the rest.
//
// --engines kiln,kiln-generic,ort adds kiln's generic executable (compiled once
// with the model's symbolic dims free, `kiln compile` without --input-dir, serving every
// shape) run on the same inputs: the table gains its p50, its ratio to ORT, the
// specialized executable's p50 over it (kiln/generic) and its compile time.
//
// --engines kiln,kiln-opencl,ort adds kiln compiled for the OpenCL target (`kiln
// compile --target opencl` at the highest level, for the data set's shapes: GPU kernels
// where the GPU strategies build them, the rest on the host CPU with copies at the
// boundaries), run with `kiln bench --target opencl` on the same inputs: the table
// gains its p50, its ratio to kiln on the CPU (opencl/kiln) and to ORT (opencl/ORT)
// and its compile time, the JSON engines["kiln-opencl"] and kiln_opencl_compile_s.
// It needs an OpenCL driver; without one its compile fails and the rows say so. On
// PoCL (OpenCL on the CPU) its p50 measures the GPU path's overheads, not a GPU.
//
// --engines kiln,kiln@avx2,kiln@generic,ort adds kiln compiled and run with the
// instruction set capped (KILN_CPU_ISA=avx512, avx2, sse4 or generic) at the highest
// level, alternating with the uncapped kiln and ORT in every round: the table gains each
// cap's p50 and its ratio to ORT, the JSON engines["kiln@avx2"] and kiln_isa_compile_s.
// A cap above the CPU's own changes nothing (a cap never adds a feature).
//
//	cd bench/ort && npm install          # once: onnxruntime-node, CPU library included
//	go run ./bench/ortcompare            # all zoo models, 1 and 2 threads, 5 rounds
//	go run ./bench/ortcompare --engines ort --models resnet18,bert_tiny --json out.json
//
// Flags: --zoo DIR (default $KILN_ZOO, else ../shared/zoo beside the module root),
// --models a,b (default: every folder of the zoo holding model.onnx), --set N (the
// test_data_set_N used, default 0), --threads 1,2, --rounds R (default 5), --iters N
// (default: chosen per model, engine (each kiln level apart) and thread count from a
// short probe run so that one round takes about --target, 750ms), --warmup W (default:
// iters/10, 3 to 100), --engines kiln,ort (also kiln-generic, kiln-opencl, kiln@ISA), --levels 3
// (see above), --kiln PATH (default: built once with go build ./cmd/kiln), --node PATH,
// --ort-dir DIR (default bench/ort), --json FILE (all raw results), --workdir DIR
// (kept; default a temporary folder, removed at the end), --run-timeout (5m per
// benchmark process), --compile-timeout (10m per kiln compile), --profile DIR (after a
// model's rounds, each engine once more with its profiler: NAME-tT-kiln.txt is `kiln
// bench --profile`'s kernels by time, NAME-tT-ort.json ONNX Runtime's kernel time by op
// type and by node with input shapes, from bench.js --profile).
//
// Besides the medians, each row shows the spread of the round p50s and the share of the
// machine's CPU that other processes took while the engines ran (from /proc/stat, less
// the engine's own CPU time): rows where it is above a few percent were measured on a
// shared machine. --json keeps every run's result line, wall and CPU time and load.
// The exit status is 0 when every run succeeded, 1 when an engine failed somewhere
// (the table says where), 2 for a usage or setup error and 130 when interrupted.
//
// The ORT runner runs with MALLOC_MMAP_THRESHOLD_=33554432 and
// MALLOC_TRIM_THRESHOLD_=17179869184 (glibc would otherwise return and re-map ORT's
// large buffers on every run); kiln runs with the environment as it is.
package main
