// A loopback OCI distribution registry (read side only) with basic/bearer auth and fault injection, for tests.
import { createServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { LoopbackServer } from './registry-server.js';
import type { LoopbackRegistry, LoopbackRegistryOptions } from './registry-types.js';

export { LOOPBACK_SERVICE } from './registry-server.js';
export type { CountedFault, LoopbackAuth, LoopbackFaults, LoopbackRegistry, LoopbackRegistryOptions, LoopbackStats, RequestLog } from './registry-types.js';

/**
 * Starts a registry on 127.0.0.1 with a free port. It serves `/v2/`, manifests and blobs
 * (GET and HEAD, ranges on blobs) of what the test adds, a bearer token endpoint and the
 * referrers API when asked, and misbehaves as `faults` says.
 *
 * @example
 * const registry = await startLoopbackRegistry({ auth: { type: 'bearer' } });
 * registry.addImage('library/app', 'latest', await sampleImage(1));
 * registry.faults.corruptBlob = new Set([image.layers[0].digest]);
 * try { ... } finally { await registry.close(); }
 */
export async function startLoopbackRegistry(options: LoopbackRegistryOptions = {}): Promise<LoopbackRegistry> {
  const lb = new LoopbackServer(options);
  const server = options.tls ? createHttpsServer({ key: options.tls.key, cert: options.tls.cert }, lb.listener) : createServer(lb.listener);
  server.on('connection', () => lb.connections++);
  const registry = registryObject(lb, async () => {
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  });
  lb.registry = registry;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  lb.url = `${options.tls ? 'https' : 'http'}://127.0.0.1:${port}`;
  return Object.assign(registry, { host: `127.0.0.1:${port}`, url: lb.url });
}

/** The registry object a test holds, over the server's state. */
function registryObject(lb: LoopbackServer, close: () => Promise<void>): LoopbackRegistry {
  const registry: LoopbackRegistry = {
    host: '',
    url: '',
    faults: lb.options.faults ?? {},
    addBlob: (repository, digest, bytes) => lb.addBlob(repository, digest, bytes),
    addManifest: (repository, reference, bytes, mediaType) => lb.addManifest(repository, reference, bytes, mediaType),
    addImage(repository, tag, image) {
      for (const [digest, bytes] of image.blobs) registry.addBlob(repository, digest, bytes);
      registry.addManifest(repository, tag, image.manifest, image.manifestMediaType);
    },
    addIndex(repository, tag, index, images = index.images) {
      for (const image of images) {
        for (const [digest, bytes] of image.blobs) registry.addBlob(repository, digest, bytes);
        registry.addManifest(repository, image.manifestDigest, image.manifest, image.manifestMediaType);
      }
      registry.addManifest(repository, tag, index.index, index.mediaType);
    },
    stats: {
      get requests() {
        return lb.requests;
      },
      blobBytesServed: (digest) => lb.blobBytes.get(digest) ?? 0,
      get tokensIssued() {
        return lb.tokensIssued;
      },
      get inFlight() {
        return lb.inFlight;
      },
      get maxInFlight() {
        return lb.maxInFlight;
      },
      get connections() {
        return lb.connections;
      },
      reset() {
        lb.requests = [];
        lb.blobBytes = new Map();
        lb.tokensIssued = 0;
        lb.maxInFlight = lb.inFlight;
        lb.connections = 0;
      },
    },
    close,
  };
  return registry;
}
