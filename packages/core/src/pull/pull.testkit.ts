// Shared parts of the pull step tests: a real loopback registry serving built images, a store in a
// temporary directory, and a pull's layers as plan.ts makes them.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseReference, type Reference } from '../oci/reference.js';
import type { ImageLayer } from '../images/store.js';
import { RegistryClient } from '../registry/client.js';
import { openStore, type Store } from '../store/root.js';
import { startLoopbackRegistry, type LoopbackRegistry } from '../testing/registry.js';
import type { BuiltImage } from '../testing/builder.js';
import { sharedFetchScheduler } from '../registry/scheduler.js';
import { PullTicket } from './priority.js';
import type { DownloadContext } from './download.js';
import type { PullEvent } from './types.js';
import { ProgressWatch } from './watchdog.js';
import { imageLayers } from './plan.js';

/** A temporary directory for a test file; `cleanup` removes it. */
export function workDir(prefix: string): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), `fastpull-${prefix}-`));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A loopback registry serving `image` as `<host>/<repo>:1`, with a client and the resolved image's layers. */
export interface Served {
  readonly reg: LoopbackRegistry;
  readonly client: RegistryClient;
  readonly ref: Reference;
  readonly refText: string;
  readonly layers: ImageLayer[];
  close(): Promise<void>;
}

export async function serve(image: BuiltImage, repo = 'steps/app'): Promise<Served> {
  const reg = await startLoopbackRegistry();
  reg.addImage(repo, '1', image);
  const client = new RegistryClient({ plainHttp: true });
  const refText = `${reg.host}/${repo}:1`;
  const ref = parseReference(refText);
  const resolved = await client.resolve(ref, { platform: image.platform });
  return {
    reg,
    client,
    ref,
    refText,
    layers: imageLayers(refText, resolved),
    async close() {
      await client.close();
      await reg.close();
    },
  };
}

/** A fresh store under `dir`. */
export function freshStore(dir: string, name: string): Store {
  return openStore(join(dir, name));
}

/** The states each layer went through, by layer index, in the order the events came. */
export function statesByLayer(events: readonly PullEvent[]): Map<number, string[]> {
  const out = new Map<number, string[]>();
  for (const e of events) {
    if (e.type !== 'layer') continue;
    const seen = out.get(e.index) ?? [];
    // A state repeated to report more bytes is one state.
    if (seen.at(-1) !== e.state) out.set(e.index, [...seen, e.state]);
  }
  return out;
}

/** What a layer's download needs, for a pull of `served` into `store` (stop the watch when done). */
export function downloadContext(
  served: Served,
  store: Store,
  signal: AbortSignal = new AbortController().signal,
): DownloadContext & { readonly watch: ProgressWatch } {
  return {
    store,
    client: served.client,
    ref: served.ref,
    scheduler: sharedFetchScheduler(),
    signal,
    watch: new ProgressWatch(60_000, () => undefined),
    ticket: new PullTicket(),
    options: {},
  };
}
