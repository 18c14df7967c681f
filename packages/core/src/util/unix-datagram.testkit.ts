// A receiver of unix datagrams for tests, standing where a service manager's notify socket stands.
// Node cannot bind a unix datagram socket, so a small python3 program does: it reports each datagram
// with the sender's pid (SCM_CREDENTIALS, which the kernel fills in, as systemd reads it), the
// monotonic clock and, at the moment the datagram is read, whether each socket it was told to probe
// takes a connection.
import { spawn, spawnSync, type ChildProcessByStdio } from 'node:child_process';
import { rmSync } from 'node:fs';
import type { Readable, Writable } from 'node:stream';

const RECEIVER = `
import json, socket, struct, sys, time
address, probes = sys.argv[1], sys.argv[2:]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
s.bind('\\0' + address[1:] if address.startswith('@') else address)
print(json.dumps({'listening': True}), flush=True)
def answers(path):
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        c.connect(path)
        return True
    except OSError:
        return False
    finally:
        c.close()
while True:
    data, ancillary, _, _ = s.recvmsg(65536, socket.CMSG_SPACE(12))
    pid = None
    for level, kind, body in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
            pid = struct.unpack('iII', body[:12])[0]
    read_usec = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    answered = {p: answers(p) for p in probes}
    print(json.dumps({'text': data.decode('utf-8', 'replace'), 'pid': pid, 'answered': answered, 'readUsec': read_usec}), flush=True)
`;

/** One datagram as the receiver read it. */
export interface Datagram {
  /** The datagram, as UTF-8. */
  readonly text: string;
  /** Its `KEY=VALUE` lines. */
  readonly fields: Record<string, string>;
  /** The sending process, as the kernel vouches for it. */
  readonly pid: number | null;
  /** For each probed socket path: whether it took a connection when the datagram was read. */
  readonly answered: Record<string, boolean>;
  /** CLOCK_MONOTONIC when it was read, in microseconds. */
  readonly readUsec: bigint;
}

/** A bound receiver. */
export interface DatagramListener {
  readonly address: string;
  /** Every datagram read so far, in order. */
  readonly received: readonly Datagram[];
  /** The next datagram not yet returned by next(), waiting for it; rejects if the receiver exits. */
  next(): Promise<Datagram>;
  close(): Promise<void>;
}

/** Why the receiver cannot run here, or undefined when it can. */
export function datagramListenerUnavailable(): string | undefined {
  const r = spawnSync('python3', ['-c', 'import socket; socket.SO_PASSCRED'], { stdio: 'ignore' });
  return r.status === 0 ? undefined : 'python3 (with socket.SO_PASSCRED) is not available';
}

/** Binds a receiver at `address` (a path, or `@name` for the abstract namespace); resolves once it is bound. */
export async function listenDatagrams(address: string, probes: readonly string[] = []): Promise<DatagramListener> {
  const child: ChildProcessByStdio<Writable, Readable, Readable> = spawn('python3', ['-c', RECEIVER, address, ...probes], { stdio: ['pipe', 'pipe', 'pipe'] });
  const received: Datagram[] = [];
  let taken = 0;
  let stderr = '';
  let exited: Error | undefined;
  let wake: (() => void) | undefined;
  let bound!: () => void;
  let failed!: (e: Error) => void;
  const listening = new Promise<void>((resolve, reject) => ((bound = resolve), (failed = reject)));
  let buf = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  child.stdout.on('data', (d: Buffer) => {
    buf += d.toString();
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = JSON.parse(buf.slice(0, nl)) as {
        listening?: true;
        text?: string;
        pid?: number | null;
        answered?: Record<string, boolean>;
        readUsec?: number;
      };
      buf = buf.slice(nl + 1);
      if (line.listening) {
        bound();
        continue;
      }
      const text = line.text ?? '';
      const fields = Object.fromEntries(
        text
          .split('\n')
          .filter((l) => l.includes('='))
          .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
      );
      received.push({ text, fields, pid: line.pid ?? null, answered: line.answered ?? {}, readUsec: BigInt(line.readUsec ?? 0) });
      wake?.();
    }
  });
  child.on('exit', (code, signal) => {
    exited = new Error(`the datagram receiver exited (${signal ?? code}): ${stderr}`);
    failed(exited);
    wake?.();
  });
  await listening;
  return {
    address,
    received,
    async next() {
      while (taken >= received.length) {
        if (exited) throw exited;
        await new Promise<void>((resolve) => (wake = resolve));
      }
      return received[taken++]!;
    },
    async close() {
      if (child.exitCode === null && child.signalCode === null) {
        const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
        child.kill('SIGKILL');
        await gone;
      }
      if (!address.startsWith('@')) rmSync(address, { force: true });
    },
  };
}
