// The released original's guard reducer, loaded from the INSTALLED package, as a
// JSON-lines service for the differential tests (tests/qwen_reducer.py starts it).
//
//   node tests/qwen_reducer.mjs PACKAGE_DIR
//
// It finds, by name, the chunk that declares `reduceRepeatedToolFailureGuard`, then the
// esbuild module of that chunk the function belongs to (the region between two
// `// packages/...` path comments), and in it the top-level declarations the two entry
// points need, transitively: helper functions, constants (and the reminder and stop texts).  esbuild's `__name` helper
// (and the `__defProp` it uses) come, by name, from whichever chunk declares them.
// Those declarations alone are evaluated in a fresh node:vm context: nothing of the
// original is copied into this repository, and nothing else of it runs.
//
// Requests, one JSON object per line; answers, one per line, in order:
//   {"op": "describe"}             -> {"chunk", "declarations", "constants"}
//   {"op": "run", "inputs": [...]} -> {"results": [{"kind", "reason", "state"}, ...]}
//   {"op": "runs", "sequences": [[...], ...]} -> {"runs": [results, ...]}
//       with "alphabet": [input, ...], each sequence lists indexes into it instead
//       each input is the reducer's input ({mode, inputReliable, hasExternalInput,
//       hasQueuedPrompt, batch: {complete, observations}}), reduced in order from
//       createRepeatedToolFailureGuardState(); a missing field is `undefined`.
//   anything else, or a failure    -> {"error": "..."}
import fs from "node:fs";
import path from "node:path";
import readline from "node:readline";
import vm from "node:vm";

const ENTRY_POINTS = ["reduceRepeatedToolFailureGuard", "createRepeatedToolFailureGuardState"];
// The texts the session sends beside the reducer, read from the same module when there.
const TEXTS = ["REPEATED_TOOL_FAILURE_REMINDER", "REPEATED_TOOL_FAILURE_STOP_MESSAGE"];
const DECLARATION = /^(?:async\s+)?(?:function\*?|var|let|const|class)\s+([A-Za-z_$][\w$]*)/;

function fail(message) {
  process.stderr.write(`qwen_reducer: ${message}\n`);
  process.exit(2);
}

function chunkFiles(packageDir) {
  const dir = path.join(packageDir, "chunks");
  if (!fs.existsSync(dir)) fail(`no chunks/ in ${packageDir}`);
  return fs
    .readdirSync(dir)
    .filter((name) => name.endsWith(".js"))
    .sort()
    .map((name) => path.join(dir, name));
}

function findChunk(files, pattern, what) {
  for (const file of files) {
    const text = fs.readFileSync(file, "utf8");
    const match = pattern.exec(text);
    if (match) return { file, text, index: match.index };
  }
  fail(`no chunk declares ${what}`);
}

// Top-level statements of a region of esbuild output: a statement starts at column 0
// and runs until the next column-0 line that is not a closing bracket.
function statements(region) {
  const out = [];
  let current = null;
  for (const line of region.split("\n")) {
    const opensNew = line.length > 0 && !/^[\s})\]]/.test(line) && !line.startsWith("//");
    if (opensNew) {
      if (current) out.push(current.join("\n"));
      current = [line];
    } else if (current) {
      current.push(line);
    }
  }
  if (current) out.push(current.join("\n"));
  return out;
}

