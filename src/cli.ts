// The `predictgate` command: local mode, the (cluster) gateway and controller, and the bundled
// example model servers. Parses arguments, builds the config, installs signal handling.
import { resolve } from 'node:path';
import { readFileSync } from 'node:fs';
import { loadConfig, settingsHelp } from './config.js';
import { createLogger, flushLogs } from './log.js';
import { MODEL_NAMES, modelOptionsFromEnv, startModelServer } from './models/index.js';

const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

const HELP = `predictgate ${VERSION}: a Vertex-style prediction endpoint gateway for Kubernetes

Usage:
  predictgate local [DIR]       Run the gateway, the reconcilers and every DeployedModel of the
                                manifests in DIR (default: .) as local processes. Edits to DIR
                                take effect without a restart.
  predictgate gateway           The gateway of a cluster: routes from the DeployedModels and
                                Endpoints it watches (read-only) through the Kubernetes API.
  predictgate controller        The controller of a cluster: runs each DeployedModel as a
                                Deployment, Service (and HPA) and reports the conditions of
                                DeployedModels and Endpoints. Leader-elected.
  The Kubernetes modes find the cluster through KUBECONFIG, ~/.kube/config or the pod's
  service account.
  predictgate model NAME        Run a bundled example model server (${MODEL_NAMES.join(', ')}),
                                configured by the Vertex container contract: AIP_HTTP_PORT
                                (default 8080), AIP_PREDICT_ROUTE, AIP_HEALTH_ROUTE, and
                                AIP_HTTP_HOST (default 127.0.0.1; 0.0.0.0 in a
                                Kubernetes pod).
  predictgate help | --help     This text.
  predictgate --version

Settings (flag or environment variable; flags win):
${settingsHelp()}
`;

/** Runs until a signal; first SIGTERM/SIGINT stops gracefully, a second one exits at once. */
function onSignals(stop: () => Promise<void>, log: (msg: string) => void): void {
  let stopping = false;
  const handler = (signal: NodeJS.Signals): void => {
    if (stopping) {
      log(`${signal} again: exiting now`);
      flushLogs();
      process.exit(1);
    }
    stopping = true;
    log(`${signal}: draining`);
    stop().then(
      () => {
        log('stopped');
        flushLogs();
        process.exit(0);
      },
      (err: unknown) => {
        log(`error while stopping: ${err instanceof Error ? err.message : String(err)}`);
        flushLogs();
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', handler);
  process.on('SIGINT', handler);
}

export async function main(argv: string[]): Promise<void> {
  const [command, ...args] = argv;
  if (command === undefined || command === 'help' || command === '--help' || command === '-h') {
    process.stdout.write(HELP);
    return;
  }
  if (command === '--version') {
    process.stdout.write(`${VERSION}\n`);
    return;
  }
  switch (command) {
    case 'local': {
      const { config, rest } = loadConfig(args, process.env);
      if (rest.length > 1) throw new Error(`local takes one folder, got ${rest.join(' ')}`);
      const logger = createLogger(config.logLevel);
      // Loaded here, not at the top: a model process (`predictgate model`) needs none of the gateway.
      const { runLocal } = await import('./local/run.js');
      const mode = await runLocal({ dir: resolve(rest[0] ?? '.'), config, logger });
      onSignals(() => mode.stop(), (msg) => logger.info({}, msg));
      return;
    }
    case 'model': {
      const [name, ...extra] = args;
      if (!name || extra.length) throw new Error(`usage: predictgate model NAME (one of ${MODEL_NAMES.join(', ')})`);
      const log = (obj: Record<string, unknown>): void => void process.stdout.write(`${JSON.stringify({ time: new Date().toISOString(), model: name, ...obj })}\n`);
      const server = await startModelServer(name, { ...modelOptionsFromEnv(process.env), log });
      onSignals(() => server.close(), (msg) => log({ msg }));
      return;
    }
    case 'gateway':
    case 'controller': {
      const { config, rest } = loadConfig(args, process.env);
      if (rest.length) throw new Error(`${command} takes no arguments, got ${rest.join(' ')}`);
      const logger = createLogger(config.logLevel);
      // Loaded here only: the Kubernetes client costs ~75 MB that local mode and models do without.
      const { loadKubeConfig } = await import('./kube/client.js');
      const kc = loadKubeConfig();
      if (command === 'gateway') {
        const { runClusterGateway } = await import('./gateway/run.js');
        const gw = await runClusterGateway({ kc, config, logger });
        onSignals(() => gw.stop(), (msg) => logger.info({}, msg));
        return;
      }
      const { runController } = await import('./controller/run.js');
      const ctl = await runController({
        kc,
        config,
        logger,
        onLostLeadership: () => {
          flushLogs();
          process.exit(1);
        },
      });
      onSignals(() => ctl.stop(), (msg) => logger.info({}, msg));
      return;
    }
    default:
      throw new Error(`unknown command '${command}'; see predictgate --help`);
  }
}
