// How fastpulld takes connections on a unix socket: at most `maxConnections` at once (net.Server
// refuses the next by closing it at once), and each must finish HTTP/2's client preface within
// `handshakeTimeoutMs` before the gRPC server sees it. Past the handshake, grpc-js's own
// `grpc.max_connection_idle_ms` drops a connection that runs no call (see grpcServerOptions).
//
// grpc-js has no connection limit and no handshake deadline of its own, and its bindAsync keeps its
// listener to itself; its connection injector takes sockets accepted here instead.
import { createServer, type Server, type Socket } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';

/** The bounds of one socket's connections. */
export interface ConnectionLimits {
  /** Connections open at once; the next is closed as soon as it is accepted. */
  readonly maxConnections: number;
  /** Milliseconds a new connection has to send the HTTP/2 client preface (magic and SETTINGS). */
  readonly handshakeTimeoutMs: number;
}

/** What grpc.Server needs so that an idle connection is dropped and a connection's calls are bounded. */
export interface ServerLimits {
  /** Milliseconds a connection may run no call before it is closed (GOAWAY). */
  readonly idleTimeoutMs: number;
}

/**
 * Calls at once on one connection. containerd multiplexes all its snapshotter calls over one
 * connection; its client queues calls past the bound rather than failing them.
 */
export const MAX_CONCURRENT_STREAMS = 1000;

/** The grpc.Server options that bound what a connection holds once handshaken. */
export function grpcServerOptions(limits: ServerLimits): grpc.ServerOptions {
  return { 'grpc.max_connection_idle_ms': limits.idleTimeoutMs, 'grpc.max_concurrent_streams': MAX_CONCURRENT_STREAMS };
}

/** RFC 9113, section 3.4: what every HTTP/2 client sends first, before its SETTINGS frame. */
const MAGIC = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
const FRAME_HEADER_BYTES = 9;
const SETTINGS_FRAME = 0x4;
/** A SETTINGS frame larger than the initial SETTINGS_MAX_FRAME_SIZE is a protocol error. */
const MAX_SETTINGS_BYTES = 16_384;

/**
 * How many bytes at the start of `buf` are the client preface (magic, then a whole SETTINGS frame);
 * 0 while it may still be one, -1 when it is not (then nothing would make a session of it).
 */
export function prefaceLength(buf: Buffer): number {
  const n = Math.min(buf.length, MAGIC.length);
  if (!buf.subarray(0, n).equals(MAGIC.subarray(0, n))) return -1;
  if (buf.length < MAGIC.length + FRAME_HEADER_BYTES) return 0;
  const length = buf.readUIntBE(MAGIC.length, 3);
  if (buf[MAGIC.length + 3] !== SETTINGS_FRAME || length % 6 !== 0 || length > MAX_SETTINGS_BYTES) return -1;
  const total = MAGIC.length + FRAME_HEADER_BYTES + length;
  return buf.length >= total ? total : 0;
}

/**
 * A socket's listener. close() stops taking connections and drops those still handshaking; those
 * handed to the gRPC server are its to close (tryShutdown, forceShutdown).
 */
export interface UnixListener {
  close(): void;
}

/**
 * Listens on `path` (already prepared, with the umask set by the caller) and hands each connection
 * that completes its handshake in time to `server`. `what` names the socket in logs.
 */
export async function listenConnections(server: grpc.Server, path: string, limits: ConnectionLimits, log: Logger, what: string): Promise<UnixListener> {
  const injector = server.createConnectionInjector(grpc.ServerCredentials.createInsecure());
  const handshaking = new Set<Socket>();
  const net: Server = createServer((socket) => handshake(socket, limits.handshakeTimeoutMs, handshaking, (s) => injector.injectConnection(s)));
  net.maxConnections = limits.maxConnections;
  // One line when the limit starts refusing and one when it takes connections again, however many
  // clients are refused in between (a flood must not flood the log as well).
  let refused = 0;
  net.on('drop', () => {
    if (refused++ === 0) log.warn({ socket: path, what, maxConnections: limits.maxConnections }, 'connection limit reached; refusing new connections');
  });
  net.on('connection', (socket: Socket) =>
    socket.once('close', () => {
      if (refused === 0) return;
      log.info({ socket: path, what, refused }, 'taking connections again');
      refused = 0;
    }),
  );
  await new Promise<void>((resolve, reject) => {
    net.once('error', reject);
    net.listen(path, () => {
      net.off('error', reject);
      resolve();
    });
  });
  return {
    close: () => {
      net.close();
      for (const s of handshaking) s.destroy();
    },
  };
}

/** Reads the client preface of `socket` within `timeoutMs`, then gives the socket, preface unread, to `inject`. */
function handshake(socket: Socket, timeoutMs: number, handshaking: Set<Socket>, inject: (s: Socket) => void): void {
  handshaking.add(socket);
  // An absolute deadline: socket.setTimeout would restart with every byte a trickling client sends.
  const deadline = setTimeout(() => socket.destroy(), timeoutMs);
  deadline.unref();
  let buffered = Buffer.alloc(0);
  const done = (): void => {
    clearTimeout(deadline);
    handshaking.delete(socket);
    socket.off('data', onData);
  };
  const onData = (chunk: Buffer): void => {
    buffered = Buffer.concat([buffered, chunk]);
    const n = prefaceLength(buffered);
    if (n === 0) return;
    done();
    if (n < 0) {
      socket.destroy();
      return;
    }
    // What was read goes back: node's HTTP/2 session reads a socket's buffered bytes first.
    socket.pause();
    socket.unshift(buffered);
    inject(socket);
  };
  socket.on('data', onData);
  socket.once('close', done);
  // A client that resets its end: nothing to do but let the socket close.
  socket.on('error', () => undefined);
}
