// The fetching side of fetch-proxy.ts, in its own process so /usr/bin/time sees only it: downloads
// one blob over HTTPS into a content store ingest with fastpull's ranged fetch, directly or through
// an HTTP proxy, on the registry client's own connections or on undici's EnvHttpProxyAgent.
// Usage: node fetch-proxy-child.js MODE HOST:PORT DIGEST SIZE ROOT CHUNK_MIB CA PROXY_URL
//   MODE: direct | tunnel (the range client's CONNECT tunnels) | undici (EnvHttpProxyAgent as the dispatcher)
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseReference, tuneAllocator, type Digest } from '@fastpull/core';
import { FileContentStore } from '@fastpull/core/content';
import { fetchBlob, RegistryClient } from '@fastpull/core/registry';
import { EnvHttpProxyAgent } from 'undici';

tuneAllocator(process.env);
const [mode, host, digest, size, root, chunkMiB, ca, proxy] = process.argv.slice(2) as [string, string, Digest, string, string, string, string, string];
const desc = { mediaType: 'application/octet-stream', digest, size: Number(size) };
// The registry's certificate is trusted through hosts.toml, as a node would trust a private CA.
const hostsDir = join(root, 'hosts');
mkdirSync(join(hostsDir, host), { recursive: true });
// undici's agent takes the CA itself: a hosts.toml `ca` would give the host a pool of the client's own.
writeFileSync(join(hostsDir, host, 'hosts.toml'), `server = "https://${host}"\n${mode === 'undici' ? '' : `ca = "${ca}"\n`}`);
let client: RegistryClient;
let agent: EnvHttpProxyAgent | undefined;
if (mode === 'direct') client = new RegistryClient({ hostsDir });
else if (mode === 'tunnel') client = new RegistryClient({ hostsDir, proxy: { httpsProxy: proxy, proxyLoopback: true } });
else if (mode === 'undici') {
  // connections: as many per origin as the client's own pool keeps.
  agent = new EnvHttpProxyAgent({ httpsProxy: proxy, noProxy: '', connections: 16, requestTls: { ca: readFileSync(ca) } });
  client = new RegistryClient({ hostsDir, dispatcher: agent });
} else throw new Error(`unknown mode ${mode}`);
const store = new FileContentStore(join(root, 'store'));
const ingest = await store.newIngest(desc);
await fetchBlob(client, parseReference(`${host}/bench/blob:1`), desc, ingest, { chunkSize: Number(chunkMiB) * 1024 * 1024 });
if (ingest.watermark.value !== desc.size) throw new Error(`only ${ingest.watermark.value} of ${desc.size} bytes landed`);
await store.abort(ingest);
await client.close();
await agent?.close();
