// Runs the real CNCF distribution registry (docker-registry) on loopback, and pushes built images to it.
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants as fsConstants, statSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { Agent, request, type Dispatcher } from 'undici';
import { parseDigest, type Digest } from '../oci/digest.js';
import type { BuiltImage, BuiltIndex } from './builder.js';
import { lacks } from './needs.js';

/** Where Debian's package installs the registry; checked before PATH. */
const DEBIAN_BINARY = '/usr/bin/docker-registry';
const BINARY_NAMES = ['registry', 'docker-registry'];
/** How long a fresh registry may take to answer `GET /v2/` (it starts in well under a second). */
const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 5_000;
/** Error bodies and captured output are kept only this far. */
const CAP = 16 * 1024;

function isExecutable(path: string): boolean {
  try {
    accessSync(path, fsConstants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/**
 * The path of a distribution registry binary: `/usr/bin/docker-registry`, else `registry` or
 * `docker-registry` on PATH; undefined when there is none.
 * @example
 * it.skipIf(findDistributionBinary() === undefined)('pulls from a real registry', async () => {});
 */
export function findDistributionBinary(): string | undefined {
  if (isExecutable(DEBIAN_BINARY)) return DEBIAN_BINARY;
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir === '') continue;
    for (const name of BINARY_NAMES) {
      const candidate = join(dir, name);
      if (isExecutable(candidate)) return candidate;
    }
  }
  return undefined;
}

/** A running distribution registry. */
export interface DistributionRegistry {
  /** `127.0.0.1:PORT`. */
  readonly host: string;
  /** `http://127.0.0.1:PORT` (`https://` with TLS). */
  readonly url: string;
  /** The storage root directory (see {@link blobDataPath}). */
  readonly storageDir: string;
  /** The server's process id (benchmarks read its CPU time from /proc). */
  readonly pid: number | undefined;
  /**
   * The access log's lines so far (combined log format: request line, status, user agent), when
   * started with `accessLog`; else none.
   */
  accessLog(): readonly string[];
  /** Stops the registry and waits for it to exit; removes its directory when it made a temporary one. */
  stop(): Promise<void>;
}

/** Options of {@link startDistribution}. */
export interface StartDistributionOptions {
  /** Directory for the config and storage; default a new temporary directory, removed by stop(). */
  readonly dir?: string;
  /** The binary to run; default {@link findDistributionBinary}. */
  readonly binary?: string;
  /** Keep the access log (one line per request, see {@link DistributionRegistry.accessLog}); default off. */
  readonly accessLog?: boolean;
  /** Serve HTTPS with this certificate and key (PEM files); `url` is then `https://...`. */
  readonly tls?: { readonly certificate: string; readonly key: string };
}

/** Access-log lines kept at most: tests make hundreds of requests, not this many. */
const ACCESS_LOG_LINES = 100_000;

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

function configYAML(storageDir: string, port: number, accessLog: boolean, tls: StartDistributionOptions['tls']): string {
  return [
    'version: 0.1',
    'log:',
    '  level: error',
    '  accesslog:',
    `    disabled: ${!accessLog}`,
    'storage:',
    '  filesystem:',
    `    rootdirectory: ${JSON.stringify(storageDir)}`,
    '  delete:',
    '    enabled: true',
    '  maintenance:',
    '    uploadpurging:',
    '      enabled: false',
    'http:',
    `  addr: 127.0.0.1:${port}`,
    // A fixed secret silences the "no secret configured" warning; upload state is only ever on loopback.
    '  secret: fastpull-test-secret',
    ...(tls ? ['  tls:', `    certificate: ${JSON.stringify(tls.certificate)}`, `    key: ${JSON.stringify(tls.key)}`] : []),
    '',
  ].join('\n');
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Starts the real distribution registry on a free loopback port, without auth, storing on the
 * filesystem, and waits until `GET /v2/` answers 200. Throws when the binary is missing or the
 * registry dies or does not come up (with its output).
 *
 * @example
 * const registry = await startDistribution();
 * try { await pushImage(registry.url, 'test/app', 'v1', image); } finally { await registry.stop(); }
 */
export async function startDistribution(options: StartDistributionOptions = {}): Promise<DistributionRegistry> {
  const binary = options.binary ?? findDistributionBinary();
  if (binary === undefined) {
    throw new Error(
      `startDistribution: no distribution registry binary found (looked for ${DEBIAN_BINARY}, then ${BINARY_NAMES.join(' and ')} on PATH); install docker-registry (Debian) or distribution`,
    );
  }
  const ownDir = options.dir === undefined;
  const dir = options.dir ?? (await mkdtemp(join(tmpdir(), 'fastpull-distribution-')));
  const storageDir = join(dir, 'storage');
  await mkdir(storageDir, { recursive: true });
  const port = await freePort();
  const configPath = join(dir, 'config.yml');
  await writeFile(configPath, configYAML(storageDir, port, options.accessLog === true, options.tls));

  let output = '';
  const capture = (chunk: Buffer): void => {
    if (output.length < CAP) output += chunk.toString('utf8').slice(0, CAP - output.length);
  };
  const child: ChildProcess = spawn(binary, ['serve', configPath], { stdio: ['ignore', 'pipe', 'pipe'] });
  // The access log goes to standard output, a line per request.
  const requests: string[] = [];
  let partial = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    if (!options.accessLog) return capture(chunk);
    const lines = (partial + chunk.toString('utf8')).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) if (requests.length < ACCESS_LOG_LINES) requests.push(line);
  });
  child.stderr?.on('data', capture);
  let exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  const exited = new Promise<void>((resolve) => {
    child.once('exit', (code, signal) => {
      exit = { code, signal };
      resolve();
    });
    child.once('error', (e) => {
      capture(Buffer.from(`spawn error: ${e.message}\n`));
      exit ??= { code: null, signal: null };
      resolve();
    });
  });

  const host = `127.0.0.1:${port}`;
  const url = `${options.tls ? 'https' : 'http'}://${host}`;
  // The readiness probe only asks whether it serves; the tests check its certificate themselves.
  const probe = options.tls ? new Agent({ connect: { rejectUnauthorized: false } }) : undefined;
  const stop = async (): Promise<void> => {
    if (exit === undefined) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
      await exited;
      clearTimeout(timer);
    }
    await probe?.close();
    if (ownDir) await rm(dir, { recursive: true, force: true });
  };

  const deadline = Date.now() + START_TIMEOUT_MS;
  let lastError = '';
  for (;;) {
    if (exit !== undefined) {
      await stop();
      throw new Error(`startDistribution: ${binary} exited (code ${exit.code}, signal ${exit.signal}) before serving on ${host}; output:\n${output}`);
    }
    try {
      const res = await request(`${url}/v2/`, { method: 'GET', headersTimeout: 1000, bodyTimeout: 1000, ...(probe ? { dispatcher: probe } : {}) });
      await res.body.dump();
      if (res.statusCode === 200) break;
      lastError = `GET /v2/ answered ${res.statusCode}`;
    } catch (e) {
      lastError = e instanceof Error ? e.message : String(e);
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`startDistribution: ${binary} did not serve ${url}/v2/ within ${START_TIMEOUT_MS} ms (${lastError}); output:\n${output}`);
    }
    await sleep(50);
  }
  return { host, url, storageDir, pid: child.pid, accessLog: () => requests, stop };
}

