// The runtime settings the product ships are one set: the Dockerfile's ENV lines, the chart's default
// values and what the bench runs the gateway with (test/bench/runtime.ts reads the Dockerfile), and the
// chart adds the heap's share of the container's memory limit. Node accepts them in NODE_OPTIONS, and
// none is a V8 testing flag.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { totalmem } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parse } from 'yaml';
import { ROOT } from '../helpers/local.js';
import { chartNodeOptions, chartRuntime, describeRuntime, dockerfileNodeMajor, imageNodeMajor, overrideRuntime, parseDockerfileEnv, quantityBytes, shippedRuntime, withRuntime } from '../bench/runtime.js';

const run = promisify(execFile);
const values = parse(readFileSync(join(ROOT, 'charts/predictgate/values.yaml'), 'utf8')) as Record<string, Record<string, unknown>>;
const shipped = shippedRuntime(ROOT);
const nodeOptions = shipped.NODE_OPTIONS ?? '';

test("the chart's default runtime settings of both components are the image's", () => {
  expect(shipped).toEqual({ NODE_OPTIONS: expect.stringMatching(/\S/), GLIBC_TUNABLES: expect.stringMatching(/\S/) });
  for (const component of ['gateway', 'controller']) {
    expect({ component, nodeOptions: values[component].nodeOptions, glibcTunables: values[component].glibcTunables }).toEqual({
      component,
      nodeOptions: shipped.NODE_OPTIONS,
      glibcTunables: shipped.GLIBC_TUNABLES,
    });
  }
});

test('both Deployments set each runtime variable from their own value', () => {
  for (const component of ['gateway', 'controller']) {
    const template = readFileSync(join(ROOT, `charts/predictgate/templates/${component}-deployment.yaml`), 'utf8');
    expect(template).toContain(
      `- name: NODE_OPTIONS\n              value: {{ include "predictgate.nodeOptions" .Values.${component} | quote }}\n` +
        `            - name: GLIBC_TUNABLES\n              value: {{ .Values.${component}.glibcTunables | quote }}\n`,
    );
  }
});

test('Node accepts the shipped NODE_OPTIONS', async () => {
  const { stdout, stderr } = await run(process.execPath, ['-e', 'console.log(process.env.NODE_OPTIONS)'], { env: { ...process.env, NODE_OPTIONS: nodeOptions } });
  expect([stdout, stderr]).toEqual([`${nodeOptions}\n`, '']);
});

// --max-old-space-size-percentage is Node 24's (the image's); an older Node refuses it.
const onImageNode = Number(process.versions.node.split('.')[0]) >= 24 ? test : test.skip;

onImageNode("the image's Node accepts the chart's NODE_OPTIONS and sizes the old generation from the memory it finds", async () => {
  for (const component of ['gateway', 'controller'] as const) {
    const options = chartRuntime(ROOT, component).env.NODE_OPTIONS ?? '';
    expect(options).toMatch(/--max-old-space-size-percentage=\d+/);
    const { stdout, stderr } = await run(process.execPath, ['-e', 'const v8 = require("node:v8"); console.log(v8.getHeapStatistics().heap_size_limit)'], { env: { ...process.env, NODE_OPTIONS: options } });
    expect(stderr).toBe('');
    // This machine's (or this cgroup's) memory, the percentage of it, and the young generation over it.
    const constrained = process.constrainedMemory();
    const memory = constrained > 0 && constrained < totalmem() ? constrained : totalmem();
    const percent = Number(/--max-old-space-size-percentage=(\d+)/.exec(options)![1]);
    const oldSpace = Math.floor((Math.floor(memory / 1048576) * percent) / 100) * 1048576;
    expect(Number(stdout) - oldSpace).toBeGreaterThanOrEqual(0);
    expect(Number(stdout) - oldSpace).toBeLessThan(64 * 1048576);
  }
});

test("the chart's NODE_OPTIONS: nodeOptions, with the heap's share of the memory limit unless 0 or sized there", () => {
  expect(chartNodeOptions({ nodeOptions: '--max-semi-space-size=4', heapPercent: 50 })).toBe('--max-semi-space-size=4 --max-old-space-size-percentage=50');
  expect(chartNodeOptions({ nodeOptions: '', heapPercent: 40 })).toBe('--max-old-space-size-percentage=40');
  expect(chartNodeOptions({ nodeOptions: '--max-semi-space-size=4', heapPercent: 0 })).toBe('--max-semi-space-size=4');
  expect(chartNodeOptions({ nodeOptions: '--max-old-space-size=300', heapPercent: 50 })).toBe('--max-old-space-size=300');
  expect(chartNodeOptions({ nodeOptions: '--max_old_space_size=300', heapPercent: 50 })).toBe('--max_old_space_size=300');
  expect(chartNodeOptions({ nodeOptions: '--max-old-space-size-percentage=70', heapPercent: 50 })).toBe('--max-old-space-size-percentage=70');
});

