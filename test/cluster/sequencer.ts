// jest's test sequencer for every project: jest's own order (failed first, then the slowest), except
// that the node tier's chart suite runs last: its last test ends the node cluster the node suites share.
import { createRequire } from 'node:module';
import type * as TestSequencerModule from '@jest/test-sequencer';

type BaseSequencer = TestSequencerModule.default;
type Test = Parameters<BaseSequencer['sort']>[0][number];

// A CommonJS module: its class is its `default` export.
const Base = (createRequire(import.meta.url)('@jest/test-sequencer') as { default: new () => BaseSequencer }).default;

/** The suite whose last test ends the node cluster. */
const ENDS_THE_NODE = /[/\\]test[/\\]node[/\\]chart\.test\.js$/;

export default class NodeLastSequencer extends Base {
  override async sort(tests: Test[]): Promise<Test[]> {
    const sorted = await super.sort(tests);
    return [...sorted.filter((t) => !ENDS_THE_NODE.test(t.path)), ...sorted.filter((t) => ENDS_THE_NODE.test(t.path))];
  }
}
