// Every FastpullError code crosses a real gRPC call and comes back as the same error: code, message
// and details, under the gRPC status the code maps to; statuses without fastpull's metadata, and a
// socket nobody listens on, become the codes that say what happened.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCodes, FastpullError, isFastpullError, type ErrorCode } from '@fastpull/core';
import { FastpullClient } from './client.js';
import { CODE_METADATA_KEY, fromServiceError, GRPC_STATUS, MAX_STATUS_DETAILS, MAX_STATUS_MESSAGE, toStatus } from './errors.js';
import { serviceDefinition, type ContentHandlers } from './proto.js';

/** The error a call ends with: it must fail. */
async function failure(p: Promise<unknown>): Promise<FastpullError> {
  try {
    await p;
  } catch (e) {
    if (!isFastpullError(e)) throw new Error(`the call failed with something that is not a FastpullError: ${String(e)}`);
    return e;
  }
  throw new Error('the call succeeded');
}

const grpcCode = (e: FastpullError): number | undefined => (e.cause as { code?: number } | undefined)?.code;

describe('errors over a real gRPC call', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fastpull-errors-'));
  const socket = join(dir, 'errors.sock');
  const server = new grpc.Server();
  let client: FastpullClient;

  beforeAll(async () => {
    // Content.Info fails as its `digest` says: a library code, a plain Error, or a bare status.
    const handlers: ContentHandlers = {
      Info: (call, callback) => {
        const ask = call.request.digest;
        if (ask === 'plain') return callback(toStatus(new RangeError('offset out of range')));
        if (ask === 'bare') return callback({ code: grpc.status.NOT_FOUND, details: 'no such thing' });
        if (ask === 'huge') {
          // As a registry's error body or a long list of failed signature checks could make one.
          const checks = Array.from({ length: 2000 }, (_, i) => ({
            check: 'authenticity',
            signature: `sha256:${String(i).padStart(64, '0')}`,
            message: 'certificate chain does not end at a trusted root',
          }));
          return callback(
            toStatus(
              new FastpullError('SIGNATURE_INVALID', `refused: ${'no trusted signature; '.repeat(5000)}`, {
                details: { reference: 'r/x:1', checks, body: 'x'.repeat(100_000) },
              }),
            ),
          );
        }
        callback(
          toStatus(new FastpullError(ask as ErrorCode, `${ask} happened to «${ask.toLowerCase()}» — here`, { details: { code: ask, path: '/tmp/ü', n: 3 } })),
        );
      },
      List: (_call, callback) => callback(null, { blobs: [] }),
      Delete: (_call, callback) => callback(null, {}),
      GarbageCollect: (_call, callback) => callback(null, {}),
    };
    server.addService(serviceDefinition('fastpull.v1.Content'), handlers);
    await new Promise<void>((resolve, reject) =>
      server.bindAsync(`unix:${socket}`, grpc.ServerCredentials.createInsecure(), (e) => (e ? reject(e) : resolve())),
    );
    client = new FastpullClient(socket);
  });
  afterAll(async () => {
    await client?.close();
    await new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
    rmSync(dir, { recursive: true, force: true });
  });

  it('every code maps to one gRPC status and comes back as itself, message and details included', async () => {
    expect(Object.keys(GRPC_STATUS).sort()).toEqual([...ErrorCodes].sort());
    for (const code of ErrorCodes) {
      const e = await failure(client.contentInfo(code));
      expect({ code: e.code, status: grpcCode(e) }).toEqual({ code, status: GRPC_STATUS[code] });
      expect(e.message).toBe(`${code} happened to «${code.toLowerCase()}» — here`);
      expect(e.details).toEqual({ code, path: '/tmp/ü', n: 3 });
    }
  });

  it('a failure that is not a FastpullError is INTERNAL, with its message', async () => {
    const e = await failure(client.contentInfo('plain'));
    expect({ code: e.code, status: grpcCode(e), message: e.message }).toEqual({
      code: 'INTERNAL',
      status: grpc.status.INTERNAL,
      message: 'offset out of range',
    });
  });

  it('a status without fastpull-code gets the code its status means, naming the status', async () => {
    const e = await failure(client.contentInfo('bare'));
    expect(e.code).toBe('NOT_FOUND');
    expect(e.message).toMatch(/no such thing \(gRPC NOT_FOUND\)/);
  });

  it('an error with huge details or message still arrives whole in its code, its details cut to a bound and marked', async () => {
    const e = await failure(client.contentInfo('huge'));
    expect({ code: e.code, status: grpcCode(e) }).toEqual({ code: 'SIGNATURE_INVALID', status: grpc.status.FAILED_PRECONDITION });
    expect(e.message.length).toBeLessThanOrEqual(MAX_STATUS_MESSAGE + 1);
    expect(e.message.startsWith('refused: no trusted signature; ')).toBe(true);
    expect(e.message.endsWith('…')).toBe(true);
    // What fits is kept as it was; what does not is named, so a reader knows it is missing.
    expect(e.details).toMatchObject({ reference: 'r/x:1', truncated: ['body', 'checks'] });
    expect(JSON.stringify(e.details).length).toBeLessThanOrEqual(MAX_STATUS_DETAILS);
  });

  it('nobody listening at the socket is NETWORK_ERROR naming it and how to start fastpulld', async () => {
    const nobody = new FastpullClient(join(dir, 'nobody.sock'));
    try {
      const e = await failure(nobody.listImages());
      expect(e.code).toBe('NETWORK_ERROR');
      expect(e.message).toContain(`no fastpulld listens at ${join(dir, 'nobody.sock')}`);
    } finally {
      await nobody.close();
    }
  });
});

describe('toStatus and fromServiceError', () => {
  it('carry the code in the trailing metadata, and details that are not ASCII as escapes', () => {
    const s = toStatus(new FastpullError('HOSTILE_LAYER', 'a link out of the snapshot', { details: { path: 'ä/../..' } }));
    expect(s.code).toBe(grpc.status.FAILED_PRECONDITION);
    expect(s.metadata.get(CODE_METADATA_KEY)).toEqual(['HOSTILE_LAYER']);
    const back = fromServiceError({ ...s, message: s.details, name: 'Error' }, 'checking');
    expect({ code: back.code, message: back.message, details: back.details }).toEqual({
      code: 'HOSTILE_LAYER',
      message: 'a link out of the snapshot',
      details: { path: 'ä/../..' },
    });
  });

  it('a FastpullError passes through; anything else without a status is INTERNAL naming what was done', () => {
    const fe = new FastpullError('DENIED', 'no');
    expect(fromServiceError(fe, 'x')).toBe(fe);
    const e = fromServiceError(new Error('boom'), 'listing images');
    expect({ code: e.code, message: e.message }).toEqual({ code: 'INTERNAL', message: 'listing images: boom' });
  });
});
