// The Python peers of the tests (test/python/: the Vertex AI SDK and KServe's model server) and of
// the benches (inference-perf): a virtualenv per requirements file, with that file installed, made
// once per machine into a cache folder keyed by the requirements file and the interpreter, under a
// lock file (two suites or two runs never install at once), like test/cluster/binaries.ts does for
// the control plane. The interpreter is PREDICTGATE_PYTHON, else the venv's own choices (python3.11
// for the tests' peers), else python3. A failed install is an error naming the package pip could
// not install and pip's last lines, never a silent skip. Also runs one Vertex SDK call
// (test/python/vertex_sdk_client.py) and reads its JSON line back.
import { createHash } from 'node:crypto';
import { spawn, spawnSync } from 'node:child_process';
import { appendFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cacheRoot, lockFile } from '../cluster/binaries.js';

/** The Python sources and requirements, in the source tree (tests run from dist/, these stay in test/). */
export const PYTHON_DIR = fileURLToPath(new URL('../../../test/python/', import.meta.url));
export const REQUIREMENTS = join(PYTHON_DIR, 'requirements.txt');
export const KSERVE_MODEL = join(PYTHON_DIR, 'kserve_model.py');
export const VERTEX_SDK_CLIENT = join(PYTHON_DIR, 'vertex_sdk_client.py');

/** The longest an install may take (about a minute on 2 cores from PyPI with an empty pip cache). */
const INSTALL_TIMEOUT_MS = 15 * 60_000;
/** Written into the venv once everything is installed; a venv without it is half made and is made again. */
const COMPLETE = '.predictgate-complete';

/** One virtualenv: what it installs, and the interpreters it may be made from, in order. */
export interface VenvSpec {
  /** Its name in messages and in the cache folder. */
  name: string;
  requirements: string;
  interpreters: readonly string[];
  /** The oldest Python it installs on, as [major, minor]. */
  oldest: readonly [number, number];
  /** Why those interpreters, for the error when none is found. */
  needs: string;
}

/** The tests' Python peers (test/python/requirements.txt). */
export const TEST_VENV: VenvSpec = {
  name: 'the Python test venv',
  requirements: REQUIREMENTS,
  interpreters: ['python3.11', 'python3'],
  oldest: [3, 11],
  needs: 'The Python peer tests need Python 3.11 (test/python/requirements.txt pins wheels for it)',
};

/** inference-perf, for the benches (test/python/inference-perf-requirements.txt). */
export const INFERENCE_PERF_VENV: VenvSpec = {
  name: 'the inference-perf venv',
  requirements: join(PYTHON_DIR, 'inference-perf-requirements.txt'),
  interpreters: ['python3.12', 'python3.13', 'python3'],
  oldest: [3, 12],
  needs: 'inference-perf needs Python 3.12 or newer (its requirements file pins wheels for 3.12)',
};

export interface BasePython {
  /** The interpreter itself (sys.executable: through a pyenv shim, the real one). */
  executable: string;
  /** e.g. 3.11.7 */
  version: string;
}

/**
 * The ways to run `cmd`: as it is, then, for a `pythonX.Y` that pyenv installed but does not select
 * (its shim refuses it), with PYENV_VERSION set to each installed X.Y version (pyenv's documented
 * way to choose one).
 */
function launches(cmd: string, env: NodeJS.ProcessEnv): NodeJS.ProcessEnv[] {
  const m = /^python(\d+\.\d+)$/.exec(cmd);
  if (!m) return [env];
  const r = spawnSync('pyenv', ['versions', '--bare'], { encoding: 'utf8', env });
  const installed = r.status === 0 ? r.stdout.split('\n').map((v) => v.trim()).filter((v) => v.startsWith(`${m[1]}.`)) : [];
  return [env, ...installed.reverse().map((v) => ({ ...env, PYENV_VERSION: v }))];
}

const atLeast = (version: string, [major, minor]: readonly [number, number]): boolean => {
  const [a, b] = version.split('.').map(Number);
  return a > major || (a === major && b >= minor);
};

