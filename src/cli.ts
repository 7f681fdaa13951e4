// The `predictgate` command: local mode, the (cluster) gateway and controller, and the bundled
// example model servers. Reads the command line (each command's settings or its --help), builds the
// config, installs signal handling, and words a failure to listen by the setting that changes it.
import { resolve } from 'node:path';
import { readFileSync } from 'node:fs';
import { COMMANDS, SETTINGS, loadConfig, parseCommandLine, type Command } from './config.js';
import { createLogger, flushLogs } from './log.js';
import { commandHelp, topHelp } from './help.js';
import { MODEL_NAMES, modelOptionsFromEnv, startModelServer } from './models/index.js';

const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

/** How a user names a setting of the table: "--port or PORT". */
function named(key: 'port' | 'host'): string {
  const s = SETTINGS.find((x) => x.key === key)!;
  return `${s.flag} or ${s.env}`;
}

/** The settings that choose where a command listens, as its user sets them. */
export interface ListenSettings {
  port: string;
  host: string;
}

const TABLE_LISTEN: ListenSettings = { port: named('port'), host: named('host') };
const MODEL_LISTEN: ListenSettings = { port: 'AIP_HTTP_PORT', host: 'AIP_HTTP_HOST' };

/** A failure to listen, said with the setting that changes it; any other error as it is. */
export function listenError(err: unknown, settings: ListenSettings): unknown {
  const e = err as (NodeJS.ErrnoException & { address?: string; port?: number; hostname?: string }) | null;
  if (e?.code === 'EADDRINUSE' && e.syscall === 'listen') return new Error(`port ${e.port} is in use (set ${settings.port})`);
  if (e?.code === 'EACCES' && e.syscall === 'listen') return new Error(`port ${e.port} needs privileges this process lacks (set ${settings.port})`);
  if (e?.code === 'EADDRNOTAVAIL' && e.syscall === 'listen') return new Error(`address ${e.address} is not one of this machine's (set ${settings.host})`);
  if (e?.code === 'ENOTFOUND' && e.syscall === 'getaddrinfo') return new Error(`host ${e.hostname} is not known (set ${settings.host})`);
  return err;
}

async function listening<T>(start: Promise<T>, settings: ListenSettings): Promise<T> {
  try {
    return await start;
  } catch (err) {
    throw listenError(err, settings);
  }
}

function isCommand(name: string): name is Command {
  return (COMMANDS as readonly string[]).includes(name);
}

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
  if (command === undefined || command === '--help' || command === '-h') {
    process.stdout.write(topHelp(VERSION));
    return;
  }
  if (command === 'help') {
    const [about, ...extra] = args;
    if (about === undefined) process.stdout.write(topHelp(VERSION));
    else if (isCommand(about) && extra.length === 0) process.stdout.write(commandHelp(about));
    else throw new Error(`usage: predictgate help [COMMAND], COMMAND one of ${COMMANDS.join(', ')}`);
    return;
  }
  if (command === '--version') {
    process.stdout.write(`${VERSION}\n`);
    return;
  }
  if (!isCommand(command)) throw new Error(`unknown command '${command}'; see predictgate --help`);
  const line = parseCommandLine(args, command);
  if (line.help) {
    process.stdout.write(commandHelp(command));
    return;
  }
  switch (command) {
    case 'local': {
      const { config, rest } = loadConfig(args, process.env, command);
      if (rest.length > 1) throw new Error(`local takes one folder, got ${rest.join(' ')}; see predictgate local --help`);
      const logger = createLogger(config.logLevel);
      // Loaded here, not at the top: a model process (`predictgate model`) needs none of the gateway.
      const { runLocal } = await import('./local/run.js');
      const mode = await listening(runLocal({ dir: resolve(rest[0] ?? '.'), config, logger }), TABLE_LISTEN);
      onSignals(() => mode.stop(), (msg) => logger.info({}, msg));
      return;
    }
    case 'model': {
      const [name, ...extra] = line.rest;
      if (!name || extra.length) throw new Error(`usage: predictgate model NAME, NAME one of ${MODEL_NAMES.join(', ')}; see predictgate model --help`);
      const log = (obj: Record<string, unknown>): void => void process.stdout.write(`${JSON.stringify({ time: new Date().toISOString(), model: name, ...obj })}\n`);
      const server = await listening(startModelServer(name, { ...modelOptionsFromEnv(process.env), log }), MODEL_LISTEN);
      onSignals(() => server.close(), (msg) => log({ msg }));
      return;
    }
    case 'gateway':
    case 'controller': {
      const { config, rest } = loadConfig(args, process.env, command);
      if (rest.length) throw new Error(`${command} takes no arguments, got ${rest.join(' ')}; see predictgate ${command} --help`);
      const logger = createLogger(config.logLevel);
      // Loaded here only: local mode and the models do without the Kubernetes client and its memory.
      const { loadKubeConfig } = await import('./kube/client.js');
      const kc = loadKubeConfig();
      if (command === 'gateway') {
        const { runClusterGateway } = await import('./gateway/run.js');
        const gw = await listening(runClusterGateway({ kc, config, logger }), TABLE_LISTEN);
        onSignals(() => gw.stop(), (msg) => logger.info({}, msg));
        return;
      }
      const { runController } = await import('./controller/run.js');
      const ctl = await listening(
        runController({
          kc,
          config,
          logger,
          onLostLeadership: () => {
            flushLogs();
            process.exit(1);
          },
        }),
        TABLE_LISTEN,
      );
      onSignals(() => ctl.stop(), (msg) => logger.info({}, msg));
      return;
    }
  }
}

/** Runs the command: a failure prints one line, `predictgate: <what went wrong>`, and exits 1. */
export async function run(argv: string[]): Promise<void> {
  try {
    await main(argv);
  } catch (err) {
    process.stderr.write(`predictgate: ${err instanceof Error ? err.message : String(err)}\n`);
    flushLogs();
    process.exit(1);
  }
}
