// The gcloud CLI as the tests run it: found on PATH (the suites skip its tests without it), set up by
// environment only (an isolated config folder, the gateway as the aiplatform API, no proxy, no
// metadata server, no usage reporting), so no traffic leaves loopback, and run to its end.
import { execFile } from 'node:child_process';
import { accessSync, constants as fsConstants } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';

/** Absolute path of `cmd` on PATH, or undefined. */
export function onPath(cmd: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    const file = join(dir, cmd);
    try {
      accessSync(file, fsConstants.X_OK);
      return file;
    } catch {
      // not here
    }
  }
  return undefined;
}

export const GCLOUD = onPath('gcloud');
export const GCLOUD_TIMEOUT_MS = 60_000;

export interface GcloudSetup {
  /** CLOUDSDK_CONFIG: a folder of the test's own. */
  config: string;
  /** The gateway's origin, http://127.0.0.1:PORT. */
  api: string;
  project: string;
  /** CLOUDSDK_AUTH_ACCESS_TOKEN_FILE, when the calls do not give --access-token-file. */
  tokenFile?: string;
}

export interface GcloudResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Env-only gcloud setup: isolated config dir, our gateway as the aiplatform API, no other traffic. */
export function gcloudEnv(s: GcloudSetup): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    // Nothing from the caller's gcloud setup (except which Python to use), and no proxies: loopback only.
    if (k.startsWith('CLOUDSDK_') && !k.startsWith('CLOUDSDK_PYTHON')) continue;
    if (/^(https?|all|no)_proxy$/i.test(k)) continue;
    if (k === 'GOOGLE_APPLICATION_CREDENTIALS') continue;
    env[k] = v;
  }
  return {
    ...env,
    CLOUDSDK_CONFIG: s.config,
    CLOUDSDK_CORE_DISABLE_PROMPTS: '1',
    CLOUDSDK_CORE_PROJECT: s.project,
    CLOUDSDK_API_ENDPOINT_OVERRIDES_AIPLATFORM: `${s.api}/`, // the trailing slash is required
    ...(s.tokenFile ? { CLOUDSDK_AUTH_ACCESS_TOKEN_FILE: s.tokenFile } : {}),
    CLOUDSDK_CORE_CHECK_GCE_METADATA: 'false', // else a DNS lookup of metadata.google.internal
    CLOUDSDK_METRICS_ENVIRONMENT: 'predictgate-test', // else a GCE probe for the user agent
    CLOUDSDK_CORE_DISABLE_USAGE_REPORTING: 'true',
    CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK: 'true',
    CLOUDSDK_CORE_ENABLE_FEATURE_FLAGS: 'false',
    CLOUDSDK_SURVEY_DISABLE_PROMPTS: 'true',
    CLOUDSDK_CORE_DISABLE_FILE_LOGGING: 'true',
  };
}

/** `gcloud ARGS` to its end (never rejects on a non-zero exit; rejects when it could not run). */
export function gcloud(s: GcloudSetup, args: string[]): Promise<GcloudResult> {
  return new Promise((resolve, reject) => {
    execFile(GCLOUD as string, args, { env: gcloudEnv(s), timeout: GCLOUD_TIMEOUT_MS, encoding: 'utf8' }, (err, stdout, stderr) => {
      if (err && typeof err.code !== 'number') {
        reject(new Error(`gcloud ${args.join(' ')} failed to run (${err.signal ?? err.code ?? err.message}); stderr:\n${stderr}`));
        return;
      }
      resolve({ code: err ? (err.code as number) : 0, stdout, stderr });
    });
  });
}

/**
 * A config folder of a describe block's own, holding `token` as the access token file: made before
 * the block's tests and removed after them (nothing while gcloud is absent). `run` calls gcloud
 * with it against the gateway at `api()`, in `project`.
 */
export function gcloudWithToken(token: string, api: () => string, project: string): { folder(): string; run(args: string[]): Promise<GcloudResult> } {
  let cfg = '';
  beforeAll(async () => {
    if (!GCLOUD) return;
    cfg = await mkdtemp(join(tmpdir(), 'predictgate-gcloud-'));
    await writeFile(join(cfg, 'token'), `${token}\n`);
  });
  afterAll(async () => {
    if (cfg) await rm(cfg, { recursive: true, force: true });
  });
  return { folder: () => cfg, run: (args) => gcloud({ config: cfg, api: api(), project, tokenFile: join(cfg, 'token') }, args) };
}