/** Finds the interpreter a venv is made from: the first that runs and is new enough for the venv. */
export function basePython(env: NodeJS.ProcessEnv = process.env, spec: VenvSpec = TEST_VENV): BasePython {
  const candidates = env.PREDICTGATE_PYTHON ? [env.PREDICTGATE_PYTHON] : spec.interpreters;
  const tried: string[] = [];
  for (const cmd of candidates) {
    for (const launch of launches(cmd, env)) {
      const r = spawnSync(cmd, ['-c', 'import platform, sys; print(sys.executable); print(platform.python_version())'], { encoding: 'utf8', env: launch });
      const how = launch.PYENV_VERSION !== env.PYENV_VERSION ? `PYENV_VERSION=${launch.PYENV_VERSION} ${cmd}` : cmd;
      if (r.error || r.status !== 0) {
        tried.push(`${how}: ${r.error?.message ?? r.stderr.trim().split('\n')[0]}`);
        continue;
      }
      const [executable, version] = r.stdout.trim().split('\n');
      if (!atLeast(version, spec.oldest)) {
        tried.push(`${how}: Python ${version}`);
        continue;
      }
      return { executable, version };
    }
  }
  throw new Error(`${spec.needs} and none was found (${tried.join('; ')}). Install it, or set PREDICTGATE_PYTHON to an interpreter.`);
}

/** The venv folder: the Python version in the name, a digest of the requirements file and the interpreter after it. */
export function venvDir(py: BasePython, env: NodeJS.ProcessEnv = process.env, requirements = REQUIREMENTS): string {
  const digest = createHash('sha256').update(readFileSync(requirements)).update(`\0${py.version}\0${py.executable}`).digest('hex').slice(0, 12);
  return join(cacheRoot(env), 'python', `py${py.version}_${digest}`);
}

/** The python of a made venv. */
export function venvPython(dir: string): string {
  return join(dir, 'bin', 'python');
}

export interface Ran {
  code: number | null;
  signal: NodeJS.Signals | null;
  output: string;
}

/** Runs a command to its end with stdout and stderr together, killed after `timeoutMs`. */
export function run(file: string, args: string[], env: NodeJS.ProcessEnv, timeoutMs: number): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const chunks: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => chunks.push(b));
    child.stderr.on('data', (b: Buffer) => chunks.push(b));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, output: Buffer.concat(chunks).toString('utf8') });
    });
  });
}

/**
 * What pip could not install, from its output: the requirement or the package whose build failed
 * (pip's own words), or undefined when it does not say.
 */
export function failedPackage(output: string): string | undefined {
  const patterns = [
    /No matching distribution found for (\S+)/,
    /Could not find a version that satisfies the requirement (\S+)/,
    /Failed building wheel for (\S+)/,
    /Failed to build (\S+)/,
    /Building wheel for (\S+) \(pyproject\.toml\) did not run successfully/,
    /Cannot install (.+?) because these package versions have conflicting dependencies/,
    /Could not install packages due to an OSError[^\n]*/,
    /ResolutionImpossible[^\n]*/,
  ];
  for (const p of patterns) {
    const m = p.exec(output);
    if (m) return m[1] ?? m[0];
  }
  return undefined;
}

export function lastLines(text: string, n: number): string {
  return text.trimEnd().split('\n').slice(-n).map((l) => (l.length > 400 ? `${l.slice(0, 400)}…` : l)).join('\n');
}

/** pip as the harness runs it: no version check, no prompt, no user site-packages. */
export function pipEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return { ...env, PIP_DISABLE_PIP_VERSION_CHECK: '1', PIP_NO_INPUT: '1', PYTHONNOUSERSITE: '1' };
}

/**
 * Runs one step of an install (`python -m venv`, a pip install) to its end, its command and output
 * appended to `logFile`. A failure is an error naming the step, what it installs into, the package
 * pip could not install (when it says), the exit (or the signal and the time it ran), the log and its
 * last lines.
 */
export async function installStep(what: string, file: string, args: string[], env: NodeJS.ProcessEnv, timeoutMs: number, into: string, logFile: string): Promise<void> {
  const started = Date.now();
  const r = await run(file, args, env, timeoutMs);
  appendFileSync(logFile, `$ ${file} ${args.join(' ')}\n${r.output}\n`);
  if (r.code === 0) return;
  const pkg = failedPackage(r.output);
  throw new Error(
    `${what} failed${pkg ? ` (${pkg})` : ''} into ${into} (exit ${r.code ?? `${r.signal}, after ${Math.round((Date.now() - started) / 1000)} s`}); ` +
      `whole log in ${logFile}; its last lines:\n${lastLines(r.output, 20)}`,
  );
}

