#!/usr/bin/env node
// ONNX Runtime (CPU) runner for kiln's side-by-side benchmark; the driver is
// bench/ortcompare, which writes the inputs and sets the malloc environment.
//
//   MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=17179869184 \
//     node bench/ort/bench.js --model M.onnx --inputs DIR --threads T --iters N --warmup W \
//       [--profile FILE]
//
// DIR/inputs.json is {"inputs":[{"index":K,"name":"...","dtype":"FLOAT","dims":[...],
// "file":"input_K.bin"}, ...]} in graph-input order; each file holds the tensor's
// elements as raw little-endian bytes. Input K is fed under the session's K-th input
// name (the name in the file is informative: a different one draws a warning).
//
// Prints ONE JSON line on stdout:
//   {"engine":"ort","p50_ms":..,"p90_ms":..,"p99_ms":..,"min_ms":..,"mean_ms":..,
//    "iters":N,"threads":T,"warmup":W,"load_ms":..,"js_hop_ms":..,"version":".."}
// load_ms is the session creation; js_hop_ms is the median cost of the setImmediate
// hop that InferenceSession.run() takes before its synchronous native call (included
// in every timing; a few microseconds).
// With --profile FILE, a second session with ONNX Runtime's profiler on runs the same
// inputs --iters times after the timed runs (so the profiler costs the timings nothing)
// and FILE gets {"runs":N,"ops":[{"op":"Conv","ms":..}],"nodes":[{"node":"..","op":"..",
// "ms":..,"shapes":[[..]..]}]}: kernel milliseconds per run by op type and by node, the
// node's input shapes as the profiler reports them, largest first.
// Percentiles interpolate linearly between the closest ranks (numpy's default).
// Errors go to stderr with a non-zero exit status.
'use strict';

const fs = require('node:fs');
const path = require('node:path');

// ONNX TensorProto.DataType enum names -> [onnxruntime-common type, typed array].
const DTYPES = {
  FLOAT: ['float32', Float32Array],
  DOUBLE: ['float64', Float64Array],
  FLOAT16: ['float16', Uint16Array],
  INT8: ['int8', Int8Array],
  UINT8: ['uint8', Uint8Array],
  INT16: ['int16', Int16Array],
  UINT16: ['uint16', Uint16Array],
  INT32: ['int32', Int32Array],
  UINT32: ['uint32', Uint32Array],
  INT64: ['int64', BigInt64Array],
  UINT64: ['uint64', BigUint64Array],
  BOOL: ['bool', Uint8Array],
};

function usage(msg) {
  if (msg) process.stderr.write(`bench.js: ${msg}\n`);
  process.stderr.write(
    'usage: node bench.js --model PATH --inputs DIR --threads T --iters N --warmup W\n');
  process.exit(2);
}

function parseArgs(argv) {
  const opts = { threads: 1, iters: 100, warmup: 10 };
  for (let i = 0; i < argv.length; i++) {
    let key = argv[i];
    let val;
    if (!key.startsWith('--')) usage(`unexpected argument ${JSON.stringify(key)}`);
    key = key.slice(2);
    const eq = key.indexOf('=');
    if (eq >= 0) {
      val = key.slice(eq + 1);
      key = key.slice(0, eq);
    } else {
      if (i + 1 >= argv.length) usage(`--${key} needs a value`);
      val = argv[++i];
    }
    switch (key) {
      case 'model':
      case 'inputs':
      case 'profile':
        opts[key] = val;
        break;
      case 'threads':
      case 'iters':
      case 'warmup': {
        const n = Number(val);
        const min = key === 'warmup' ? 0 : 1;
        if (!Number.isInteger(n) || n < min) usage(`--${key} wants an integer >= ${min}, got ${val}`);
        opts[key] = n;
        break;
      }
      default:
        usage(`unknown flag --${key}`);
    }
  }
  if (!opts.model) usage('--model is required');
  if (!opts.inputs) usage('--inputs is required');
  return opts;
}

// loadInputs reads DIR/inputs.json and the raw files into onnxruntime Tensors, keyed by
// the session's input names.
function loadInputs(ort, dir, inputNames) {
  const manifestPath = path.join(dir, 'inputs.json');
  let manifest;
  try {
    manifest = JSON.parse(fs.readFileSync(manifestPath, 'utf8'));
  } catch (e) {
    throw new Error(`reading ${manifestPath}: ${e.message}`);
  }
  const list = manifest.inputs;
  if (!Array.isArray(list)) throw new Error(`${manifestPath}: no "inputs" array`);
  if (list.length !== inputNames.length) {
    throw new Error(`${manifestPath}: ${list.length} inputs, the model has ${inputNames.length} ` +
      `(${inputNames.join(', ')})`);
  }
  const feeds = {};
  list.forEach((inp, k) => {
    const index = inp.index === undefined ? k : inp.index;
    if (index !== k) throw new Error(`${manifestPath}: entry ${k} has index ${index}`);
    const name = inputNames[k];
    if (inp.name && inp.name !== name) {
      process.stderr.write(`bench.js: warning: ${manifestPath}: input ${k} is named ${inp.name}, ` +
        `the model calls it ${name}; feeding it by position\n`);
    }
    const dt = DTYPES[inp.dtype];
    if (!dt) throw new Error(`${manifestPath}: input ${k} (${name}): unsupported dtype ${inp.dtype}`);
    const [ortType, Arr] = dt;
    const dims = inp.dims.map(Number);
    const count = dims.reduce((a, b) => a * b, 1);
    const file = path.join(dir, inp.file);
    const raw = fs.readFileSync(file);
    if (raw.length !== count * Arr.BYTES_PER_ELEMENT) {
      throw new Error(`${file}: ${raw.length} bytes, want ${count * Arr.BYTES_PER_ELEMENT} ` +
        `for ${inp.dtype}[${dims.join(',')}]`);
    }
    // Copy into a fresh, aligned buffer (a Buffer may sit at any offset of a shared pool).
    const data = new Arr(count);
    new Uint8Array(data.buffer).set(raw);
    feeds[name] = new ort.Tensor(ortType, data, dims);
  });
  return feeds;
}

