// A kubelet's image pull, alone: `runtime.v1.ImageService/PullImage` on a containerd socket, timed
// from the request to the answer. `node cri-pull.js pull SOCKET REF` prints {"ms":…,"imageRef":…};
// `node cri-pull.js wait SOCKET` returns once the CRI plugin answers (ImageStatus of a name nobody
// has), so that the benchmark starts its clock on a ready containerd.
//
// The messages are encoded by hand (cri-wire.ts), so the benchmark needs grpc-js and no .proto file.
import * as grpc from '@grpc/grpc-js';
import { imageRequest, readField1 } from './cri-wire.js';

function call(client: grpc.Client, method: string, name: string): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    client.makeUnaryRequest(
      `/runtime.v1.ImageService/${method}`,
      (b: Buffer) => b,
      (b: Buffer) => b,
      imageRequest(name),
      (e, res) => (e ? reject(e) : resolve(res!)),
    ),
  );
}

const [mode, socket, ref] = process.argv.slice(2);
if ((mode !== 'pull' && mode !== 'wait') || !socket || (mode === 'pull' && !ref)) {
  process.stderr.write('usage: cri-pull.js pull SOCKET REF | wait SOCKET\n');
  process.exit(2);
}
const client = new grpc.Client(`unix:${socket}`, grpc.credentials.createInsecure());
try {
  if (mode === 'wait') {
    const deadline = Date.now() + 30_000;
    for (;;) {
      try {
        await call(client, 'ImageStatus', 'fastpull.invalid/bench/none:ready');
        break;
      } catch (e) {
        if (Date.now() > deadline) throw e;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  } else {
    // The channel is connected first, so the clock holds the pull and not the dial.
    await new Promise<void>((resolve, reject) => client.waitForReady(Date.now() + 10_000, (e) => (e ? reject(e) : resolve())));
    const t0 = performance.now();
    const res = await call(client, 'PullImage', ref!);
    const ms = performance.now() - t0;
    process.stdout.write(`${JSON.stringify({ ms, imageRef: readField1(res) })}\n`);
  }
} catch (e) {
  process.stderr.write(`cri-pull ${mode}: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exitCode = 1;
} finally {
  client.close();
}
