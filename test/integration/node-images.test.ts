// The test node's images as a containerd node takes them: predictgate's image and the pause image,
// built offline (or taken from the image cache), imported into a throwaway containerd, listed under
// the names a kubelet asks for, and predictgate's run once; nothing of that containerd is left after.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ensureImages, PAUSE_IMAGE, REPO_DIR } from '../cluster/images.js';
import { checkImport } from '../cluster/importCheck.js';
import { mountsUnder } from '../cluster/tools.js';

const version = (JSON.parse(readFileSync(join(REPO_DIR, 'package.json'), 'utf8')) as { version: string }).version;

test(
  'the archives import under the names pods ask for, and the image runs predictgate',
  async () => {
    // The first build takes about two minutes on 2 cores; a cached one only hashes the inputs.
    const images = ensureImages((line) => process.stderr.write(`[images] ${line}\n`));
    expect(images.predictgate.ref).toBe(`docker.io/library/predictgate:${version}`);
    expect(images.pause.ref).toBe(PAUSE_IMAGE);

    const check = await checkImport(images);
    expect(check.imported).toEqual([
      expect.stringMatching(new RegExp(`^unpacking docker\\.io/library/predictgate:${version.replace(/\./g, '\\.')} \\(sha256:[0-9a-f]{64}\\)\\.\\.\\.done$`)),
      expect.stringMatching(/^unpacking registry\.k8s\.io\/pause:3\.10 \(sha256:[0-9a-f]{64}\)\.\.\.done$/),
    ]);
    expect(check.listed.sort()).toEqual([images.predictgate.ref, PAUSE_IMAGE].sort());
    expect(check.help).toContain(`predictgate ${version}: a Vertex-style prediction endpoint gateway for Kubernetes`);
    expect(check.help).toContain('Usage: predictgate COMMAND [ARGUMENTS] [SETTINGS]');
    expect(existsSync(check.dir)).toBe(false);
    expect(mountsUnder(check.dir)).toEqual([]);
  },
  15 * 60_000,
);