// percentile interpolates linearly between the closest ranks of the sorted values.
function percentile(sorted, q) {
  if (sorted.length === 1) return sorted[0];
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.min(lo + 1, sorted.length - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}

// writeProfile runs the inputs n times on a profiling session and writes the per-op and
// per-node summary of ONNX Runtime's trace to file.
async function writeProfile(ort, opts, feeds, file) {
  const prefix = path.join(path.dirname(path.resolve(file)), `ortprofile-${process.pid}`);
  const session = await ort.InferenceSession.create(opts.model, {
    executionProviders: ['cpu'],
    intraOpNumThreads: opts.threads,
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
    executionMode: 'sequential',
    enableProfiling: true,
    profileFilePrefix: prefix,
  });
  for (let i = 0; i < opts.warmup; i++) await session.run(feeds);
  // the warm-up runs are in the trace too: count every run it holds
  const runs = opts.warmup + opts.iters;
  for (let i = 0; i < opts.iters; i++) await session.run(feeds);
  const trace = session.endProfiling();
  await session.release();
  const traceFile = typeof trace === 'string' && trace ? trace : null;
  const dir = path.dirname(prefix);
  const found = traceFile ? [traceFile] : fs.readdirSync(dir)
    .filter((f) => f.startsWith(path.basename(prefix)) && f.endsWith('.json'))
    .map((f) => path.join(dir, f));
  if (found.length === 0) throw new Error(`ONNX Runtime wrote no profile under ${prefix}*`);
  const events = JSON.parse(fs.readFileSync(found[0], 'utf8'));
  found.forEach((f) => fs.rmSync(f, { force: true }));
  const byOp = new Map();
  const byNode = new Map();
  for (const e of events) {
    if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time') || !e.args) continue;
    const op = e.args.op_name;
    const node = e.name.slice(0, -'_kernel_time'.length);
    byOp.set(op, (byOp.get(op) || 0) + e.dur);
    const prev = byNode.get(node) || { node, op, us: 0, shapes: (e.args.input_type_shape || []).map((t) => Object.values(t)[0]) };
    prev.us += e.dur;
    byNode.set(node, prev);
  }
  const perRun = (us) => round6(us / 1000 / runs);
  const out = {
    runs,
    ops: [...byOp].map(([op, us]) => ({ op, ms: perRun(us) })).sort((a, b) => b.ms - a.ms),
    nodes: [...byNode.values()].map((n) => ({ node: n.node, op: n.op, ms: perRun(n.us), shapes: n.shapes }))
      .sort((a, b) => b.ms - a.ms),
  };
  fs.writeFileSync(file, JSON.stringify(out, null, 1) + '\n');
}

// round6 rounds to six decimals (nanoseconds, for milliseconds).
function round6(x) {
  return Math.round(x * 1e6) / 1e6;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const ort = require('onnxruntime-node');

  const t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(opts.model, {
    executionProviders: ['cpu'],
    intraOpNumThreads: opts.threads,
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
    executionMode: 'sequential',
  });
  const loadMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const feeds = loadInputs(ort, opts.inputs, session.inputNames);

  for (let i = 0; i < opts.warmup; i++) await session.run(feeds);
  const times = new Float64Array(opts.iters);
  for (let i = 0; i < opts.iters; i++) {
    const s = process.hrtime.bigint();
    await session.run(feeds);
    times[i] = Number(process.hrtime.bigint() - s) / 1e6;
  }
  const sorted = Array.from(times).sort((a, b) => a - b);
  // session.run() hops through setImmediate before the synchronous native run; its
  // cost is inside every timing above. Measure it so tiny models can be judged.
  const hops = new Float64Array(200);
  for (let i = 0; i < hops.length; i++) {
    const s = process.hrtime.bigint();
    await new Promise((resolve) => setImmediate(resolve));
    hops[i] = Number(process.hrtime.bigint() - s) / 1e6;
  }
  const hopsSorted = Array.from(hops).sort((a, b) => a - b);
  const mean = sorted.reduce((a, b) => a + b, 0) / sorted.length;
  const pkg = require('onnxruntime-node/package.json');
  const out = {
    engine: 'ort',
    p50_ms: round6(percentile(sorted, 0.5)),
    p90_ms: round6(percentile(sorted, 0.9)),
    p99_ms: round6(percentile(sorted, 0.99)),
    min_ms: round6(sorted[0]),
    mean_ms: round6(mean),
    iters: opts.iters,
    threads: opts.threads,
    warmup: opts.warmup,
    load_ms: round6(loadMs),
    js_hop_ms: round6(percentile(hopsSorted, 0.5)),
    version: pkg.version,
  };
  await session.release();
  if (opts.profile) await writeProfile(ort, opts, feeds, opts.profile);
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch((e) => {
  process.stderr.write(`bench.js: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
