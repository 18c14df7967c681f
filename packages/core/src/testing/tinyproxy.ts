// Debian's tinyproxy as a real HTTP proxy on loopback for the proxy tests: CONNECT tunnels, plain
// HTTP in absolute form, Basic credentials, and a log of every request it took.
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { lacks } from './needs.js';

/** A tinyproxy serving on loopback. */
export interface Tinyproxy {
  /** `http://127.0.0.1:PORT`, without credentials. */
  readonly url: string;
  /** The loopback port it listens on. */
  readonly port: number;
  /** The request lines it logged so far (`CONNECT host:port HTTP/1.1`, `GET http://... HTTP/1.1`). */
  requests(): string[];
  /** Stops it and removes its directory. */
  stop(): Promise<void>;
}

/** Options of {@link startTinyproxy}. */
export interface TinyproxyOptions {
  /** Requests must carry these Basic credentials (else 407). */
  readonly basicAuth?: { readonly user: string; readonly password: string };
  /** Ports CONNECT may reach (default: all); others are refused with 403. */
  readonly connectPorts?: readonly number[];
}

/**
 * The tinyproxy binary, or undefined when it is not installed.
 * @example findTinyproxy() // '/usr/bin/tinyproxy'
 */
export function findTinyproxy(): string | undefined {
  for (const dir of ['/usr/bin', '/usr/sbin', ...(process.env.PATH ?? '').split(delimiter)]) {
    if (dir === '') continue;
    try {
      accessSync(join(dir, 'tinyproxy'), constants.X_OK);
      return join(dir, 'tinyproxy');
    } catch {
      // Not here.
    }
  }
  return undefined;
}

/**
 * {@link lacks} for tinyproxy.
 * @example describe.skipIf(lacksTinyproxy())('through a proxy', () => {});
 */
export function lacksTinyproxy(env: NodeJS.ProcessEnv = process.env): boolean {
  return lacks('tinyproxy', findTinyproxy() === undefined ? 'tinyproxy is not installed: bash scripts/bootstrap.sh' : undefined, env);
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address !== null ? address.port : 0));
    });
  });
}

/** Resolves once something accepts a connection on the port, rejects when the process exits first. */
async function accepting(port: number, exited: Promise<string>): Promise<void> {
  let gone: string | undefined;
  void exited.then((why) => (gone = why));
  for (;;) {
    if (gone !== undefined) throw new Error(`startTinyproxy: tinyproxy exited before it listened: ${gone}`);
    const ok = await new Promise<boolean>((resolve) => {
      const s = connect({ host: '127.0.0.1', port }, () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    // Until it listens, each try is refused at once; the exit check above ends a failed start.
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Starts tinyproxy on a free loopback port, in the foreground, logging each request line.
 * @example
 * const proxy = await startTinyproxy();
 * try { await pull(ref, { root, proxy: { httpsProxy: proxy.url, proxyLoopback: true } }); } finally { await proxy.stop(); }
 */
export async function startTinyproxy(options: TinyproxyOptions = {}): Promise<Tinyproxy> {
  const binary = findTinyproxy();
  if (binary === undefined) throw new Error('startTinyproxy: tinyproxy is not installed (Debian package tinyproxy)');
  const dir = mkdtempSync(join(tmpdir(), 'fastpull-tinyproxy-'));
  const port = await freePort();
  const log = join(dir, 'tinyproxy.log');
  const config = [
    `Port ${port}`,
    'Listen 127.0.0.1',
    'Timeout 60',
    `LogFile "${log}"`,
    'LogLevel Connect',
    'MaxClients 64',
    'Allow 127.0.0.1',
    ...(options.basicAuth ? [`BasicAuth ${options.basicAuth.user} ${options.basicAuth.password}`] : []),
    ...(options.connectPorts ?? []).map((p) => `ConnectPort ${p}`),
    '',
  ].join('\n');
  writeFileSync(join(dir, 'tinyproxy.conf'), config);
  const child: ChildProcess = spawn(binary, ['-d', '-c', join(dir, 'tinyproxy.conf')], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (c: Buffer) => (stderr = (stderr + c.toString('utf8')).slice(-4096)));
  const exited = new Promise<string>((resolve) => child.once('exit', (code, signal) => resolve(`code ${code} signal ${signal}: ${stderr}`)));
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await accepting(port, exited);
  } catch (e) {
    await stop();
    throw e;
  }
  const requests = (): string[] => {
    let text = '';
    try {
      text = readFileSync(log, 'utf8');
    } catch {
      return [];
    }
    return [...text.matchAll(/Request \(file descriptor \d+\): (.*)$/gm)].map((m) => m[1]!);
  };
  return { url: `http://127.0.0.1:${port}`, port, requests, stop };
}
