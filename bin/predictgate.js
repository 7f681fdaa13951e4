#!/usr/bin/env -S node --max-semi-space-size=4 --heap-growing-percent=200 --initial-old-space-size=56 --liftoff-only --expose-gc
// Entry point of the `predictgate` command: runs the compiled CLI (npm run build makes dist/).
// The Node flags on the line above are part of the product (README, Performance, measured):
// - a 4 MB young generation semi-space (V8's default is 16 MB) keeps memory down at 64 connections;
// - the old generation may grow to 3x its live size before a full collection (V8's factor is
//   1.1-1.6). Socket reads make a 64 KB off-heap buffer each, which V8 counts against the old
//   generation's limit until the next full collection; with the gateway's 13-19 MB of live heap
//   (its libraries) and the default factor, 1 MB bodies set off a full collection every 5-7 calls
//   (8-25 ms each). With this factor young collections free those buffers first: the 1 MB predict
//   CPU drops by a third, for 20-40 MB more peak RSS. Like Go's GOGC=200;
// - and that limit is never below 56 MB. V8 starts a full collection once the old generation plus
//   the off-heap bytes made since the last one near the limit, and leaves young ArrayBuffers to a
//   young collection only once they reach 32 MB. With the gateway's ~12.5 MB of live heap the
//   factor alone gives a limit of about 40 MB, so large bodies still set off a full collection
//   every ~0.3 s (5.5 ms of pause and 5-10 ms of incremental marking each, plus concurrent
//   marking); at 56 MB (12.5 + 32 + the young generation, and room for what the load promotes)
//   young collections free them, as in the bare proxy, whose limit no full collection has set.
//   400 KB rawPredict 2367-2792 → 1575-2132 µs of CPU per call, 1 MB rawPredict 5194-5431 →
//   2982-3365, 1 MB predict 6250-7206 → 4567-5224 (four alternated pairs each); the memory
//   round's small-JSON cells about 8 MB higher (137.5 against 128.9 and 129.9 MB in one-round
//   runs). test/unit/command.test.ts checks the limit;
// - WebAssembly stays on V8's baseline compiler (Liftoff). The only WebAssembly here is undici's
//   HTTP parser (llhttp), which V8 otherwise recompiles with TurboFan once it is hot: in local mode
//   that recompile pushed RSS from ~80 to 117 MB for ~0.2 s at the start of small-JSON load (sampled
//   every 100 ms), and the peak stayed in VmHWM. With Liftoff only, 87 MB; undici's CPU per call
//   in a client loop 34.2 against 33.5 µs (6 alternated runs of 100k calls each);
// - gc() for the full collection a gateway runs once its calls go quiet (src/memoryTrim.ts).
// `npm start`, the image's entrypoint and the benchmark all run the command through this line;
// `node bin/predictgate.js` skips it.
import { main } from '../dist/src/cli.js';

main(process.argv.slice(2)).catch((err) => {
  process.stderr.write(`predictgate: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
