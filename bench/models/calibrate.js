#!/usr/bin/env node
// Calibration for export_qdq.py: runs a float ONNX model on ONNX Runtime (CPU, one
// thread) over a few seeded random inputs and writes the range [min, max] of each graph
// output as JSON; export_qdq.py lists every activation it quantizes as an output first.
//
//   NODE_PATH=bench/ort/node_modules node calibrate.js MODEL.onnx INPUT DIMS RUNS OUT.json
//
// INPUT is the float32 input's name, DIMS like 1x3x224x224; inputs are uniform in
// [-1, 1) from a generator seeded by the run's number.
'use strict';

const fs = require('node:fs');
const ort = require('onnxruntime-node');

async function main() {
  const [model, input, dimText, runText, out] = process.argv.slice(2);
  if (!out) {
    process.stderr.write('usage: calibrate.js MODEL.onnx INPUT DIMS RUNS OUT.json\n');
    process.exit(2);
  }
  const dims = dimText.split('x').map(Number);
  const count = dims.reduce((a, b) => a * b, 1);
  const session = await ort.InferenceSession.create(model, { intraOpNumThreads: 1 });
  const ranges = {};
  for (let run = 0; run < Number(runText); run++) {
    let seed = (run + 1) * 2654435761 >>> 0;
    const next = () => {
      seed = (seed + 0x6d2b79f5) >>> 0;
      let t = seed;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
    const data = new Float32Array(count);
    for (let i = 0; i < count; i++) data[i] = next() * 2 - 1;
    const results = await session.run({ [input]: new ort.Tensor('float32', data, dims) });
    for (const [name, t] of Object.entries(results)) {
      let lo = Infinity;
      let hi = -Infinity;
      for (const v of t.data) {
        if (v < lo) lo = v;
        if (v > hi) hi = v;
      }
      const r = ranges[name] || [Infinity, -Infinity];
      ranges[name] = [Math.min(r[0], lo), Math.max(r[1], hi)];
    }
  }
  fs.writeFileSync(out, JSON.stringify(ranges));
}

main().catch((e) => {
  process.stderr.write(`calibrate.js: ${e.message}\n`);
  process.exit(1);
});
