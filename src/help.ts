// The text of `predictgate --help` (the commands) and of `predictgate COMMAND --help` (that command's
// usage and the settings it reads, written from the settings table and the model contract's table).
import { settingsHelp, wrap, type Command } from './config.js';
import { MODEL_NAMES, MODEL_SETTINGS } from './models/index.js';

const WIDTH = 100;

const CLUSTER = "It finds the cluster through KUBECONFIG, ~/.kube/config or the pod's service account.";

const COMMAND_TEXT: Record<Command, { usage: string; summary: string; about: string }> = {
  local: {
    usage: 'predictgate local [DIR] [SETTINGS]',
    summary: 'Runs the gateway, the reconcilers and the DeployedModels of the manifests in DIR on this machine.',
    about:
      'Runs the gateway, the reconcilers and every DeployedModel of the manifests in DIR (default: the current folder) as local processes, without a cluster; edits to DIR take effect without a restart.',
  },
  gateway: {
    usage: 'predictgate gateway [SETTINGS]',
    summary: 'Runs the gateway of a cluster, routing by the DeployedModels and Endpoints it watches.',
    about: `Runs the gateway of a cluster: it routes prediction calls by the DeployedModels and Endpoints it watches (read-only) through the Kubernetes API. ${CLUSTER}`,
  },
  controller: {
    usage: 'predictgate controller [SETTINGS]',
    summary: 'Runs the controller of a cluster, which runs DeployedModels and reports their conditions.',
    about: `Runs the controller of a cluster: it runs each DeployedModel as a Deployment and a Service (and an HPA) and reports the conditions of DeployedModels and Endpoints; one replica at a time is active (leader election). It answers /healthz, /readyz and /metrics on its port. ${CLUSTER}`,
  },
  model: {
    usage: 'predictgate model NAME',
    summary: `Runs a bundled example model server: ${MODEL_NAMES.join(', ')}.`,
    about: `Runs a bundled example model server, NAME being one of ${MODEL_NAMES.join(', ')}. It follows the Vertex custom-container contract, so it is set through its environment only.`,
  },
};

/** `predictgate --help`. */
export function topHelp(version: string): string {
  const commands = (Object.keys(COMMAND_TEXT) as Command[]).map((c) => {
    const name = COMMAND_TEXT[c].usage.replace(/^predictgate /, '').replace(' [SETTINGS]', '');
    return `  ${name.padEnd(16)}${wrap(COMMAND_TEXT[c].summary, WIDTH, ' '.repeat(18)).trimStart()}`;
  });
  return [
    `predictgate ${version}: a Vertex-style prediction endpoint gateway for Kubernetes`,
    '',
    'Usage: predictgate COMMAND [ARGUMENTS] [SETTINGS]',
    '',
    'Commands:',
    ...commands,
    `  ${'help [COMMAND]'.padEnd(16)}Prints this text, or a command's usage and settings.`,
    '',
    'Options:',
    `  ${'-h, --help'.padEnd(16)}Prints this text; after a command, that command's usage and settings.`,
    `  ${'--version'.padEnd(16)}Prints the version.`,
    '',
    "Run 'predictgate COMMAND --help' for the settings of a command.",
    '',
  ].join('\n');
}

/** `predictgate COMMAND --help`. */
export function commandHelp(command: Command): string {
  const text = COMMAND_TEXT[command];
  const settings =
    command === 'model'
      ? ['Environment:', ...MODEL_SETTINGS.map((s) => `  ${s.env} (default ${s.default})\n${wrap(s.help, WIDTH, '      ')}`)]
      : ['Settings (a flag wins over its environment variable):', settingsHelp(command, WIDTH)];
  return [`Usage: ${text.usage}`, '', wrap(text.about, WIDTH, ''), '', ...settings, ''].join('\n');
}