/**
 * Returns the venv's python, making the venv first when the cache lacks it (about a minute on 2 cores
 * from PyPI; instant after). `log` receives progress lines.
 */
export async function ensureVenv(spec: VenvSpec, log: (line: string) => void = () => {}, env: NodeJS.ProcessEnv = process.env): Promise<string> {
  const py = basePython(env, spec);
  const dir = venvDir(py, env, spec.requirements);
  if (existsSync(join(dir, COMPLETE))) return venvPython(dir);
  mkdirSync(join(dir, '..'), { recursive: true });
  const release = lockFile(`${dir}.lock`, INSTALL_TIMEOUT_MS, (line) => log(`${line}: another run is making ${spec.name} ${dir}`));
  try {
    if (existsSync(join(dir, COMPLETE))) return venvPython(dir);
    // Made in place (a venv does not survive a rename: its scripts name their folder); a half-made one is made again.
    rmSync(dir, { recursive: true, force: true });
    log(`making ${spec.name} ${dir} from ${spec.requirements} with Python ${py.version} (once per machine: about a minute on 2 cores)`);
    const started = Date.now();
    const logFile = `${dir}.pip.log`;
    writeFileSync(logFile, '');
    await installStep(`python${py.version} -m venv`, py.executable, ['-m', 'venv', dir], env, 120_000, dir, logFile);
    // Wheels only (no compiler on the path to a passing run), compiled to .pyc now: with
    // PYTHONDONTWRITEBYTECODE set, as it is on some machines, every import would compile again (12 s instead of 3).
    await installStep(`pip install -r ${relative(join(PYTHON_DIR, '..', '..'), spec.requirements)}`, venvPython(dir), ['-m', 'pip', 'install', '--progress-bar', 'off', '--only-binary=:all:', '--compile', '-r', spec.requirements], pipEnv(env), INSTALL_TIMEOUT_MS, dir, logFile);
    writeFileSync(join(dir, COMPLETE), `${new Date().toISOString()}\n`);
    log(`made ${spec.name} in ${Math.round((Date.now() - started) / 1000)} s`);
    return venvPython(dir);
  } finally {
    release();
  }
}

/** The tests' Python peers' venv (TEST_VENV). */
export const ensurePythonEnv = (log?: (line: string) => void, env?: NodeJS.ProcessEnv): Promise<string> => ensureVenv(TEST_VENV, log, env);

export type SdkResult = Record<string, unknown> & { ok: boolean };

/** An SDK call that must have succeeded (a failure shows the SDK's exception, not a bare `ok: false`). */
export function succeeded(r: SdkResult): SdkResult {
  if (!r.ok) throw new Error(`the SDK call failed: ${String(r.exception)}: ${String(r.message)}`);
  return r;
}

/** An SDK call that must have raised. */
export function raised(r: SdkResult): SdkResult {
  if (r.ok) throw new Error(`the SDK call succeeded, expected an exception: ${JSON.stringify(r)}`);
  return r;
}

/** The caller's environment without credentials, project or proxy settings of its own. */
export function sdkBaseEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (/^(https?|all|no)_proxy$/i.test(k) || /^(GOOGLE_|GCE_|CLOUDSDK_|REQUESTS_CA_BUNDLE$|CURL_CA_BUNDLE$|SSL_CERT_)/.test(k)) continue;
    env[k] = v;
  }
  return env;
}

/**
 * Runs test/python/vertex_sdk_client.py with `python` (the venv's) and `cmd` on stdin; its one JSON
 * line back. Killed after `timeoutMs` (the SDK retries a refused GET of the Endpoint for 120 s: the
 * test fails sooner, with what it printed).
 */
export function runSdk(python: string, cmd: Record<string, unknown>, env: NodeJS.ProcessEnv = {}, timeoutMs = 40_000): Promise<SdkResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(python, [VERTEX_SDK_CLIENT], { env: { ...sdkBaseEnv(), ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', reject);
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      const last = stdout.trim().split('\n').pop() ?? '';
      try {
        resolve(JSON.parse(last) as SdkResult);
      } catch {
        reject(new Error(`vertex_sdk_client.py ${JSON.stringify(cmd.op)} exited ${code ?? signal} without a JSON line; stdout:\n${stdout}\nstderr:\n${stderr}`));
      }
    });
    child.stdin.end(JSON.stringify(cmd));
  });
}