test("the chart runs each component with the image's settings, its heap share and its memory limit", () => {
  for (const component of ['gateway', 'controller'] as const) {
    const v = values[component] as { heapPercent: number; resources: { limits: { memory: string } } };
    expect(chartRuntime(ROOT, component)).toEqual({
      env: { NODE_OPTIONS: `${shipped.NODE_OPTIONS} --max-old-space-size-percentage=${v.heapPercent}`, GLIBC_TUNABLES: shipped.GLIBC_TUNABLES },
      memoryLimitBytes: quantityBytes(v.resources.limits.memory),
    });
  }
});

test('memory quantities in bytes, as Kubernetes reads them', () => {
  expect([quantityBytes('384Mi'), quantityBytes('1Gi'), quantityBytes('512Ki'), quantityBytes('500M'), quantityBytes('1k'), quantityBytes(128974848), quantityBytes('1e9'), quantityBytes('1.5Gi')])
    .toEqual([384 * 1048576, 1073741824, 524288, 500_000_000, 1000, 128974848, 1_000_000_000, 1610612736]);
  for (const bad of ['', '384MB', 'Mi', '-1Gi', '1 Gi']) expect(() => quantityBytes(bad)).toThrow(/not a quantity of bytes/);
});

test('no shipped node option is a V8 testing flag or exposes gc()', async () => {
  const { stdout } = await run(process.execPath, ['--v8-options'], { maxBuffer: 16 * 1024 * 1024 });
  const { stdout: help } = await run(process.execPath, ['--help'], { maxBuffer: 16 * 1024 * 1024 });
  const flags = nodeOptions.split(/\s+/).filter((f) => f !== '');
  expect(flags.length).toBeGreaterThan(0);
  for (const flag of flags) {
    const name = flag.replace(/=.*$/, '');
    expect(name).not.toMatch(/^--(expose-gc|expose_gc|liftoff-only|allow-natives-syntax)$/);
    const line = stdout.split('\n').find((l) => l.startsWith(`  ${name} (`));
    // Every flag is one of V8's (which says what it is for) or one of Node's own (in --help).
    expect({ flag, known: line !== undefined || new RegExp(`^\\s+${name}\\b`, 'm').test(help) }).toEqual({ flag, known: true });
    if (line !== undefined) expect({ flag, line }).toEqual({ flag, line: expect.not.stringMatching(/testing/i) });
  }
});

test('the image runs Node 24, the line the bench writes its table for', () => {
  expect(imageNodeMajor(ROOT)).toBe(24);
});

test("a FROM naming a build argument starts from the argument's default", () => {
  expect(dockerfileNodeMajor('ARG BASE=node:24-bookworm-slim\nFROM ${BASE} AS build\nFROM ${BASE}\n')).toBe(24);
  expect(dockerfileNodeMajor('ARG BASE=node:22\nFROM $BASE\n')).toBe(22);
  expect(dockerfileNodeMajor('FROM node:20 AS build\nFROM debian:bookworm\n')).toBeNull();
  expect(dockerfileNodeMajor('ARG BASE\nFROM ${BASE}\n')).toBeNull();
});

test('the Dockerfile is read as ENV lines of its last stage', () => {
  const text = [
    'FROM node:24 AS build',
    'ENV NODE_OPTIONS="--build-only"',
    'FROM node:24-bookworm-slim',
    'ENV NODE_ENV=production',
    'ENV NODE_OPTIONS="--max-semi-space-size=4 --max-old-space-size=256"',
    'RUN true',
  ].join('\n');
  expect(parseDockerfileEnv(text)).toEqual({ NODE_ENV: 'production', NODE_OPTIONS: '--max-semi-space-size=4 --max-old-space-size=256' });
  expect(() => parseDockerfileEnv('FROM x\nENV A=1 B=2\n')).toThrow('Dockerfile: expected "ENV NAME=value" or ENV NAME="value", got "ENV A=1 B=2"');
});

test('an experiment replaces a setting, an empty value removes it, and the process env follows', () => {
  const base = { NODE_OPTIONS: '--max-semi-space-size=4' };
  expect(overrideRuntime(base, {}, 'BENCH_GATEWAY_')).toEqual({ env: base, replaced: [] });
  expect(overrideRuntime(base, { BENCH_GATEWAY_NODE_OPTIONS: '', BENCH_GATEWAY_GLIBC_TUNABLES: 'glibc.malloc.mmap_threshold=131072' }, 'BENCH_GATEWAY_')).toEqual({
    env: { GLIBC_TUNABLES: 'glibc.malloc.mmap_threshold=131072' },
    replaced: ['NODE_OPTIONS', 'GLIBC_TUNABLES'],
  });
  expect(withRuntime({ PATH: '/bin', NODE_OPTIONS: '--inherited', GLIBC_TUNABLES: 'x' }, base)).toEqual({ PATH: '/bin', NODE_OPTIONS: '--max-semi-space-size=4' });
  expect(describeRuntime(base)).toBe('NODE_OPTIONS="--max-semi-space-size=4"');
  expect(describeRuntime({})).toBe('none (Node and glibc defaults)');
});