async function readCapped(body: AsyncIterable<Buffer> & { destroy(): unknown }): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    chunks.push(chunk);
    size += chunk.byteLength;
    if (size >= CAP) {
      body.destroy();
      break;
    }
  }
  return Buffer.concat(chunks).subarray(0, CAP).toString('utf8');
}

async function expectStatus(res: Awaited<ReturnType<typeof request>>, want: readonly number[], what: string): Promise<void> {
  if (want.includes(res.statusCode)) return;
  const body = await readCapped(res.body);
  throw new Error(`${what}: HTTP ${res.statusCode} (want ${want.join(' or ')}): ${body}`);
}

function header(res: Awaited<ReturnType<typeof request>>, name: string): string | undefined {
  const v = res.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** Uploads one blob unless the registry already has it (monolithic upload: POST, then PUT with the whole body). */
async function pushBlob(base: string, repository: string, digest: Digest, bytes: Buffer, via: Via = {}): Promise<void> {
  const what = `push blob ${digest} to ${base}/${repository}`;
  const head = await request(`${base}/v2/${repository}/blobs/${digest}`, { method: 'HEAD', ...via });
  await head.body.dump();
  if (head.statusCode === 200) return;
  const start = await request(`${base}/v2/${repository}/blobs/uploads/`, { method: 'POST', headers: { 'content-length': '0' }, ...via });
  await expectStatus(start, [202], `${what}: start upload`);
  await start.body.dump();
  const location = header(start, 'location');
  if (location === undefined) throw new Error(`${what}: start upload: no Location header`);
  const target = new URL(location, base);
  target.searchParams.set('digest', digest);
  const put = await request(target, {
    method: 'PUT',
    headers: { 'content-type': 'application/octet-stream', 'content-length': String(bytes.byteLength) },
    body: bytes,
    ...via,
  });
  await expectStatus(put, [201], `${what}: finish upload`);
  await put.body.dump();
}

async function pushManifest(
  base: string,
  repository: string,
  reference: string,
  bytes: Buffer,
  mediaType: string,
  want: Digest,
  via: Via = {},
): Promise<Digest> {
  const what = `push manifest ${repository}:${reference} to ${base}`;
  const res = await request(`${base}/v2/${repository}/manifests/${reference}`, {
    method: 'PUT',
    headers: { 'content-type': mediaType, 'content-length': String(bytes.byteLength) },
    body: bytes,
    ...via,
  });
  await expectStatus(res, [201], what);
  await res.body.dump();
  const got = header(res, 'docker-content-digest');
  if (got !== undefined && got !== want) throw new Error(`${what}: registry says digest ${got}, want ${want}`);
  return want;
}

function trimBase(url: string): string {
  return url.replace(/\/+$/, '');
}

/**
 * Pushes an image (config and layer blobs, then the manifest under `tag`) through the distribution
 * push API. Returns the manifest digest. Throws with the registry's answer on any failure.
 * @example
 * const reg = await startDistribution();
 * const image = await buildImage({ layers: [[{ type: 'file', path: 'hello', content: 'hi\n' }]] });
 * const digest = await pushImage(reg.url, 'app', '1', image);
 */
export async function pushImage(url: string, repository: string, tag: string, image: BuiltImage, options: PushOptions = {}): Promise<Digest> {
  const base = trimBase(url);
  const dispatcher = options.ca ? new Agent({ connect: { ca: options.ca } }) : undefined;
  const via: Via = dispatcher ? { dispatcher } : {};
  try {
    for (const [digest, bytes] of image.blobs) await pushBlob(base, repository, digest, bytes, via);
    return await pushManifest(base, repository, tag, image.manifest, image.manifestMediaType, image.manifestDigest, via);
  } finally {
    await dispatcher?.close();
  }
}

/** Options of {@link pushImage}. */
export interface PushOptions {
  /** The certificate authority a TLS registry's certificate is checked against (PEM). */
  readonly ca?: string | Buffer;
}

/** The dispatcher the requests of one push go through, if not undici's global one. */
interface Via {
  readonly dispatcher?: Dispatcher;
}

/**
 * Pushes every image of an index (blobs, then each manifest by digest), then the index under `tag`.
 * `images` defaults to the index's own. Returns the index digest.
 * @example
 * const digest = await pushIndex(reg.url, 'app', 'multi', buildIndex([amd64Image, arm64Image]));
 */
export async function pushIndex(
  url: string,
  repository: string,
  tag: string,
  index: BuiltIndex,
  images: readonly BuiltImage[] = index.images,
): Promise<Digest> {
  const base = trimBase(url);
  for (const image of images) {
    for (const [digest, bytes] of image.blobs) await pushBlob(base, repository, digest, bytes);
    await pushManifest(base, repository, image.manifestDigest, image.manifest, image.manifestMediaType, image.manifestDigest);
  }
  return pushManifest(base, repository, tag, index.index, index.mediaType, index.digest);
}

/**
 * The file in which the distribution registry stores a blob's bytes under its storage root, so a
 * test can corrupt a blob on the real registry's disk.
 * @example
 * await writeFile(blobDataPath(reg.storageDir, image.layers[0]!.digest), 'not the layer');
 */
export function blobDataPath(storageDir: string, digest: Digest): string {
  const { algorithm, hex } = parseDigest(digest);
  return join(storageDir, 'docker', 'registry', 'v2', 'blobs', algorithm, hex.slice(0, 2), hex, 'data');
}

/**
 * {@link lacks} for the CNCF distribution registry (`docker-registry`) the real-registry tests start.
 *
 * @example
 * describe.skipIf(lacksRegistry())('against docker-registry', () => {});
 */
export function lacksRegistry(env: NodeJS.ProcessEnv = process.env): boolean {
  const missing =
    findDistributionBinary() === undefined ? 'docker-registry (the CNCF distribution registry) is not installed: bash scripts/bootstrap.sh' : undefined;
  return lacks('registry', missing, env);
}
