#!/usr/bin/env -S node --max-semi-space-size=4 --heap-growing-percent=200 --expose-gc
// Entry point of the `predictgate` command: runs the compiled CLI (npm run build makes dist/).
// The Node flags on the line above are part of the product (README, Performance, measured):
// - a 4 MB young generation semi-space (V8's default is 16 MB) keeps memory down;
// - the old generation may grow to 3x its live size before a full collection (V8's factor is
//   1.1-1.6). Off-heap buffers count against that limit until the next full collection; with the
//   gateway's ~18 MB of live heap and the default factor, large bodies set off full collections
//   every few hundred milliseconds (after 400 KB bodies, 1 MB rawPredict: 6 full collections in
//   8 s and 5800 µs of CPU per call, against 1 and 4800 with this factor). Like Go's GOGC=200;
// - --expose-gc lets the gateway ask for young collections paced by body bytes (gateway/youngGc.ts).
// `npm start`, the image's entrypoint and the benchmark all run the command through this line;
// `node bin/predictgate.js` skips it.
import { main } from '../dist/src/cli.js';

main(process.argv.slice(2)).catch((err) => {
  process.stderr.write(`predictgate: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