// Declarations of a region by name, with each function's `__name(f, "f");` statement.
function declarations(region) {
  const byName = new Map();
  for (const statement of statements(region)) {
    const declared = DECLARATION.exec(statement);
    const named = /^__name\(([A-Za-z_$][\w$]*),/.exec(statement);
    if (declared) {
      byName.set(declared[1], { source: statement, names: [] });
    } else if (named && byName.has(named[1])) {
      byName.get(named[1]).names.push(statement);
    }
  }
  return byName;
}

// Identifiers a piece of source mentions (strings and comments removed first).
function identifiers(source) {
  const code = source
    .replace(/\/\*[\s\S]*?\*\//g, " ")
    .replace(/\/\/[^\n]*/g, " ")
    .replace(/"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`(?:[^`\\]|\\.)*`/g, '""');
  return new Set(code.match(/(?<![\w$.])[A-Za-z_$][\w$]*/g) ?? []);
}

function load(packageDir) {
  const files = chunkFiles(packageDir);
  const entry = findChunk(files, /^function reduceRepeatedToolFailureGuard\(/m, ENTRY_POINTS[0]);
  const before = entry.text.lastIndexOf("\n// packages/", entry.index);
  const after = entry.text.indexOf("\n// packages/", entry.index);
  const region = entry.text.slice(before < 0 ? 0 : before, after < 0 ? undefined : after);
  const declared = declarations(region);
  const wanted = [];
  const seen = new Set();
  const queue = [...ENTRY_POINTS, ...TEXTS];
  while (queue.length > 0) {
    const name = queue.shift();
    if (seen.has(name)) continue;
    seen.add(name);
    const found = declared.get(name);
    if (!found) {
      if (ENTRY_POINTS.includes(name)) fail(`${name} is not declared in ${entry.file}`);
      continue;
    }
    wanted.push(name);
    for (const id of identifiers(found.source)) {
      if (declared.has(id) && !seen.has(id)) queue.push(id);
    }
  }
  // Keep the module's own order, so constants precede the functions that read them.
  const order = [...declared.keys()].filter((name) => wanted.includes(name));
  const helper = findChunk(files, /^var __name = /m, "esbuild's __name helper");
  const helpers = declarations(helper.text);
  for (const name of ["__defProp", "__name"]) {
    if (!helpers.has(name)) fail(`${name} is not declared in ${helper.file}`);
  }
  const source = [
    helpers.get("__defProp").source,
    helpers.get("__name").source,
    ...order.flatMap((name) => [declared.get(name).source, ...declared.get(name).names]),
    `({ ${[...order].join(", ")} })`,
  ].join("\n");
  const context = vm.createContext({});
  const loaded = vm.runInContext(source, context, { filename: "qwen-reducer-declarations.js" });
  for (const name of ENTRY_POINTS) {
    if (typeof loaded[name] !== "function") fail(`${name} did not evaluate to a function`);
  }
  const constants = {};
  for (const name of order) {
    const value = loaded[name];
    if (typeof value !== "function") constants[name] = JSON.parse(JSON.stringify(value));
  }
  return { chunk: path.basename(entry.file), declarations: order, constants, loaded };
}

const packageDir = process.argv[2];
if (!packageDir) fail("usage: node qwen_reducer.mjs PACKAGE_DIR");
const reducer = load(packageDir);
const reduce = reducer.loaded.reduceRepeatedToolFailureGuard;
const create = reducer.loaded.createRepeatedToolFailureGuardState;

function runSequence(inputs) {
  let state = create();
  const results = [];
  for (const input of inputs) {
    const result = reduce(state, input);
    state = result.state;
    results.push({ kind: result.kind, reason: result.reason ?? null, state });
  }
  return results;
}

function answer(request) {
  if (request.op === "describe") {
    return {
      chunk: reducer.chunk,
      declarations: reducer.declarations,
      constants: reducer.constants,
    };
  }
  if (request.op === "run" && Array.isArray(request.inputs)) {
    return { results: runSequence(request.inputs) };
  }
  if (request.op === "runs" && Array.isArray(request.sequences)) {
    const alphabet = request.alphabet;
    const spell = Array.isArray(alphabet)
      ? (sequence) => sequence.map((letter) => alphabet[letter])
      : (sequence) => sequence;
    return { runs: request.sequences.map((sequence) => runSequence(spell(sequence))) };
  }
  return { error: `unknown request ${JSON.stringify(request).slice(0, 200)}` };
}

const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on("line", (line) => {
  let reply;
  try {
    reply = answer(JSON.parse(line));
  } catch (error) {
    reply = { error: String(error?.stack ?? error) };
  }
  process.stdout.write(`${JSON.stringify(reply)}\n`);
});
