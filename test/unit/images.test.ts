// The pure parts of the test node's image builds, without buildah: the cache keys (what changes them
// and what does not), the Node release read from .ci/node, the apt lines of the machine's mirrors,
// and which archives a build prunes from the cache.
import { mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { baseInputs, baseRef, contextFiles, mirrorLines, nodeRelease, pauseKey, productKey, pruneArchives, PAUSE_IMAGE } from '../cluster/images.js';

describe('nodeRelease', () => {
  test('is the default of NODE_RELEASE in .ci/node', () => {
    expect(nodeRelease('set -e\nversion="${NODE_RELEASE:-24.22.3}"\n')).toBe('24.22.3');
    expect(nodeRelease()).toMatch(/^24\.\d+\.\d+$/);
  });

  test('a script without one is an error that says what was looked for', () => {
    expect(() => nodeRelease('version=24\n')).toThrow('.ci/node does not name its default Node release');
  });
});

describe('baseRef', () => {
  test('a name in local storage, changed by each input', () => {
    const inputs = baseInputs();
    const ref = baseRef(inputs);
    expect(ref).toMatch(/^localhost\/predictgate-base:[0-9a-f]{12}$/);
    expect(baseRef({ ...inputs })).toBe(ref);
    for (const change of [{ suite: 'trixie' }, { variant: 'apt' }, { node: '24.0.0' }, { npm: '11.0.0' }, { dpkgOpts: [] }, { hooks: [] }]) {
      expect(baseRef({ ...inputs, ...change })).not.toBe(ref);
    }
  });
});

describe('productKey', () => {
  let root: string;
  const write = (rel: string, text: string): void => {
    mkdirSync(join(root, rel, '..'), { recursive: true });
    writeFileSync(join(root, rel), text);
  };

  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'predictgate-images-key-'));
    write('Dockerfile', 'ARG BASE=node:24-bookworm-slim\nFROM ${BASE}\n');
    write('package.json', '{"version":"0.1.0"}');
    write('src/cli.ts', 'export {};\n');
    write('test/cluster/pause.c', 'int main(void) { return 0; }\n');
    write('README.md', '# predictgate\n');
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  test('covers the Dockerfile and what it copies, not the rest of the checkout', () => {
    expect(contextFiles(root)).toEqual(['Dockerfile', 'package.json', 'src/cli.ts', 'test/cluster/pause.c']);
  });

  test('follows the files of the context and the base, and only them', () => {
    const key = productKey(root, 'localhost/predictgate-base:a');
    expect(key).toMatch(/^[0-9a-f]{12}$/);
    expect(productKey(root, 'localhost/predictgate-base:a')).toBe(key);
    expect(productKey(root, 'localhost/predictgate-base:b')).not.toBe(key);
    write('README.md', '# changed\n');
    expect(productKey(root, 'localhost/predictgate-base:a')).toBe(key);
    write('src/cli.ts', 'export {}; \n');
    expect(productKey(root, 'localhost/predictgate-base:a')).not.toBe(key);
  });

  test('a renamed file changes it, though the bytes are the same', () => {
    const key = productKey(root, 'b');
    rmSync(join(root, 'src/cli.ts'));
    write('src/main.ts', 'export {};\n');
    expect(productKey(root, 'b')).not.toBe(key);
  });
});

describe('pauseKey', () => {
  test('follows the source and the compiler', () => {
    const key = pauseKey('int main(void) { return 0; }\n', 'gcc (Debian 12.2.0-14+deb12u1) 12.2.0');
    expect(pauseKey('int main(void) { return 0; }\n', 'gcc (Debian 12.2.0-14+deb12u1) 12.2.0')).toBe(key);
    expect(pauseKey('int main(void) { return 1; }\n', 'gcc (Debian 12.2.0-14+deb12u1) 12.2.0')).not.toBe(key);
    expect(pauseKey('int main(void) { return 0; }\n', 'gcc (Debian 14.2.0-19) 14.2.0')).not.toBe(key);
    expect(PAUSE_IMAGE).toBe('registry.k8s.io/pause:3.10');
  });
});

describe('mirrorLines', () => {
  const indextargets = [
    'http://deb.debian.org/debian-security/ bookworm-security main amd64 Packages',
    'http://deb.debian.org/debian/ bookworm-updates main amd64 Packages',
    'http://deb.debian.org/debian/ bookworm main amd64 DEP-11',
    'http://deb.debian.org/debian/ bookworm main amd64 Packages',
    'http://deb.debian.org/debian/ bookworm main amd64 Translations',
    'http://deb.debian.org/debian/ bookworm contrib amd64 Packages',
    'http://deb.debian.org/debian/ bookworm main i386 Packages',
    'https://packages.cloud.google.com/apt/ cloud-sdk-bookworm main amd64 Packages',
    '',
  ].join('\n');

  test("the suite, its updates and its security suite, main only, the machine's architecture, in that order", () => {
    expect(mirrorLines(indextargets, 'bookworm', 'amd64')).toEqual([
      'deb http://deb.debian.org/debian/ bookworm main',
      'deb http://deb.debian.org/debian/ bookworm-updates main',
      'deb http://deb.debian.org/debian-security/ bookworm-security main',
    ]);
  });

  test('none for a suite the machine has no sources for', () => {
    expect(mirrorLines(indextargets, 'trixie', 'amd64')).toEqual([]);
  });
});

test('pruneArchives keeps the last used archives of each image and deletes the others, never one in use', () => {
  const dir = mkdtempSync(join(tmpdir(), 'predictgate-images-'));
  try {
    const file = (name: string, ageS: number): string => {
      const p = join(dir, name);
      writeFileSync(p, '');
      const t = new Date(Date.now() - ageS * 1000);
      utimesSync(p, t, t);
      return p;
    };
    // predictgate's archives used 10..50 s ago, the one in use the oldest; pause's two within the limit.
    const inUse = file('predictgate-0.1.0-000000000005.oci.tar', 50);
    for (let i = 1; i <= 4; i++) file(`predictgate-0.1.0-00000000000${i}.oci.tar`, i * 10);
    file('pause-3.10-aaaaaaaaaaaa.oci.tar', 5);
    file('pause-3.10-bbbbbbbbbbbb.oci.tar', 500);
    file('build.log', 9999);
    expect(pruneArchives(dir, 2, [inUse])).toEqual(['predictgate-0.1.0-000000000003.oci.tar', 'predictgate-0.1.0-000000000004.oci.tar']);
    expect(readdirSync(dir).sort()).toEqual([
      'build.log', 'pause-3.10-aaaaaaaaaaaa.oci.tar', 'pause-3.10-bbbbbbbbbbbb.oci.tar',
      'predictgate-0.1.0-000000000001.oci.tar', 'predictgate-0.1.0-000000000002.oci.tar', 'predictgate-0.1.0-000000000005.oci.tar',
    ]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
