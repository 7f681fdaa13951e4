// .ci/group, which .ci/run runs itself under: the command's exit status comes back as it is, and a
// stop signal (SIGTERM, SIGINT) stops the command's whole process group (here a shell and the two
// processes it started), none of which is left running.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { ROOT } from '../helpers/local.js';
import { until } from '../helpers/rawHttp.js';

const GROUP = join(ROOT, '.ci/group');

const exited = (child: ReturnType<typeof spawn>): Promise<number | null> => new Promise((resolve) => child.once('exit', (code) => resolve(code)));

/** Whether `pid` runs: it exists and is not a zombie (an exited process its new parent has not reaped yet). */
function running(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /s, '')[0] !== 'Z';
  } catch {
    return false;
  }
}

test('the command\'s exit status is .ci/group\'s', async () => {
  expect(await exited(spawn(GROUP, ['bash', '-c', 'exit 3'], { stdio: 'ignore' }))).toBe(3);
  expect(await exited(spawn(GROUP, ['true'], { stdio: 'ignore' }))).toBe(0);
});

test.each([['SIGTERM', 143], ['SIGINT', 130]] as const)('%s to .ci/group stops every process of the command\'s group, and it exits %d', async (signal, code) => {
  // A shell that starts two long sleeps and prints their pids.
  const child = spawn(GROUP, ['bash', '-c', 'sleep 300 & echo $!; sleep 300 & echo $!; echo $$; wait'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const done = exited(child);
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const pids: number[] = [];
  for (let i = 0; i < 3; i++) pids.push(Number((await lines.next()).value));
  try {
    expect(pids.every(running)).toBe(true);
    child.kill(signal);
    expect(await done).toBe(code);
    // The signal is delivered to each at once; each is gone once the kernel has run it.
    await until(() => !pids.some(running), 'every process of the group gone', 5000);
  } finally {
    for (const pid of pids.filter(running)) process.kill(pid, 'SIGKILL');
  }
});
