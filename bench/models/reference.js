#!/usr/bin/env node
// Writes ONNX Runtime reference data for one case of kiln's real-model set, in the
// ONNX backend-test layout: CASE/test_data_set_N/input_K.pb and output_K.pb (serialized
// TensorProto, graph-input and graph-output order) and label.txt (the set's inputs).
// fetch.sh calls it; onnxruntime-node comes from NODE_PATH.
//
//   node reference.js CASE_DIR 'SET | SET ...'
//
// A SET is space-separated inputs NAME:DTYPE:DIMS:FILL in the model's input order
// (NAME may hold colons):
// DTYPE float32|int64|bool, DIMS like 1x512 (empty: a scalar), FILL rand (uniform in
// [-1, 1) from a generator seeded by the case, set and input, so runs are repeatable),
// zeros, or a number (every element).
// ONNX Runtime runs on the CPU with one thread and every graph optimization.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const ort = require('onnxruntime-node');

const TYPES = {
  float32: [1, Float32Array],
  int64: [7, BigInt64Array],
  bool: [9, Uint8Array],
  float16: [10, Uint16Array],
  int32: [6, Int32Array],
  uint8: [2, Uint8Array],
  int8: [3, Int8Array],
  float64: [11, Float64Array],
};

function die(msg) {
  process.stderr.write(`reference.js: ${msg}\n`);
  process.exit(1);
}

// mulberry32, seeded from a string: a small repeatable generator.
function rng(seedText) {
  let h = 2166136261;
  for (const c of seedText) h = Math.imul(h ^ c.charCodeAt(0), 16777619);
  let a = h >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function makeInput(spec, seed) {
  const parts = spec.split(':'); // the name may hold colons ("onnx::Flatten_0")
  if (parts.length < 4) die(`bad input ${JSON.stringify(spec)}`);
  const [dtype, dimText, fill] = parts.slice(-3);
  const name = parts.slice(0, -3).join(':');
  if (!TYPES[dtype]) die(`bad input ${JSON.stringify(spec)}`);
  const dims = dimText === '' ? [] : dimText.split('x').map(Number);
  const count = dims.reduce((a, b) => a * b, 1);
  const Arr = TYPES[dtype][1];
  const data = new Arr(count);
  const next = rng(seed);
  for (let i = 0; i < count; i++) {
    let v = fill === 'rand' ? next() * 2 - 1 : fill === 'zeros' ? 0 : Number(fill);
    if (Number.isNaN(v)) die(`bad fill in ${JSON.stringify(spec)}`);
    if (dtype === 'int64') data[i] = BigInt(Math.round(v));
    else if (dtype === 'bool' || dtype === 'uint8' || dtype === 'int8' || dtype === 'int32') data[i] = Math.round(v);
    else data[i] = v;
  }
  return { name, tensor: new ort.Tensor(dtype, data, dims) };
}

// Protobuf wire encoding of the TensorProto fields used here: dims (1), data_type (2),
// name (8), raw_data (9).
function varint(n) {
  const out = [];
  let v = BigInt.asUintN(64, BigInt(n));
  do {
    let b = Number(v & 0x7fn);
    v >>= 7n;
    if (v !== 0n) b |= 0x80;
    out.push(b);
  } while (v !== 0n);
  return Buffer.from(out);
}

function field(num, wire, payload) {
  return Buffer.concat([varint((num << 3) | wire), payload]);
}

function tensorProto(name, t) {
  const entry = TYPES[t.type];
  if (!entry) die(`output ${name}: type ${t.type} is not handled`);
  const data = t.data;
  const raw = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  const parts = t.dims.map((d) => field(1, 0, varint(d)));
  parts.push(field(2, 0, varint(entry[0])));
  const nameBytes = Buffer.from(name, 'utf8');
  parts.push(field(8, 2, Buffer.concat([varint(nameBytes.length), nameBytes])));
  parts.push(field(9, 2, Buffer.concat([varint(raw.length), raw])));
  return Buffer.concat(parts);
}

async function main() {
  const [caseDir, setsText] = process.argv.slice(2);
  if (!caseDir || !setsText) die("usage: node reference.js CASE_DIR 'SET | SET ...'");
  const session = await ort.InferenceSession.create(path.join(caseDir, 'model.onnx'), {
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
    logSeverityLevel: 3,
  });
  const sets = setsText.split('|').map((s) => s.trim()).filter((s) => s !== '');
  for (const [k, set] of sets.entries()) {
    const specs = set.split(/\s+/);
    if (specs.length !== session.inputNames.length) {
      die(`${caseDir} set ${k}: ${specs.length} inputs, the model has ${session.inputNames.length} (${session.inputNames.join(', ')})`);
    }
    const dir = path.join(caseDir, `test_data_set_${k}`);
    fs.rmSync(dir, { recursive: true, force: true });
    fs.mkdirSync(dir, { recursive: true });
    const feeds = {};
    specs.forEach((spec, i) => {
      const { name, tensor } = makeInput(spec, `${path.basename(caseDir)}/${k}/${i}`);
      if (name !== session.inputNames[i]) die(`${caseDir} set ${k}: input ${i} is ${session.inputNames[i]}, not ${name}`);
      feeds[name] = tensor;
      fs.writeFileSync(path.join(dir, `input_${i}.pb`), tensorProto(name, tensor));
    });
    const results = await session.run(feeds);
    session.outputNames.forEach((name, i) => {
      fs.writeFileSync(path.join(dir, `output_${i}.pb`), tensorProto(name, results[name]));
    });
    fs.writeFileSync(path.join(dir, 'label.txt'), `${set}\n`);
  }
}

main().catch((e) => die(e.stack || String(e)));
