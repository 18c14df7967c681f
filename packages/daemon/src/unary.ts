// One unary gRPC method of fastpulld from an async function: its response sent, or its failure sent
// as the status of its library code and logged once.
import type * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { asFastpullError } from '@fastpull/core';
import { toStatus } from './errors.js';

/**
 * A unary method: the request as received, the response built to its full shape (every field, as
 * the loader's `defaults` presents a received one), a failure sent as its status.
 */
export function unary<Req, Res>(log: Logger, method: string, fn: (req: Req) => Promise<Res>): grpc.handleUnaryCall<Req, Res> {
  return (call, callback) => {
    // Through a promise, so a request checked (and refused) synchronously still gets its status.
    Promise.resolve(call.request)
      .then(fn)
      .then(
        (res) => callback(null, res),
        (e: unknown) => {
          logFailure(log, method, e);
          callback(toStatus(e));
        },
      );
  };
}

/** A failed request in the log: the caller's mistakes at info, the daemon's own at error. */
export function logFailure(log: Logger, method: string, e: unknown): void {
  const { code, message } = asFastpullError(e);
  log[code === 'INTERNAL' ? 'error' : 'info']({ method, code, err: message }, 'request failed');
}
